/**
 * The cache tree (issue #53) against the real thing: the fixture release's registry behind a
 * counting proxy (the slow link); a ROOT cache (distribution v3 in proxy mode, as `install --cache`
 * runs it) on the link; two LEAF caches, each a distribution pull-through cache of the root; a
 * counting proxy in front of each cache (what it sends out). Three nodes with real CRI-O in two
 * zones (Node labels): master-0 and worker-0 in zone-a, worker-1 in zone-b; one real agent per node
 * with `--cache-mirror` (the root), `--cache-leaf` per leaf and `--cache-leaf-label` (the zone),
 * pulling one image at a time (`--concurrency 1`: each node fetches each blob once, so the leaves'
 * egress can be counted to the blob).
 *
 * Proves: warmed in order (the root, then each leaf from it, then the nodes from their leaf), a blob
 * asked for by every node at once crosses the link once, each leaf's egress is its nodes' share,
 * and a leaf killed mid-stage loses no pull (its nodes go on from the root).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION, type NodePinnedImages } from '../src/api/prestage.js';
import { CACHE_DROP_IN_NAME } from '../src/agent/cache-mirror.js';
import { KubeClient } from '../src/kube/client.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { waitFor, type Daemon } from './cluster/processes.js';
import { startFaultProxy, type FaultProxy, type RequestRecord } from './harness/fault-proxy.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { pinState, startNodeAgent } from './support/agent-bed.js';
import { agentsLogged, blobGets, bytesOf, ProxyCache, sum, uniqueBlobs } from './support/cache-bed.js';
import { runCli } from './support/cli.js';

const NAMESPACE = 'prestage';
const ZONE = 'topology.kubernetes.io/zone';
const truth = inject('fixtureTruth');
const EVERY_NODE = truth.components.filter((component) => component.role === 'all');
/** A third through the tree; a third while leaf zone-a is killed. */
const STAGED = EVERY_NODE.filter((_, index) => index % 3 === 0);
const KILLED = EVERY_NODE.filter((_, index) => index % 3 === 1);

let dir: string;
let upstream: RegistryHandle;
let link: FaultProxy;
let root: ProxyCache;
let rootFront: FaultProxy;
const leaves = new Map<string, { cache: ProxyCache; front: FaultProxy }>();
let cluster: TestCluster;
const agents: Daemon[] = [];
const agentLogs = new Map<string, string>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-cache-tree-'));
  upstream = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  link = await startFaultProxy({ upstream: upstream.url });
  root = await ProxyCache.start({ dir: join(dir, 'root'), remoteUrl: link.url });
  rootFront = await startFaultProxy({ upstream: `http://${root.host}` });
  for (const zone of ['zone-a', 'zone-b']) {
    const cache = await ProxyCache.start({ dir: join(dir, zone), remoteUrl: rootFront.url });
    leaves.set(zone, { cache, front: await startFaultProxy({ upstream: `http://${cache.host}` }) });
  }
  cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': link.host }, insecureRegistries: [link.host] });
  const client = new KubeClient(cluster.kubeConfig);
  for (const [index, node] of cluster.nodes.entries()) {
    await client.request('PATCH', `/api/v1/nodes/${node.name}`, { body: { metadata: { labels: { [ZONE]: index < 2 ? 'zone-a' : 'zone-b' } } }, contentType: 'application/merge-patch+json' });
  }
  // The agents' flags as install gives them: it grants each leaf's warm Lease.
  const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', ...leafArgs().map((arg) => `--agent-arg=${arg}`), '--apply', '--kubeconfig', cluster.kubeconfigPath]);
  expect([installed.code, installed.stderr]).toEqual([0, '']);
  for (const node of cluster.nodes) {
    const logName = `agent-${node.name}.log`;
    agents.push(await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, args: ['--cache-mirror', `quay.io=${rootFront.host}`, ...leafArgs(), `--cache-leaf-label=${ZONE}`, '--concurrency', '1'], logName }));
    agentLogs.set(node.name, join(dir, logName));
  }
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
  await cluster?.stop();
  for (const { cache, front } of leaves.values()) await Promise.allSettled([front.stop(), cache.stop()]);
  await rootFront?.stop();
  await root?.stop();
  await link?.stop();
  await upstream?.stop();
  if (dir && !process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
});

const leafArgs = () => [...leaves.entries()].map(([zone, { front }]) => `--cache-leaf=${zone}=${front.host}`);
const zoneOf = (node: TestNode) => (cluster.nodes.indexOf(node) < 2 ? 'zone-a' : 'zone-b');
const wholeBlobs = (log: readonly RequestRecord[]) => blobGets(log).filter((record) => record.range === undefined && record.status === 200);
const perDigest = (records: readonly RequestRecord[]) => {
  const counts = new Map<string, number>();
  for (const record of records) counts.set(record.target.split('/blobs/')[1]!, (counts.get(record.target.split('/blobs/')[1]!) ?? 0) + 1);
  return counts;
};
const resetAll = () => [link, rootFront, ...[...leaves.values()].map((leaf) => leaf.front)].forEach((proxy) => proxy.resetStats());

async function stage(name: string, images: readonly string[]): Promise<void> {
  await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createClusterCustomObject({
    group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS,
    body: { apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name }, spec: { pinnedImages: images.map((image) => ({ name: image })) } },
  });
}

async function allPinned(images: readonly string[]): Promise<void> {
  await waitFor(`${images.length} images pinned on every node`, async () => {
    for (const node of cluster.nodes) if (Object.values(await pinState(node, images)).some((pinned) => pinned !== true)) return undefined;
    return true;
  }, 300_000, 500);
}

const logged = (message: string, since = 0) => agentsLogged(agentLogs, message, since);

describe('a tree of caches: a root on the link, a leaf per zone', () => {
  it('warms the root, then each leaf from it, then the nodes from their leaf: each blob crosses the link once, each leaf sends its own nodes\' share', async () => {
    resetAll();
    const images = STAGED.map((component) => component.pullSpec);
    const unique = uniqueBlobs(STAGED);
    const since = Date.now();
    await stage('through-tree', images);
    await allPinned(images);

    // Each node's drop-in: its leaf, then the root, then the node's own mirror (the link).
    for (const node of cluster.nodes) {
      const text = await readFile(join(dirname(node.crio.confDir), 'registries.conf.d', CACHE_DROP_IN_NAME), 'utf8');
      expect(text).toContain(`[[registry.mirror]]\nlocation = "${leaves.get(zoneOf(node))!.front.host}"\ninsecure = true\npull-from-mirror = "digest-only"\n\n[[registry.mirror]]\nlocation = "${rootFront.host}"\ninsecure = true\npull-from-mirror = "digest-only"\n\n[[registry.mirror]]\nlocation = "${link.host}"`);
    }
    // The order: one warm of the root, then one of each leaf, each by a node of that leaf.
    const warmed = await logged('cache warmed', since);
    expect(warmed.map(({ line }) => line.cache).sort()).toEqual(['leaf zone-a', 'leaf zone-b', 'root']);
    for (const { node, line } of warmed) {
      expect([line.cache, line.blobs, line.bytes, line.failures]).toEqual([line.cache, unique.size, sum(unique), []]);
      if (line.cache !== 'root') expect(line.cache).toBe(`leaf ${zoneOf(cluster.nodes.find((n) => n.name === node)!)}`);
    }
    const rootWarm = Number(warmed.find(({ line }) => line.cache === 'root')!.line.time);
    for (const { line } of warmed.filter(({ line }) => line.cache !== 'root')) expect(Number(line.time)).toBeGreaterThanOrEqual(rootWarm);

    // The link: every blob whole exactly once, though all three nodes asked for the set at once.
    const linkBlobs = blobGets(link.stats.log);
    const fills = perDigest(wholeBlobs(link.stats.log));
    const linkRatio = bytesOf(linkBlobs) / sum(unique);
    expect(new Set(fills.keys())).toEqual(new Set(unique.keys()));
    expect(new Set(fills.values())).toEqual(new Set([1]));
    expect(linkRatio).toBeLessThanOrEqual(1.05);
    // The root sends each blob three times: its own warm, and once to each leaf.
    const rootOut = bytesOf(wholeBlobs(rootFront.stats.log));
    expect(new Set(perDigest(wholeBlobs(rootFront.stats.log)).values())).toEqual(new Set([3]));
    // Each leaf: its warm (each blob once) and one copy per node of its zone (one pull at a time: no refetch).
    const leafOut = new Map([...leaves].map(([zone, { front }]) => [zone, bytesOf(wholeBlobs(front.stats.log))]));
    const share = (zone: string) => (1 + cluster.nodes.filter((node) => zoneOf(node) === zone).length) * sum(unique);
    console.log(
      `cache tree, ${images.length} images x 3 nodes: unique ${unique.size} blobs (${sum(unique)} B); link ${bytesOf(linkBlobs)} B (ratio ${linkRatio.toFixed(3)}); ` +
        `root egress ${rootOut} B (${(rootOut / sum(unique)).toFixed(3)} x unique); ` +
        [...leafOut].map(([zone, bytes]) => `leaf ${zone} egress ${bytes} B (${(bytes / sum(unique)).toFixed(3)} x unique, model ${share(zone) / sum(unique)})`).join('; ') +
        `; ${((Date.now() - since) / 1000).toFixed(1)} s`,
    );
    expect(rootOut).toBe(3 * sum(unique));
    for (const [zone, bytes] of leafOut) {
      expect(bytes).toBeGreaterThanOrEqual(share(zone) * 0.95);
      expect(bytes).toBeLessThanOrEqual(share(zone) * 1.05);
    }
    // `status` names each node's route as its agent reports it.
    const reports = await new KubeClient(cluster.kubeConfig).get<{ items: NodePinnedImages[] }>(`/apis/${GROUP}/${VERSION}/${NODE_PINNED_IMAGES}`);
    for (const node of cluster.nodes) {
      const zone = zoneOf(node);
      expect(reports.items.find((item) => item.metadata.name === node.name)?.status?.cache).toEqual({ leaf: zone, locations: [leaves.get(zone)!.front.host, rootFront.host] });
    }
    const status = await runCli(['status', 'through-tree', '--kubeconfig', cluster.kubeconfigPath]);
    expect(status.stdout).toContain(`node ${cluster.nodes[2]!.name} pulls through leaf zone-b (${leaves.get('zone-b')!.front.host}), then root ${rootFront.host}, then the source\n`);
  }, 420_000);

  it('a leaf killed mid-stage loses no pull: its nodes go on from the root, and the link still carries each blob once', async () => {
    resetAll();
    const images = KILLED.map((component) => component.pullSpec);
    const unique = uniqueBlobs(KILLED);
    const leafA = leaves.get('zone-a')!;
    // Slow enough to be caught half-way: zone-a's nodes pull at 1 MiB/s from their leaf.
    leafA.front.setBandwidth(1024 * 1024);
    await stage('leaf-killed', images);
    // After its warm and a third of its two nodes' copies: the leaf's process, then its address (a pod and its Service's endpoints).
    await waitFor('leaf zone-a half-way', async () => (bytesOf(wholeBlobs(leafA.front.stats.log)) >= (1 + 2 / 3) * sum(unique) ? true : undefined), 300_000, 50);
    const servedBeforeKill = bytesOf(wholeBlobs(leafA.front.stats.log));
    leafA.cache.kill();
    await leafA.front.stop();
    await allPinned(images);
    // Every node reports the set pinned (its status follows the pins), no image failed.
    const reportsOf = async () => (await new KubeClient(cluster.kubeConfig).get<{ items: NodePinnedImages[] }>(`/apis/${GROUP}/${VERSION}/${NODE_PINNED_IMAGES}`)).items;
    const setOf = (report: NodePinnedImages) => report.status?.pinnedImageSets?.find((entry) => entry.name === 'leaf-killed');
    await waitFor('every node to report the set pinned', async () => {
      const reports = await reportsOf();
      return reports.length === 3 && reports.every((report) => setOf(report)?.images.every((image) => image.state === 'Pinned')) ? true : undefined;
    }, 60_000, 250);
    for (const report of await reportsOf()) {
      expect(setOf(report)?.lastFailedGenerationError).toBeUndefined();
      expect(setOf(report)?.images.filter((image) => image.state !== 'Pinned' || image.lastError !== undefined).map((image) => `${image.name} ${image.state} ${image.lastError ?? ''}`)).toEqual([]);
    }
    const fills = perDigest(wholeBlobs(link.stats.log));
    const linkRatio = bytesOf(blobGets(link.stats.log)) / sum(unique);
    const rootOut = bytesOf(wholeBlobs(rootFront.stats.log));
    console.log(`leaf zone-a killed after ${servedBeforeKill} B of ${3 * sum(unique)} B: link ratio ${linkRatio.toFixed(3)}, root egress ${(rootOut / sum(unique)).toFixed(3)} x unique`);
    expect(new Set(fills.values())).toEqual(new Set([1]));
    expect(linkRatio).toBeLessThanOrEqual(1.05);
    // The root served what zone-a's nodes still lacked: more than its warm and the two leaves' fills.
    expect(rootOut).toBeGreaterThan(3 * sum(unique));
  }, 420_000);
});
