/**
 * `npm run bench:fanout`: what the cache tree's fan-out model (src/cluster/preflight/fanout.ts)
 * predicts for staging one image set as the cluster grows: per node count, the leaves (one per
 * --nodes-per-leaf nodes, at most MAX_CACHE_LEAVES), the time to stage and its three phases (root
 * warm over the link, leaf warm over the LAN, nodes pulling from their leaves), the bytes per tier
 * (link bytes as a multiple of the unique bytes, root egress, the busiest leaf's egress), the
 * one-cache baseline (no leaves, every node pulling from the root) and the tree's time over the
 * 10-node tree's. A model, not a measurement: no cluster, no I/O. Defaults: DEFAULT_FANOUT.
 * Flags: --nodes 10,100,1000,5000  --nodes-per-leaf 50  --link-rate, --lan-rate (every NIC),
 * --root-nic-rate, --leaf-nic-rate, --node-nic-rate, --disk-rate (rates as --link-rate reads them),
 * --unique-bytes, --node-bytes, --uncompressed-bytes (sizes), --pulls, --concurrency,
 * --amplification, --pull-seconds, --json.
 */
import { parseArgs } from 'node:util';
import { MAX_CACHE_LEAVES } from '../src/api/cache-tree.js';
import { DEFAULT_FANOUT, leavesFor, modelFanout, modelOneCache, type FanoutParams } from '../src/cluster/preflight/fanout.js';
import { formatBytes, formatRate, formatSeconds, parseRate, parseSize } from '../src/units.js';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '10,100,1000,5000' },
    'nodes-per-leaf': { type: 'string', default: '50' },
    'link-rate': { type: 'string' },
    'lan-rate': { type: 'string' },
    'root-nic-rate': { type: 'string' },
    'leaf-nic-rate': { type: 'string' },
    'node-nic-rate': { type: 'string' },
    'disk-rate': { type: 'string' },
    'unique-bytes': { type: 'string' },
    'node-bytes': { type: 'string' },
    'uncompressed-bytes': { type: 'string' },
    pulls: { type: 'string' },
    concurrency: { type: 'string' },
    amplification: { type: 'string' },
    'pull-seconds': { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});

const rate = (flag: keyof typeof values, fallback: number): number => {
  const text = values[flag];
  if (typeof text !== 'string') return fallback;
  const parsed = parseRate(text);
  if (parsed === undefined) throw new Error(`--${flag} ${text}: not a rate`);
  return parsed;
};
const size = (flag: keyof typeof values, fallback: number): number => (typeof values[flag] === 'string' ? parseSize(values[flag]) : fallback);
const num = (flag: keyof typeof values, fallback: number): number => (typeof values[flag] === 'string' ? Number(values[flag]) : fallback);

const lan = rate('lan-rate', DEFAULT_FANOUT.rootNicBytesPerSecond);
const uniqueBytes = size('unique-bytes', DEFAULT_FANOUT.uniqueBytes);
const nodeBytes = size('node-bytes', values['unique-bytes'] ? uniqueBytes : DEFAULT_FANOUT.nodeBytes);
const base: Omit<FanoutParams, 'nodes' | 'leaves'> = {
  uniqueBytes,
  nodeBytes,
  nodeUncompressedBytes: size('uncompressed-bytes', 2 * nodeBytes),
  pullsPerNode: num('pulls', DEFAULT_FANOUT.pullsPerNode),
  concurrency: num('concurrency', DEFAULT_FANOUT.concurrency),
  amplification: num('amplification', DEFAULT_FANOUT.amplification),
  linkBytesPerSecond: rate('link-rate', DEFAULT_FANOUT.linkBytesPerSecond),
  rootNicBytesPerSecond: rate('root-nic-rate', lan),
  leafNicBytesPerSecond: rate('leaf-nic-rate', lan),
  nodeNicBytesPerSecond: rate('node-nic-rate', lan),
  diskBytesPerSecond: rate('disk-rate', DEFAULT_FANOUT.diskBytesPerSecond),
  ...(values['pull-seconds'] ? { pullSeconds: Number(values['pull-seconds']) } : {}),
};
const perLeaf = Number(values['nodes-per-leaf']);
const counts = [...new Set([10, ...values.nodes.split(',').map((n) => Number(n.trim())).filter((n) => n > 0)])].sort((a, b) => a - b);

const tree = (nodes: number) => modelFanout({ ...base, nodes, leaves: leavesFor(nodes, perLeaf, MAX_CACHE_LEAVES) });
const reference = tree(10).seconds.total;
const rows = counts.map((nodes) => {
  const result = tree(nodes);
  const one = modelOneCache({ ...base, nodes, leaves: 0 });
  return { nodes, leaves: result.bytes.leaves.length, result, oneCacheSeconds: one.seconds.total, ratioTo10: result.seconds.total / reference };
});

if (values.json) {
  console.log(JSON.stringify({ params: { ...base, nodesPerLeaf: perLeaf, maxLeaves: MAX_CACHE_LEAVES }, rows }, null, 2));
} else {
  console.log(`bench:fanout  model only; U ${formatBytes(base.uniqueBytes)}, W ${formatBytes(base.nodeBytes)} a node (${formatBytes(base.nodeUncompressedBytes)} on disk), ` +
    `${base.pullsPerNode} pulls at concurrency ${base.concurrency}, a = ${base.amplification}; link ${formatRate(base.linkBytesPerSecond)}, ` +
    `NICs root ${formatRate(base.rootNicBytesPerSecond)} leaf ${formatRate(base.leafNicBytesPerSecond)} node ${formatRate(base.nodeNicBytesPerSecond)}, ` +
    `disk ${formatRate(base.diskBytesPerSecond)}; one leaf per ${perLeaf} nodes, at most ${MAX_CACHE_LEAVES}`);
  console.log('');
  console.log('| nodes | leaves | time to stage | root warm | leaf warm | nodes phase | link bytes (x unique) | root egress | busiest leaf egress | one cache (no leaves) time | tree / 10-node time ratio |');
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const { nodes, leaves, result: r, oneCacheSeconds, ratioTo10 } of rows) {
    const busiest = r.busiestLeaf ? `${formatBytes(r.busiestLeaf.egressBytes)} (${r.busiestLeaf.name}, ${r.busiestLeaf.nodes} nodes)` : '-';
    console.log(`| ${nodes} | ${leaves} | ${formatSeconds(r.seconds.total)} | ${formatSeconds(r.seconds.rootWarm)} | ${formatSeconds(r.seconds.leafWarm)} | ` +
      `${formatSeconds(r.seconds.nodes)} | ${formatBytes(r.bytes.link)} (${r.linkRatio.toFixed(2)}x) | ${formatBytes(r.bytes.rootEgress)} | ${busiest} | ` +
      `${formatSeconds(oneCacheSeconds)} | ${ratioTo10.toFixed(2)} |`);
  }
}
