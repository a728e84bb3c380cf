/**
 * The cluster resources that serve a pushed catalog, as oc-mirror v2 writes them
 * (internal/pkg/clusterresources): a CatalogSource for OLM v0 (`operators.coreos.com/v1alpha1`,
 * openshift-marketplace, sourceType grpc) and a ClusterCatalog for OLM v1
 * (`olm.operatorframework.io/v1`, source type Image), named `cs-`/`cc-` + the mirror
 * repository's last component + the tag's first 12 characters (the digest's first 12 hex when
 * untagged), dots and other characters DNS-1035 refuses as `-`. Both name the catalog BY DIGEST
 * (oc-mirror writes the tag): what was verified is what the cluster serves, and a ClusterCatalog
 * by digest is not polled. Neither sets extractContent.cacheDir: a rebuilt catalog has no
 * prebuilt opm cache (catalog-image.ts). Pure.
 */
import yaml from 'js-yaml';
import { parseReference } from '../registry/reference.js';

export interface CatalogResource {
  /** The file name (`<name>.yaml`) and the document. */
  readonly file: string;
  readonly name: string;
  readonly kind: 'CatalogSource' | 'ClusterCatalog';
  readonly text: string;
}

/** oc-mirror's hashTruncLen. */
const SUFFIX_LENGTH = 12;
const LABELS = { 'app.kubernetes.io/managed-by': 'prestage' } as const;

/** `mirror` names the pushed catalog by digest; `tagged` by the tag push wrote, if any. */
export function catalogResources(mirror: string, tagged: string | undefined): [CatalogResource, CatalogResource] {
  const byDigest = parseReference(mirror);
  const tag = tagged !== undefined ? parseReference(tagged).tag : undefined;
  const suffix = tag !== undefined ? tag.slice(0, SUFFIX_LENGTH) : byDigest.digest!.slice('sha256:'.length, 'sha256:'.length + SUFFIX_LENGTH);
  const repository = byDigest.repository.split('/').at(-1)!;
  const source = resourceName('cs', repository, suffix);
  const catalog = resourceName('cc', repository, suffix);
  const catalogSource = {
    apiVersion: 'operators.coreos.com/v1alpha1',
    kind: 'CatalogSource',
    metadata: { name: source, namespace: 'openshift-marketplace', labels: LABELS },
    spec: { sourceType: 'grpc', image: mirror },
  };
  const clusterCatalog = {
    apiVersion: 'olm.operatorframework.io/v1',
    kind: 'ClusterCatalog',
    metadata: { name: catalog, labels: LABELS },
    spec: { priority: 0, source: { type: 'Image', image: { ref: mirror } } },
  };
  return [
    { file: `${source}.yaml`, name: source, kind: 'CatalogSource', text: render(catalogSource) },
    { file: `${catalog}.yaml`, name: catalog, kind: 'ClusterCatalog', text: render(clusterCatalog) },
  ];
}

/** oc-mirror's name, made a DNS-1035 label where it would refuse one (an `_` in the repository, over 63 characters). */
export function resourceName(prefix: 'cs' | 'cc', repository: string, suffix: string): string {
  const name = `${prefix}-${repository}-${suffix}`.toLowerCase().replace(/[^a-z0-9-]/g, '-');
  return name.slice(0, 63).replace(/-+$/, '');
}

function render(doc: unknown): string {
  return yaml.dump(doc, { lineWidth: -1, noRefs: true, sortKeys: false });
}
