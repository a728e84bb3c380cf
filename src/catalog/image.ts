/**
 * A file-based catalog read from its image over the registry API: the config's
 * `operators.operatorframework.io.index.configs.v1` label names the FBC root; every layer is
 * streamed and applied in order with its whiteouts (layers.ts), each file under the root parsed
 * into the compact model as it arrives (load.ts). A SQLite catalog (the pre-FBC
 * `index.database.v1` label) is refused.
 */
import { posix } from 'node:path';
import { BadInputError } from '../errors.js';
import { ManifestNotFoundError, type RegistryClient } from '../registry/client.js';
import type { Descriptor } from '../registry/manifest.js';
import { digestReference, formatReference, parseReference } from '../registry/reference.js';
import type { Catalog, CatalogBundle, DeclarativeConfig } from './declcfg.js';
import { applyLayers, readLayerChange, type LayerLimits } from './layers.js';
import { CATALOG_LIMITS, loadCatalogFile, type CatalogFile, type CatalogLimits } from './load.js';

export const CONFIGS_LABEL = 'operators.operatorframework.io.index.configs.v1';
export const DATABASE_LABEL = 'operators.operatorframework.io.index.database.v1';

/** Bounds of one catalog image beyond its documents'. */
export interface CatalogImageLimits extends CatalogLimits, LayerLimits {
  readonly maxLayers: number;
}

/** A layer inflating past 4 GiB is refused (the base layers of opm's image are ~150 MB). */
export const CATALOG_IMAGE_LIMITS: CatalogImageLimits = { ...CATALOG_LIMITS, maxLayerBytes: 4 * 1024 ** 3, maxLayers: 128, maxFiles: 100_000 };


export async function readCatalog(client: RegistryClient, reference: string, arch: string, warnings: string[], limits: CatalogImageLimits = CATALOG_IMAGE_LIMITS): Promise<Catalog> {
  const ref = parseReference(reference);
  const named = formatReference(ref);
  let image;
  try {
    image = await client.resolveImage(ref, arch);
  } catch (error) {
    if (error instanceof ManifestNotFoundError) throw new BadInputError(`catalog image ${named} not found; check the reference (and --mirror when reading from a mirror)`);
    throw error;
  }
  const configsDir = await catalogRoot(client, reference, image.manifest.config, named);
  const layers = image.manifest.layers;
  if (layers.length > limits.maxLayers) throw new BadInputError(`catalog ${named} has ${layers.length} layers, over the limit of ${limits.maxLayers}; not a sane catalog image`);
  const documents = { count: 0 };
  const where = `catalog ${named}`;
  const parse = (text: string, rel: string): CatalogFile => {
    const file = loadCatalogFile(text, `${where}: ${configsDir}/${rel}`, limits, documents.count);
    documents.count += file.documents;
    return file;
  };
  const changes = await Promise.all(layers.map((layer) => readLayerChange({ ...layer, open: () => client.blobStream(ref, layer) }, configsDir, limits, where, parse, warnings)));
  const files = applyLayers(changes, configsDir);
  if (files.size > limits.maxFiles) throw new BadInputError(`${where}: over ${limits.maxFiles} files under ${configsDir}; not a sane catalog`);
  if (files.size === 0) throw new BadInputError(`catalog ${named}: its ${CONFIGS_LABEL} label names ${configsDir}, which holds no catalog files; is it a catalog image?`);
  const digest = image.listDigest ?? image.digest;
  return { reference, pullSpec: digestReference(ref, digest), digest, configsDir, config: assemble([...files.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, f]) => f), named) };
}

/** The FBC root the image's config labels name, or a one-line refusal. */
async function catalogRoot(client: RegistryClient, reference: string, config: Descriptor, named: string): Promise<string> {
  const bytes = await client.readBlob(parseReference(reference), config, 4 * 1024 * 1024);
  let labels: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(bytes.toString('utf8')) as { config?: { Labels?: Record<string, unknown> | null } };
    labels = parsed.config?.Labels ?? {};
  } catch {
    throw new BadInputError(`catalog ${named}: its image config is not JSON; not a catalog image`);
  }
  return catalogRootOf(labels, named);
}

/**
 * The FBC root a catalog image's labels name: an absolute path below `/` without `..`, the only
 * kind a reader may join paths under; a SQLite catalog's label is refused in one line that says so.
 */
export function catalogRootOf(labels: Readonly<Record<string, unknown>>, named: string): string {
  const root = labels[CONFIGS_LABEL];
  if (root === undefined && labels[DATABASE_LABEL] !== undefined) {
    throw new BadInputError(`catalog ${named} is a SQLite (pre-FBC) catalog (label ${DATABASE_LABEL}); OLM serves only file-based catalogs since OpenShift 4.11: use the FBC catalog of your release (v4.11 or later), or convert it with opm migrate`);
  }
  if (typeof root !== 'string' || root === '') throw new BadInputError(`catalog ${named} has no ${CONFIGS_LABEL} label; it is not a file-based catalog image`);
  const normal = posix.normalize(root);
  if (!root.startsWith('/') || root.split('/').includes('..') || normal === '/' || /[\0\n]/.test(root)) {
    throw new BadInputError(`catalog ${named}: its ${CONFIGS_LABEL} label ${JSON.stringify(root)} is not a directory inside the image (an absolute path below /, without ..)`);
  }
  return normal.replace(/\/+$/, '');
}

/** The files' parts as one model, checked as opm checks a catalog's references. */
function assemble(files: readonly CatalogFile[], named: string): DeclarativeConfig {
  const packages = files.flatMap((f) => f.packages);
  const channels = files.flatMap((f) => f.channels);
  const bundles = files.flatMap((f) => f.bundles);
  const deprecations = files.flatMap((f) => f.deprecations);
  const packageNames = new Set<string>();
  for (const p of packages) {
    if (packageNames.has(p.name)) throw new BadInputError(`catalog ${named}: package ${p.name} is declared twice; opm refuses such a catalog`);
    packageNames.add(p.name);
  }
  const bundleKeys = new Set<string>();
  for (const b of bundles) {
    if (!packageNames.has(b.package)) throw new BadInputError(`catalog ${named}: bundle ${b.name} names package ${b.package}, which the catalog does not declare`);
    const key = `${b.package}/${b.name}`;
    if (bundleKeys.has(key)) throw new BadInputError(`catalog ${named}: bundle ${b.name} of package ${b.package} is declared twice`);
    bundleKeys.add(key);
  }
  const channelKeys = new Set<string>();
  for (const c of channels) {
    if (!packageNames.has(c.package)) throw new BadInputError(`catalog ${named}: channel ${c.name} names package ${c.package}, which the catalog does not declare`);
    const key = `${c.package}/${c.name}`;
    if (channelKeys.has(key)) throw new BadInputError(`catalog ${named}: channel ${c.name} of package ${c.package} is declared twice`);
    channelKeys.add(key);
    for (const e of c.entries) if (!bundleKeys.has(`${c.package}/${e.name}`)) throw new BadInputError(`catalog ${named}: channel ${c.name} of package ${c.package} names bundle ${e.name}, which the catalog does not hold`);
  }
  return { packages, channels, bundles, deprecations };
}

