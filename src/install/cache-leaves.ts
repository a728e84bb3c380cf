/**
 * `install --cache --cache-leaves N` / `--cache-leaf-label LABEL`: leaf caches under the root cache
 * (src/api/cache-tree.ts), each a pull-through cache of the root over plain in-cluster HTTP. Leaf
 * pods have their own `app.kubernetes.io/name`, so the root Service never selects them.
 */
import { BadInputError } from '../errors.js';
import type { Manifest } from './apply.js';
import { CACHE_NAME } from '../api/names.js';
import { leafObjectName, MAX_CACHE_LEAVES } from '../api/cache-tree.js';
import { cacheConfig, cacheDeployment, cacheLabels, CACHE_PORT, cacheServicePorts, type CacheOptions, type CacheTreeOptions } from './cache.js';

export const LEAF_APP_NAME = `${CACHE_NAME}-leaf`;
export const CACHE_TIER_LABEL = 'prestage.dev/cache-tier';
export const CACHE_LEAF_LABEL = 'prestage.dev/cache-leaf';
/** What `--no-cache` and a smaller tree list to delete. */
export const LEAF_SELECTOR = `${CACHE_TIER_LABEL}=leaf`;

const QUANTITY = /^\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$/;
const LABEL_KEY = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** One-line BadInputErrors naming the flag. */
export function checkCacheTree(tree: CacheTreeOptions): void {
  if (tree.leaves !== undefined && tree.label !== undefined) throw new BadInputError('--cache-leaves and --cache-leaf-label exclude each other: leaves by count (nodes hashed over them) or one per label value');
  if (tree.leaves !== undefined && !(Number.isInteger(tree.leaves) && tree.leaves >= 1 && tree.leaves <= MAX_CACHE_LEAVES)) throw new BadInputError(`--cache-leaves ${tree.leaves}: must be an integer 1..${MAX_CACHE_LEAVES}`);
  if (tree.label !== undefined && !LABEL_KEY.test(tree.label)) throw new BadInputError(`--cache-leaf-label ${tree.label}: not a label key, e.g. topology.kubernetes.io/zone`);
  if (!QUANTITY.test(tree.size)) throw new BadInputError(`--cache-leaf-size ${tree.size}: not a Kubernetes quantity, e.g. 100Gi`);
  if (tree.hostPath !== undefined && !tree.hostPath.startsWith('/')) throw new BadInputError(`--cache-leaf-host-path ${tree.hostPath}: must be an absolute path`);
}

/** The leaves' names: `leaf-0`.. by count, or the label's distinct values among the nodes (sorted). */
export function leafNames(tree: CacheTreeOptions, nodes: ReadonlyArray<{ labels?: Readonly<Record<string, string>> }> = []): string[] {
  if (tree.label === undefined) return Array.from({ length: tree.leaves ?? 0 }, (_, index) => `leaf-${index}`);
  const label = tree.label;
  const values = [...new Set(nodes.flatMap((node) => (node.labels?.[label] !== undefined ? [node.labels[label]] : [])))].sort();
  if (values.length > MAX_CACHE_LEAVES) throw new BadInputError(`--cache-leaf-label ${label}: the nodes have ${values.length} values, at most ${MAX_CACHE_LEAVES} leaves; use --cache-leaves N instead`);
  return values;
}

/** One leaf's objects, in apply order: a proxy of the root at `rootClusterIP`, no credentials. */
export function leafManifests(cache: CacheOptions, tree: CacheTreeOptions, leaf: string, rootClusterIP: string): Manifest[] {
  const { namespace } = cache;
  const name = leafObjectName(CACHE_NAME, leaf);
  const selector = { 'app.kubernetes.io/name': LEAF_APP_NAME, [CACHE_LEAF_LABEL]: leaf };
  const labels = { ...cacheLabels(cache.upstream), ...selector, [CACHE_TIER_LABEL]: 'leaf' };
  const root = rootClusterIP.includes(':') ? `[${rootClusterIP}]` : rootClusterIP;
  const affinity =
    tree.label !== undefined
      ? { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: tree.label, operator: 'In', values: [leaf] }] }] } } }
      : // Hashed leaves: spread over nodes where there are enough, never blocked where there are not.
        { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { 'app.kubernetes.io/name': LEAF_APP_NAME } } } }] } };
  const manifests: Manifest[] = [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, labels }, data: { 'config.yml': cacheConfig(`http://${root}:${CACHE_PORT}`) } }];
  if (tree.hostPath === undefined) {
    manifests.push({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name, namespace, labels },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: tree.size } }, ...(cache.storageClass !== undefined ? { storageClassName: cache.storageClass } : {}) },
    });
  }
  manifests.push(
    cacheDeployment({ name, namespace, labels, selector, image: cache.image, affinity, ...(tree.hostPath !== undefined ? { hostPath: tree.hostPath } : {}) }),
    { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace, labels }, spec: { type: 'ClusterIP', selector, ports: cacheServicePorts() } },
  );
  return manifests;
}

/** The leaf's agent flag. */
export function cacheLeafArg(leaf: string, clusterIP: string): string {
  return `--cache-leaf=${leaf}=${clusterIP.includes(':') ? `[${clusterIP}]` : clusterIP}:${CACHE_PORT}`;
}

/** The leaves' objects by kind, for deleting with LEAF_SELECTOR. */
export function leafCollections(namespace: string): Array<{ kind: string; path: string }> {
  const ns = `namespaces/${namespace}`;
  return [
    { kind: 'deployment', path: `/apis/apps/v1/${ns}/deployments` },
    { kind: 'service', path: `/api/v1/${ns}/services` },
    { kind: 'configmap', path: `/api/v1/${ns}/configmaps` },
    { kind: 'persistentvolumeclaim', path: `/api/v1/${ns}/persistentvolumeclaims` },
  ];
}
