/**
 * The fan-out model of the cache tree: how long staging one image set takes, and how many bytes
 * each tier carries, when one ROOT cache sits on the slow link and L LEAF caches (pull-through
 * caches of the root) serve the nodes. It models the order the implementation warms in, one phase
 * after the other:
 *   1. root warm: one agent reads every unique blob through the root once, paced at the link rate
 *      (8 blobs at once, so the link, not a round trip, is the bound): link bytes = U;
 *   2. leaf warm: every leaf at once reads what its nodes need through itself; the root sends
 *      L x U over its NIC, each leaf takes U in over its own NIC;
 *   3. nodes: each leaf sends its k nodes a x W each (a >= 1: CRI-O fetches a shared layer again
 *      for each concurrent pull of an image sharing it; a = 1 at pull concurrency 1), each node
 *      bounded by its NIC and its disk (uncompressed bytes), plus a fixed cost per pull
 *      (AGENT_PULL_SECONDS) divided by the pull concurrency.
 * With no leaves (the one-cache baseline) the nodes pull from the root over the root's NIC.
 * Every node needs the same set (U_leaf = U). Leaves are chosen with chooseLeaf, as the agents do,
 * so the busiest leaf is the one rendezvous hashing really loads. Pure: no I/O.
 */
import { chooseLeaf, type CacheLeaf } from '../../api/cache-tree.js';
import { AGENT_PULL_SECONDS } from './eta.js';

export interface FanoutParams {
  /** Nodes `node-0..node-(N-1)`. */
  nodes: number;
  /** Leaves `leaf-0..leaf-(L-1)`; 0: one cache, the nodes pull from the root. */
  leaves: number;
  /** U: the set's unique compressed bytes (what crosses the link once). */
  uniqueBytes: number;
  /** W: the compressed blob bytes one node needs. */
  nodeBytes: number;
  /** What one node writes to disk (uncompressed). */
  nodeUncompressedBytes: number;
  /** Images one node pulls. */
  pullsPerNode: number;
  /** Pulls a node runs at once. */
  concurrency: number;
  /** a >= 1: bytes served to a node over W. */
  amplification: number;
  linkBytesPerSecond: number;
  rootNicBytesPerSecond: number;
  leafNicBytesPerSecond: number;
  nodeNicBytesPerSecond: number;
  diskBytesPerSecond: number;
  /** The fixed cost of one pull; AGENT_PULL_SECONDS unless given. */
  pullSeconds?: number;
}

export interface LeafLoad {
  name: string;
  nodes: number;
  /** Its own warm read (U) plus what it serves its nodes (k x a x W). */
  egressBytes: number;
}

export interface FanoutResult {
  seconds: { rootWarm: number; leafWarm: number; nodes: number; total: number };
  bytes: { link: number; rootEgress: number; leaves: LeafLoad[]; totalLeafEgress: number };
  /** The leaf with the most egress; undefined with no leaves. */
  busiestLeaf?: LeafLoad;
  /** Link bytes over unique bytes: 1 when the root warm read is the only link traffic. */
  linkRatio: number;
}

const POSITIVE: ReadonlyArray<keyof FanoutParams> = [
  'uniqueBytes', 'nodeBytes', 'nodeUncompressedBytes', 'concurrency', 'amplification', 'linkBytesPerSecond',
  'rootNicBytesPerSecond', 'leafNicBytesPerSecond', 'nodeNicBytesPerSecond', 'diskBytesPerSecond',
];
const INTEGERS: ReadonlyArray<keyof FanoutParams> = ['nodes', 'leaves', 'pullsPerNode', 'concurrency'];

function validate(p: FanoutParams): void {
  const field = (name: keyof FanoutParams, why: string): never => {
    throw new Error(`fanout: ${name} ${why} (got ${String(p[name])})`);
  };
  for (const name of [...POSITIVE, 'nodes', 'leaves', 'pullsPerNode', 'pullSeconds'] as const) {
    const v = p[name];
    if (v === undefined && name === 'pullSeconds') continue;
    if (typeof v !== 'number' || !Number.isFinite(v)) field(name, 'must be a finite number');
  }
  for (const name of POSITIVE) if (!((p[name] as number) > 0)) field(name, 'must be positive');
  for (const name of INTEGERS) if (!Number.isInteger(p[name])) field(name, 'must be an integer');
  if (p.nodes < 1) field('nodes', 'must be at least 1');
  if (p.leaves < 0) field('leaves', 'must not be negative');
  if (p.pullsPerNode < 0) field('pullsPerNode', 'must not be negative');
  if ((p.pullSeconds ?? 0) < 0) field('pullSeconds', 'must not be negative');
  if (p.amplification < 1) field('amplification', 'must be at least 1');
  if (p.nodeBytes > p.uniqueBytes) field('nodeBytes', 'must not exceed uniqueBytes (a node needs part of the set at most)');
}

/**
 * Defaults for the benches and tests, documented: a 6 GB release (U = W: every node needs all of
 * it, 2x uncompressed), 200 images a node at CRI-O's concurrency 1 (a = 1; the measured a = 2.67
 * is at the default concurrency), a 10 MB/s link, 10 Gbit/s NICs (1.25 GB/s) on root, leaves and
 * nodes, disks writing 500 MB/s.
 */
export const DEFAULT_FANOUT: Omit<FanoutParams, 'nodes' | 'leaves'> = {
  uniqueBytes: 6e9, nodeBytes: 6e9, nodeUncompressedBytes: 12e9, pullsPerNode: 200, concurrency: 1, amplification: 1,
  linkBytesPerSecond: 10e6, rootNicBytesPerSecond: 1.25e9, leafNicBytesPerSecond: 1.25e9, nodeNicBytesPerSecond: 1.25e9,
  diskBytesPerSecond: 500e6,
};

export const nodeName = (i: number): string => `node-${i}`;
export const leafName = (i: number): string => `leaf-${i}`;

/** How many nodes each leaf gets, by chooseLeaf over `node-0..` and `leaf-0..`, in leaf order. */
export function assignNodes(nodes: number, leaves: number): Map<string, number> {
  const list: CacheLeaf[] = Array.from({ length: leaves }, (_, i) => ({ name: leafName(i), location: `${leafName(i)}:5000` }));
  const counts = new Map(list.map((leaf) => [leaf.name, 0]));
  for (let i = 0; i < nodes; i++) {
    const leaf = chooseLeaf({ name: nodeName(i) }, list);
    if (leaf) counts.set(leaf.name, counts.get(leaf.name)! + 1);
  }
  return counts;
}

export function modelFanout(p: FanoutParams): FanoutResult {
  validate(p);
  const U = p.uniqueBytes;
  const link = U; // the root warm read is the only traffic on the link
  const served = p.amplification * p.nodeBytes;
  const rootWarm = U / Math.min(p.linkBytesPerSecond, p.rootNicBytesPerSecond);
  // One node's own bounds: its NIC for the served bytes, its disk for the written ones, its pulls' fixed cost.
  const nodeBound = Math.max(served / p.nodeNicBytesPerSecond, p.nodeUncompressedBytes / p.diskBytesPerSecond);
  const overhead = (p.pullsPerNode * (p.pullSeconds ?? AGENT_PULL_SECONDS)) / p.concurrency;

  const leaves: LeafLoad[] = [];
  let leafWarm = 0;
  let rootEgress: number;
  let servingBound: number;
  if (p.leaves === 0) {
    rootEgress = U + p.nodes * served;
    servingBound = (p.nodes * served) / p.rootNicBytesPerSecond;
  } else {
    for (const [name, nodes] of assignNodes(p.nodes, p.leaves)) leaves.push({ name, nodes, egressBytes: U + nodes * served });
    rootEgress = U + p.leaves * U;
    leafWarm = Math.max((p.leaves * U) / p.rootNicBytesPerSecond, U / p.leafNicBytesPerSecond);
    const busiestNodes = Math.max(...leaves.map((leaf) => leaf.nodes));
    servingBound = (busiestNodes * served) / p.leafNicBytesPerSecond;
  }
  const nodesPhase = Math.max(servingBound, nodeBound) + overhead;
  const busiestLeaf = leaves.reduce<LeafLoad | undefined>((best, leaf) => (best === undefined || leaf.egressBytes > best.egressBytes ? leaf : best), undefined);
  return {
    seconds: { rootWarm, leafWarm, nodes: nodesPhase, total: rootWarm + leafWarm + nodesPhase },
    bytes: { link, rootEgress, leaves, totalLeafEgress: leaves.reduce((sum, leaf) => sum + leaf.egressBytes, 0) },
    ...(busiestLeaf ? { busiestLeaf } : {}),
    linkRatio: link / U,
  };
}

/** The one-cache baseline: the same set with no leaves, every node pulling from the root. */
export function modelOneCache(p: FanoutParams): FanoutResult {
  return modelFanout({ ...p, leaves: 0 });
}

/** Leaves for `nodes` at `nodesPerLeaf` each: ceil(N / per leaf), at most `max`. */
export function leavesFor(nodes: number, nodesPerLeaf: number, max = Infinity): number {
  return Math.min(max, Math.ceil(nodes / nodesPerLeaf));
}
