/**
 * The cache tree (`install --cache-leaves N` or `--cache-leaf-label LABEL`): one root cache on the
 * slow link, leaf caches near the nodes, each leaf a pull-through cache of the root. Each node pulls
 * from its own leaf first, then the root, then the source. The installer, the agents and the
 * fan-out model choose a node's leaf with the same function.
 */
import { createHash } from 'node:crypto';
import { BadInputError } from '../errors.js';

/** A leaf cache: its name (a label value, or `leaf-N`) and where nodes reach it (`10.0.0.7:5000`, plain HTTP). */
export interface CacheLeaf {
  readonly name: string;
  readonly location: string;
}

/** The label the installer's leaves are chosen by when the admin names none. */
export const DEFAULT_LEAF_LABEL = 'topology.kubernetes.io/zone';
/** At most this many leaves: each is a Deployment, a Service and a volume. */
export const MAX_CACHE_LEAVES = 64;

const LABEL_VALUE = /^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/;
const HOST_PORT = /^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:]+\])(?::\d{1,5})?$/i;

/** `zone-a=10.0.0.7:5000`: a one-line BadInputError naming the value and the form. */
export function parseCacheLeaf(text: string): CacheLeaf {
  const [name = '', location = '', ...rest] = String(text).split('=');
  const fail = (why: string): never => {
    throw new BadInputError(`--cache-leaf ${text}: ${why}; expected NAME=HOST[:PORT], e.g. zone-a=10.0.0.7:5000`);
  };
  if (rest.length > 0 || !name || !location) fail('not NAME=HOST[:PORT]');
  if (!LABEL_VALUE.test(name)) fail(`the name "${name}" is not a label value (letters, digits, '-', '_', '.', at most 63)`);
  if (!HOST_PORT.test(location)) fail(`the cache "${location}" is not HOST[:PORT]`);
  return { name, location };
}

export function parseCacheLeaves(values: readonly string[]): CacheLeaf[] {
  const leaves = values.map(parseCacheLeaf);
  if (leaves.length > MAX_CACHE_LEAVES) throw new BadInputError(`--cache-leaf given ${leaves.length} times: at most ${MAX_CACHE_LEAVES} leaves`);
  const names = new Set<string>();
  for (const leaf of leaves) {
    if (names.has(leaf.name)) throw new BadInputError(`--cache-leaf names ${leaf.name} twice; give one cache per leaf`);
    names.add(leaf.name);
  }
  return leaves;
}

export interface NodeForLeaf {
  readonly name: string;
  readonly labels?: Readonly<Record<string, string>>;
}

/**
 * The node's leaf: with `label`, the leaf named by the node's value of that label (none: the node
 * pulls from the root); without it, by rendezvous hashing of the node's name over the leaves' names
 * (a leaf added or removed moves only the nodes that hash to it).
 */
export function chooseLeaf(node: NodeForLeaf, leaves: readonly CacheLeaf[], label?: string): CacheLeaf | undefined {
  if (leaves.length === 0) return undefined;
  if (label !== undefined) {
    const value = node.labels?.[label];
    return value === undefined ? undefined : leaves.find((leaf) => leaf.name === value);
  }
  let best: CacheLeaf | undefined;
  let bestScore = '';
  for (const leaf of leaves) {
    const score = createHash('sha256').update(`${leaf.name}\n${node.name}`).digest('hex');
    if (best === undefined || score > bestScore) [best, bestScore] = [leaf, score];
  }
  return best;
}

/** A Kubernetes object name for a leaf's objects: `prestage-cache-leaf-<name>`, lower-cased, a short hash where the name had to change. */
export function leafObjectName(cacheName: string, leafName: string): string {
  const clean = leafName.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 30);
  const suffix = clean === leafName && clean.length > 0 ? clean : `${clean || 'leaf'}-${createHash('sha256').update(leafName).digest('hex').slice(0, 6)}`;
  return `${cacheName}-leaf-${suffix}`;
}
