/**
 * The in-cluster pull-through cache (issue #15), against the real thing: the fixture release's
 * registry as the upstream, behind a counting proxy that stands for the slow link; the
 * distribution registry v3 (`registry:3` in clusters, built by the test bed) in PROXY mode
 * (`proxy.remoteurl` = the link) as the cache, behind a second counting proxy (what the nodes ask
 * the cache); three nodes with real CRI-O; one real `prestage agent` per node, as shipped
 * (default concurrency, no pacing), with `--cache-mirror quay.io=<cache>`.
 *
 * Each node's own registries.conf mirrors quay.io straight over the link (as an
 * ImageDigestMirrorSet-written entry would): the cache is reachable ONLY through the drop-in
 * the agents write, which replaces that entry (same prefix) and carries its mirror after the
 * cache. With the cache, one node warms it (the cache-warm Lease), then a set of a quarter of the
 * release's every-node images is pulled on all three nodes from the cache, and the link carries
 * each unique blob once; `wait` shows the cache's own counts. The cache killed mid-fill of the
 * next quarter (slow link) and started again: the warm resumes, and only the blobs the kill cut
 * cross twice. With the cache answering 500 to everything, the next quarter is pulled straight
 * over the link (nothing fails). Then the agents restart without the flag, the drop-in is gone,
 * and the last quarter goes straight over the link: one copy per node.
 */
import { existsSync, statSync } from 'node:fs';
import { mkdtemp, open, readFile, rm, statfs, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { AppsV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { API_VERSION, GROUP, PINNED_IMAGE_SETS, VERSION } from '../src/api/prestage.js';
import { CACHE_DROP_IN_NAME } from '../src/agent/cache-mirror.js';
import { CACHE_WARM_PREFIX, CACHE_WARMED_ANNOTATION, LeaseCacheWarmer } from '../src/agent/cache-warm.js';
import { checkCacheForPlan, planCacheBytes } from '../src/cluster/cache-check.js';
import { KubeClient } from '../src/kube/client.js';
import type { Plan } from '../src/plan/types.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { Daemon, waitFor } from './cluster/processes.js';
import { startFaultProxy, type FaultProxy, type RequestRecord } from './harness/fault-proxy.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { installOpenShiftCrds, OPENSHIFT_4_21 } from './mco/crds.js';
import { pinState, startNodeAgent } from './support/agent-bed.js';
import { agentsLogged, blobGets, bytesOf, exposeCacheMetrics, fetchToEnd, ProxyCache, sum, uniqueBlobs } from './support/cache-bed.js';
import { runCli } from './support/cli.js';
import { formatBytes } from '../src/units.js';
import { AGENT_NAME } from '../src/api/names.js';
import { parseReference } from '../src/registry/reference.js';
import { createLogger } from '../src/telemetry/log.js';

const NAMESPACE = 'prestage';
const truth = inject('fixtureTruth');
/**
 * The release's every-node images (single-platform), in sixths: through the cache, through a cache restarted
 * mid-fill, through a cache holding a corrupt blob, through a full cache, past an erring cache, without it.
 */
const EVERY_NODE = truth.components.filter((component) => component.role === 'all');
const CACHED = EVERY_NODE.filter((_, index) => index % 6 === 0);
const RESTARTED = EVERY_NODE.filter((_, index) => index % 6 === 1);
const CORRUPT = EVERY_NODE.filter((_, index) => index % 6 === 2);
const FULL = EVERY_NODE.filter((_, index) => index % 6 === 3);
const ERRING = EVERY_NODE.filter((_, index) => index % 6 === 4);
const DIRECT = EVERY_NODE.filter((_, index) => index % 6 === 5);
/** The cache's volume: a tmpfs, so the cache can be filled up. */
const CACHE_VOLUME_BYTES = 64 * 1024 * 1024;

let dir: string;
let upstream: RegistryHandle;
/** The slow link: everything from the upstream registry crosses it (the cache's fills and direct pulls). */
let link: FaultProxy;
/** distribution v3 in proxy mode (test/support/cache-bed.ts), or PRESTAGE_CACHE_REGISTRY. */
let cache: ProxyCache;
/** In front of the cache: what the nodes ask it. */
let cacheFront: FaultProxy;
let cluster: TestCluster;
const agents = new Map<string, Daemon>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-cache-'));
  upstream = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  link = await startFaultProxy({ upstream: upstream.url });
  cache = await ProxyCache.start({ dir, remoteUrl: link.url, volumeBytes: CACHE_VOLUME_BYTES });
  cacheFront = await startFaultProxy({ upstream: `http://${cache.host}` });
  cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': link.host }, insecureRegistries: [link.host] });
  const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--apply', '--kubeconfig', cluster.kubeconfigPath]);
  expect([installed.code, installed.stderr]).toEqual([0, '']);
  await exposeCacheMetrics(cluster, NAMESPACE, cache.metrics, AGENT_NAME);
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.allSettled([...agents.values()].map((agent) => agent.stop(30_000)));
  await cluster?.stop();
  await cacheFront?.stop();
  await cache?.stop();
  await link?.stop();
  await upstream?.stop();
  if (dir && !process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
});

/** Each agent's log, by node: which one warmed the cache. */
const agentLogs = new Map<string, string>();

/** A real `prestage agent` for `node` (test/support/agent-bed.ts) with its shipped defaults, through the cache when `cacheMirror` names it. */
async function startAgent(node: TestNode, cacheMirror: string | undefined): Promise<Daemon> {
  const logName = `agent-${node.name}-${agents.size}-${Date.now()}.log`;
  const agent = await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, args: cacheMirror ? ['--cache-mirror', cacheMirror] : [], logName });
  agents.set(node.name, agent);
  agentLogs.set(node.name, join(dir, logName));
  return agent;
}

/** The agents' log lines (parsed) with this message, logged at `since` (ms since the epoch) or later. */
const logged = (message: string, since = 0) => agentsLogged(agentLogs, message, since);

async function stopAgents(): Promise<void> {
  await Promise.all([...agents.values()].map((agent) => agent.stop(30_000)));
  agents.clear();
}

const dropInOf = (node: TestNode) => join(dirname(node.crio.confDir), 'registries.conf.d', CACHE_DROP_IN_NAME);

/** Resolves once CRI-O's log (from `offset`) shows a registries reload that names `host` (or, with `absent`, does not). */
async function registriesReloaded(node: TestNode, offset: number, host: string, absent = false): Promise<void> {
  const logPath = node.crio.logPath;
  await waitFor(`${node.name}'s CRI-O to apply registries ${absent ? 'without' : 'with'} ${host}`, async () => {
    const lines = (await readFile(logPath)).subarray(offset).toString('utf8').split('\n').filter((line) => line.includes('Applied new registry configuration'));
    const last = lines.at(-1);
    // The cache as a digest-only mirror endpoint, as containers/image parsed it.
    return last !== undefined && last.includes(`{Location:${host} Insecure:true PullFromMirror:digest-only}`) !== absent ? true : undefined;
  }, 30_000, 100);
}

async function createSet(name: string, images: readonly string[]): Promise<void> {
  await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createClusterCustomObject({
    group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS,
    body: { apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name }, spec: { pinnedImages: images.map((image) => ({ name: image })) } },
  });
}

async function allPinned(images: readonly string[]): Promise<void> {
  await waitFor(`${images.length} images pinned on every node`, async () => {
    for (const node of cluster.nodes) {
      const state = await pinState(node, images);
      if (Object.values(state).some((pinned) => pinned !== true)) return undefined;
    }
    return true;
  }, 240_000, 500);
}

describe('an in-cluster pull-through cache wired by the agents', () => {
  it('with --cache-mirror: one drop-in per node, CRI-O reloaded; one node warms the cache, then every image is pinned on every node from it, and each unique blob crosses the link once (distribution 3), not once per node; wait shows the cache figures', async () => {
    const offsets = new Map(cluster.nodes.map((node) => [node.name, logSize(node.crio.logPath)]));
    link.resetStats();
    cacheFront.resetStats();
    const images = CACHED.map((component) => component.pullSpec);
    // The set first, then `wait` (its cache baseline: nothing fetched yet), then the agents.
    const started = Date.now();
    await createSet('through-cache', images);
    const waited = runCli(['wait', 'through-cache', '-o', 'json', '--log-level', 'debug', '--timeout', '4m', '--kubeconfig', cluster.kubeconfigPath]);
    for (const node of cluster.nodes) await startAgent(node, `quay.io=${cacheFront.host}`);
    for (const node of cluster.nodes) {
      const text = await readFile(dropInOf(node), 'utf8');
      // The cache first (digest pulls only), then the node's own mirror (the direct link) carried over, then quay.io.
      expect(text).toContain(`[[registry]]\nprefix = "quay.io"\nlocation = "quay.io"\n\n[[registry.mirror]]\nlocation = "${cacheFront.host}"\ninsecure = true\npull-from-mirror = "digest-only"\n\n[[registry.mirror]]\nlocation = "${link.host}"\ninsecure = true\n`);
      // SIGHUP made CRI-O 1.34 re-read registries.conf.d: its log shows the cache in the applied configuration.
      await registriesReloaded(node, offsets.get(node.name)!, cacheFront.host);
    }
    const wait = await waited;
    expect(wait.code).toBe(0);
    // distribution 2.x keeps its proxy counters in expvar, not Prometheus: wait says it has no figures.
    expect(wait.stderr).toBe(cache.fetchesPerMiss === 1 ? '' : 'prestage: warning: cache figures unavailable: prestage/prestage-cache metrics have no registry_proxy_* counters (distribution 3 in proxy mode has them; 2.x keeps them in expvar)\n');
    await allPinned(images);
    const seconds = (Date.now() - started) / 1000;

    const unique = uniqueBlobs(CACHED);
    const upstreamBlobs = blobGets(link.stats.log);
    // Whole-blob reads over the link (the cache's fills); the agents' 4-byte size reads are Range reads of a few bytes.
    const fills = upstreamBlobs.filter((record) => record.range === undefined);
    const upstreamBytes = bytesOf(upstreamBlobs);
    const ratio = upstreamBytes / sum(unique);
    const servedByCache = blobGets(cacheFront.stats.log).filter((record) => record.status === 200);
    console.log(
      `through the cache (${cache.version}): ${images.length} images x ${cluster.nodes.length} nodes in ${seconds.toFixed(1)} s; unique blobs ${unique.size} (${sum(unique)} B); ` +
        `link: ${link.stats.requests} requests, ${upstreamBlobs.length} blob GETs (${fills.length} whole), ${upstreamBytes} blob B, ratio ${ratio.toFixed(3)}; ` +
        `cache served ${servedByCache.length} blob GETs (${bytesOf(servedByCache)} B) of ${cacheFront.stats.requests} requests`,
    );
    // Warm first: exactly one node filled the cache, holding the warm Lease; the others found the images recorded.
    const warmed = await logged('cache warmed');
    expect(warmed.map(({ line }) => [line.images, line.blobs, line.bytes, line.failures])).toEqual([[images.length, unique.size, sum(unique), []]]);
    expect((await logged('cache warm: the cache holds these images already')).map(({ node }) => node).sort()).toEqual(cluster.nodes.map((node) => node.name).filter((name) => name !== warmed[0]!.node).sort());
    const lease = await cluster.kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: `${CACHE_WARM_PREFIX}0`, namespace: NAMESPACE });
    expect(lease.spec?.holderIdentity).toBeUndefined();
    expect(new Set(JSON.parse(lease.metadata!.annotations![CACHE_WARMED_ANNOTATION]!).keys)).toEqual(new Set(images.map((image) => `amd64@${image.split('@')[1]}`)));
    // distribution 3 tees one upstream fetch of a missing blob into its storage and the answer; the warm asks for each
    // blob once, and the nodes only after it: exactly one whole fetch of each unique blob, whatever the number of nodes
    // (without the cache: one per node). The few bytes beyond are the agents' 4-byte size reads, which go straight.
    // (Debian's docker-registry, 2.8, fetches a miss twice: PRESTAGE_CACHE_REGISTRY=/usr/bin/docker-registry shows 2.)
    expect(ratio).toBeGreaterThanOrEqual(cache.fetchesPerMiss);
    expect(ratio).toBeLessThanOrEqual(cache.fetchesPerMiss * 1.05);
    const filled = new Map<string, number>();
    for (const record of fills) {
      const digest = record.target.split('/blobs/')[1]!;
      filled.set(digest, (filled.get(digest) ?? 0) + 1);
    }
    expect(new Set(filled.keys())).toEqual(new Set(unique.keys()));
    expect(new Set(filled.values())).toEqual(new Set([cache.fetchesPerMiss]));
    // Every node's pulls came from the cache (vfs keeps no blob twice per node), after the warm's own reads; CRI-O may
    // fetch a layer shared by two images it pulls at once twice, from the cache (LAN), never from the link.
    expect(servedByCache.length).toBeGreaterThanOrEqual(unique.size * (cluster.nodes.length + 1));
    // `wait`'s last event: the cache's own counters since it started, read through the API server's service proxy.
    if (cache.fetchesPerMiss !== 1) return;
    const cacheEvents = wait.stdout.split('\n').filter((line) => line.includes('"type":"cache"')).map((line) => JSON.parse(line) as Record<string, number>);
    console.log(`wait's last cache event: ${JSON.stringify(cacheEvents.at(-1))}`);
    const last = cacheEvents.at(-1)!;
    expect(last.upstreamBytes).toBe(bytesOf(fills));
    expect(last.misses).toBe(unique.size);
    expect(last.servedBytes).toBe(bytesOf(servedByCache));
    expect(last.hits! + last.misses!).toBe(servedByCache.length);
  }, 360_000);

  it('the cache restarted mid-fill (slow link): the warm resumes when it is back, blobs stored before the restart are not fetched again, every image is pinned', async () => {
    link.resetStats();
    cacheFront.resetStats();
    const images = RESTARTED.map((component) => component.pullSpec);
    const since = Date.now();
    // Blobs of the first set are in the cache already (same repository): hits, not the link.
    const unique = uniqueBlobs(RESTARTED, new Set(uniqueBlobs(CACHED).keys()));
    link.setBandwidth(256 * 1024);
    try {
      await createSet('restarted-mid-fill', images);
      // Mid-fill: a third of the new bytes over the link, then the cache process is gone (SIGKILL: no draining) for 1.5 s.
      await waitFor('a third of the fill over the link', async () => (bytesOf(blobGets(link.stats.log)) >= sum(unique) / 3 ? true : undefined), 120_000, 20);
      cache.kill();
      const killedAt = Date.now();
      const cutAt = bytesOf(blobGets(link.stats.log));
      await sleep(1_500);
      await cache.restart();
      await allPinned(images);
      const fills = blobGets(link.stats.log).filter((record) => record.range === undefined);
      const byDigest = new Map<string, RequestRecord[]>();
      for (const record of fills) {
        const digest = record.target.split('/blobs/')[1]!;
        byDigest.set(digest, [...(byDigest.get(digest) ?? []), record]);
      }
      // Fetched again: blobs the cache was fetching (or had fetched but not yet stored) when it was killed.
      const again = [...byDigest].filter(([, records]) => records.length > 1);
      const againBytes = again.reduce((total, [, records]) => total + bytesOf(records.slice(0, -1)), 0);
      const ratio = bytesOf(blobGets(link.stats.log)) / sum(unique);
      const warms = await logged('cache warmed', since);
      expect(warms).toHaveLength(1);
      const warmed = warms[0]!.line;
      console.log(
        `cache restarted mid-fill: killed after ${cutAt} of ${sum(unique)} B over the link; ${fills.length} whole-blob GETs, ${again.length} blobs fetched again (${againBytes} B before the kill); ` +
          `link ratio ${ratio.toFixed(3)}; warm: ${JSON.stringify({ passes: warmed.passes, blobs: warmed.blobs, bytes: warmed.bytes, failures: warmed.failures })}`,
      );
      // Every blob completed over the link, once after its last start; twice only for one the kill caught in flight:
      // its first fetch started before the kill, and no more of those than the warm reads at once (8).
      expect(new Set(byDigest.keys())).toEqual(new Set(unique.keys()));
      for (const records of byDigest.values()) expect(records.at(-1)!.bytesSent).toBe(unique.get(records.at(-1)!.target.split('/blobs/')[1]!));
      for (const [, records] of again) {
        expect(records).toHaveLength(2);
        expect(records[0]!.startedAt).toBeLessThan(killedAt);
      }
      expect(again.length).toBeLessThanOrEqual(8);
      expect(ratio).toBeLessThanOrEqual(1 + againBytes / sum(unique) + 0.05);
      expect(warmed.failures).toEqual([]);
    } finally {
      link.setBandwidth(null);
    }
  }, 360_000);

  it('a blob the cache holds corrupt: CRI-O refuses it by digest, the agent pulls that image again past the cache (its repository routed around it meanwhile), and every image is pinned', async () => {
    // A layer of one image only, new to the nodes and the cache: fetched into the cache, then corrupted on its disk.
    const earlier = new Set([...uniqueBlobs(CACHED).keys(), ...uniqueBlobs(RESTARTED).keys()]);
    const users = new Map<string, number>();
    for (const component of CORRUPT) for (const layer of component.layers) users.set(layer.digest, (users.get(layer.digest) ?? 0) + 1);
    const unshared = (digest: string) => users.get(digest) === 1 && !earlier.has(digest);
    const victim = CORRUPT.find((component) => component.layers.some((layer) => unshared(layer.digest)))!;
    const layer = victim.layers.find((candidate) => unshared(candidate.digest))!;
    const repository = victim.pullSpec.split('@')[0]!.split('/').slice(1).join('/');
    await fetchToEnd(`http://${cache.host}/v2/${repository}/blobs/${layer.digest}`);
    const stored = join(cache.storage, 'docker', 'registry', 'v2', 'blobs', 'sha256', layer.digest.slice(7, 9), layer.digest.slice(7), 'data');
    await waitFor('the cache to store the blob', async () => (existsSync(stored) && statSync(stored).size === layer.size ? true : undefined), 10_000, 50);
    const bytes = await readFile(stored);
    bytes[bytes.length >> 1]! ^= 0xff;
    await writeFile(stored, bytes);

    const offsets = new Map(cluster.nodes.map((node) => [node.name, logSize(node.crio.logPath)]));
    link.resetStats();
    cacheFront.resetStats();
    const since = Date.now();
    const images = CORRUPT.map((component) => component.pullSpec);
    await createSet('corrupt-cached-blob', images);
    await allPinned(images);
    const detours = await logged('the cache served a corrupt blob: pulling the image again past the cache', since);
    console.log(`corrupt cached blob ${layer.digest} of ${victim.pullSpec}: ${detours.length} nodes pulled it again past the cache; CRI-O said: ${String(detours[0]?.line.err)}`);
    expect(detours.map(({ node, line }) => [node, line.image, line.repository]).sort()).toEqual(cluster.nodes.map((node) => [node.name, victim.pullSpec, `quay.io/${repository}`]).sort());
    expect(String(detours[0]!.line.err)).toContain(`Digest did not match, expected ${layer.digest}`);
    const digest = victim.pullSpec.split('@')[1]!;
    for (const node of cluster.nodes) {
      const crio = (await readFile(node.crio.logPath)).subarray(offsets.get(node.name)!).toString('utf8');
      // Through the cache first (refused by digest), then, the repository routed past the cache, over the link.
      const viaCache = crio.indexOf(`Trying to access \\"${cacheFront.host}/${repository}@${digest}\\"`);
      const viaLink = crio.indexOf(`Trying to access \\"${link.host}/${repository}@${digest}\\"`);
      expect(viaCache).toBeGreaterThanOrEqual(0);
      expect(viaLink).toBeGreaterThan(viaCache);
      // The detour is over: the drop-in is the cache's again.
      expect(await readFile(dropInOf(node), 'utf8')).not.toContain(`prefix = "quay.io/${repository}"`);
    }
    // The corrupt layer crossed the link in full once per node (good bytes); the warm's read of it failed its digest check.
    const whole = blobGets(link.stats.log).filter((record) => record.range === undefined && record.target.endsWith(`/blobs/${layer.digest}`) && record.bytesSent === layer.size);
    expect(whole).toHaveLength(cluster.nodes.length);
    const warm = await logged('cache warm incomplete; pulls fall back past the cache where it lacks a blob', since);
    expect(warm).toHaveLength(1);
    expect(String(warm[0]!.line.failures)).toContain(`${layer.digest}: content hashes to`);
  }, 360_000);

  it('a full cache: it cannot store the manifests it fetches and answers 500, so the warm gives up at once and every node pulls past it; nothing fails', async () => {
    // Fill the cache's volume to the last byte.
    const storage = cache.storage;
    const filler = join(storage, 'filler');
    const handle = await open(filler, 'w');
    try {
      const chunk = Buffer.alloc(1024 * 1024, 1);
      for (;;) await handle.write(chunk);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
    } finally {
      await handle.close();
    }
    const { bavail, bsize } = await statfs(storage);
    expect(bavail * bsize).toBeLessThan(1024 * 1024);
    try {
      link.resetStats();
      cacheFront.resetStats();
      const since = Date.now();
      const images = FULL.map((component) => component.pullSpec);
      await createSet('through-full-cache', images);
      await allPinned(images);
      const held = new Set([CACHED, RESTARTED, CORRUPT].flatMap((group) => [...uniqueBlobs(group).keys()]));
      const unique = uniqueBlobs(FULL, held);
      const ratio = bytesOf(blobGets(link.stats.log)) / sum(unique);
      const failed = cacheFront.stats.log.filter((record) => record.status === 500).length;
      const warm = await logged('cache warm incomplete; pulls fall back past the cache where it lacks a blob', since);
      console.log(`through a full cache: ${images.length} images x ${cluster.nodes.length} nodes; ${unique.size} new blobs (${sum(unique)} B); link ratio ${ratio.toFixed(3)}; the cache answered ${failed} of ${cacheFront.stats.requests} requests with 500; warm: ${String((warm[0]?.line.failures as string[] | undefined)?.[0])}`);
      expect(warm).toHaveLength(1);
      expect(warm[0]!.line.blobs).toBe(0);
      expect(String((warm[0]!.line.failures as string[])[0])).toContain('HTTP 500');
      // distribution: "error putting payload into blobstore: ... no space left on device", a 500 for the manifest.
      expect(failed).toBeGreaterThan(0);
      expect(ratio).toBeGreaterThanOrEqual(cluster.nodes.length);
      expect(ratio).toBeLessThanOrEqual(cluster.nodes.length * 1.05);
    } finally {
      await rm(filler, { force: true });
    }
  }, 360_000);

  it('with the cache answering 500 to everything: the warm is recorded as failed at once, every node pulls past the cache straight over the link, and nothing fails', async () => {
    // An error, not an absence: the warm gives up at once (502/503/504 and refused connections it waits out, as a restart).
    cacheFront.inject({ times: Infinity, fault: { kind: 'status', status: 500 } });
    try {
      link.resetStats();
      cacheFront.resetStats();
      const images = ERRING.map((component) => component.pullSpec);
      const since = Date.now();
      const started = Date.now();
      await createSet('past-erring-cache', images);
      await allPinned(images);
      const seconds = (Date.now() - started) / 1000;
      const held = new Set([CACHED, RESTARTED, CORRUPT, FULL].flatMap((group) => [...uniqueBlobs(group).keys()]));
      const unique = uniqueBlobs(ERRING, held);
      const ratio = bytesOf(blobGets(link.stats.log)) / sum(unique);
      console.log(`past an erring cache: ${images.length} images x ${cluster.nodes.length} nodes in ${seconds.toFixed(1)} s; link ratio ${ratio.toFixed(3)}; cache: ${cacheFront.stats.requests} requests, all 500`);
      const incomplete = await logged('cache warm incomplete; pulls fall back past the cache where it lacks a blob', since);
      expect(incomplete).toHaveLength(1);
      expect(incomplete[0]!.line.blobs).toBe(0);
      expect(String((incomplete[0]!.line.failures as string[])[0])).toContain('HTTP 500');
      // CRI-O asked the cache first, then took the next mirror: the link, one copy per node.
      expect(blobGets(cacheFront.stats.log).length + cacheFront.stats.log.filter((record) => record.target.includes('/manifests/')).length).toBeGreaterThan(0);
      expect(ratio).toBeGreaterThanOrEqual(cluster.nodes.length);
      expect(ratio).toBeLessThanOrEqual(cluster.nodes.length * 1.05);
      // No set failed on any node.
      const events = await cluster.kubeConfig.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: NAMESPACE });
      expect(events.items.filter((event) => event.type === 'Warning' && event.message?.includes('past-erring-cache'))).toEqual([]);
    } finally {
      cacheFront.clearFaults();
    }
  }, 360_000);

  it('without --cache-mirror: the drop-in is gone, CRI-O reloaded, and pulls go straight over the link (about one copy per node)', async () => {
    const offsets = new Map(cluster.nodes.map((node) => [node.name, logSize(node.crio.logPath)]));
    await stopAgents();
    for (const node of cluster.nodes) await startAgent(node, undefined);
    for (const node of cluster.nodes) {
      expect(existsSync(dropInOf(node))).toBe(false);
      await registriesReloaded(node, offsets.get(node.name)!, cacheFront.host, true);
    }
    link.resetStats();
    cacheFront.resetStats();
    const images = DIRECT.map((component) => component.pullSpec);
    const started = Date.now();
    await createSet('direct', images);
    await allPinned(images);
    const seconds = (Date.now() - started) / 1000;
    // Blobs the earlier sets already put on the nodes are not fetched again.
    const held = new Set([CACHED, RESTARTED, CORRUPT, FULL, ERRING].flatMap((group) => [...uniqueBlobs(group).keys()]));
    const unique = uniqueBlobs(DIRECT, held);
    const upstreamBlobs = blobGets(link.stats.log);
    const ratio = bytesOf(upstreamBlobs) / sum(unique);
    console.log(
      `direct: ${images.length} images x ${cluster.nodes.length} nodes in ${seconds.toFixed(1)} s; new unique blobs ${unique.size} (${sum(unique)} B); ` +
        `link: ${link.stats.requests} requests, ${upstreamBlobs.length} blob GETs, ${bytesOf(upstreamBlobs)} blob B, ratio ${ratio.toFixed(3)}; cache: ${cacheFront.stats.requests} requests`,
    );
    expect(cacheFront.stats.requests).toBe(0);
    // One copy per node.
    expect(ratio).toBeGreaterThanOrEqual(cluster.nodes.length);
    expect(ratio).toBeLessThanOrEqual(cluster.nodes.length * 1.05);
  }, 360_000);
});

describe('install --cache --apply on the real kube-apiserver', () => {
  it('applies the cache (ConfigMap, PVC, Deployment, Service) in the agent namespace and gives the agents --cache-mirror quay.io=<the ClusterIP the Service got>:5000', async () => {
    // A digest-pinned image: nothing is asked of Docker Hub (there is no kubelet to run it here either).
    const image = `docker.io/library/registry@sha256:${'c'.repeat(64)}`;
    // The stand-in Service for the test cache's metrics goes: install makes its own.
    await cluster.kubeConfig.makeApiClient(CoreV1Api).deleteNamespacedService({ name: 'prestage-cache', namespace: NAMESPACE });
    const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--cache', '--cache-image', image, '--cache-size', '20Gi', '--apply', '--kubeconfig', cluster.kubeconfigPath]);
    console.log(`$ prestage install --image ghcr.io/prestage/prestage:test --cache --cache-size 20Gi --apply  (exit ${installed.code})\n${installed.stdout}${installed.stderr}`);
    expect([installed.code, installed.stderr]).toEqual([0, '']);
    const client = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const service = await client.readNamespacedService({ name: 'prestage-cache', namespace: NAMESPACE });
    const clusterIP = service.spec!.clusterIP!;
    expect(clusterIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(installed.stdout).toContain(`agents pull through the cache: --cache-mirror=quay.io=${clusterIP}:5000\n`);
    const pvc = await client.readNamespacedPersistentVolumeClaim({ name: 'prestage-cache', namespace: NAMESPACE });
    expect(pvc.spec!.resources!.requests!.storage).toBe('20Gi');
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    const deployment = await apps.readNamespacedDeployment({ name: 'prestage-cache', namespace: NAMESPACE });
    expect(deployment.spec!.template.spec!.containers[0]!.image).toBe(image);
    const daemonSet = await apps.readNamespacedDaemonSet({ name: AGENT_NAME, namespace: NAMESPACE });
    expect(daemonSet.spec!.template.spec!.containers[0]!.args).toContain(`--cache-mirror=quay.io=${clusterIP}:5000`);
  }, 60_000);

  it('with leaves by zone: a leaf cache per zone value among the Nodes, each a pull-through of the root\'s ClusterIP, pinned to its zone; the agents get --cache-leaf per leaf and the label, and may write each leaf\'s warm Lease; a tree without leaves deletes them', async () => {
    const image = `docker.io/library/registry@sha256:${'c'.repeat(64)}`;
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const zone = 'topology.kubernetes.io/zone';
    const zones = ['zone-a', 'zone-a', 'zone-b'];
    for (const [index, node] of cluster.nodes.entries()) {
      await new KubeClient(cluster.kubeConfig).request('PATCH', `/api/v1/nodes/${node.name}`, { body: { metadata: { labels: { [zone]: zones[index] ?? 'zone-b' } } }, contentType: 'application/merge-patch+json' });
    }
    const install = (...more: string[]) => runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--cache', '--cache-image', image, '--cache-size', '20Gi', ...more, '--apply', '--kubeconfig', cluster.kubeconfigPath]);
    const tree = await install('--cache-leaf-label', zone, '--cache-leaf-size', '10Gi');
    console.log(`$ prestage install ... --cache --cache-leaf-label ${zone} --cache-leaf-size 10Gi --apply  (exit ${tree.code})\n${tree.stdout.split('\n').slice(-12).join('\n')}${tree.stderr}`);
    expect([tree.code, tree.stderr]).toEqual([0, '']);
    const ip = async (name: string) => (await core.readNamespacedService({ name, namespace: NAMESPACE })).spec!.clusterIP!;
    const [root, a, b] = [await ip('prestage-cache'), await ip('prestage-cache-leaf-zone-a'), await ip('prestage-cache-leaf-zone-b')];
    expect(new Set([root, a, b]).size).toBe(3);
    const config = (await core.readNamespacedConfigMap({ name: 'prestage-cache-leaf-zone-a', namespace: NAMESPACE })).data!['config.yml']!;
    expect(config).toContain(`remoteurl: http://${root}:5000`);
    expect((await core.readNamespacedPersistentVolumeClaim({ name: 'prestage-cache-leaf-zone-b', namespace: NAMESPACE })).spec!.resources!.requests!.storage).toBe('10Gi');
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    const leafB = await apps.readNamespacedDeployment({ name: 'prestage-cache-leaf-zone-b', namespace: NAMESPACE });
    expect(JSON.stringify(leafB.spec!.template.spec!.affinity)).toContain(`"key":"${zone}","operator":"In","values":["zone-b"]`);
    // The root Service selects the root's pod only, never a leaf's.
    const rootSelector = (await core.readNamespacedService({ name: 'prestage-cache', namespace: NAMESPACE })).spec!.selector!;
    expect(Object.entries(rootSelector).every(([key, value]) => leafB.spec!.template.metadata!.labels![key] === value)).toBe(false);
    const args = (await apps.readNamespacedDaemonSet({ name: AGENT_NAME, namespace: NAMESPACE })).spec!.template.spec!.containers[0]!.args!;
    expect(args).toEqual(expect.arrayContaining([`--cache-mirror=quay.io=${root}:5000`, `--cache-leaf=zone-a=${a}:5000`, `--cache-leaf=zone-b=${b}:5000`, `--cache-leaf-label=${zone}`]));
    expect(tree.stdout).toContain(`agents pull through 2 leaf caches first: zone-a=${a}:5000, zone-b=${b}:5000\n`);
    const role = await new KubeClient(cluster.kubeConfig).get<{ rules: Array<{ resourceNames?: string[] }> }>(`/apis/rbac.authorization.k8s.io/v1/namespaces/${NAMESPACE}/roles/${AGENT_NAME}`);
    expect(role.rules.flatMap((rule) => rule.resourceNames ?? [])).toEqual(expect.arrayContaining(['prestage-cache-warm-0', 'prestage-cache-warm-leaf-0-0', 'prestage-cache-warm-leaf-1-0']));
    // Back to one cache: the leaves go, their flags with them.
    const single = await install();
    expect([single.code, single.stderr]).toEqual([0, '']);
    for (const leaf of ['zone-a', 'zone-b']) for (const kind of ['deployment', 'service', 'configmap', 'persistentvolumeclaim']) expect(single.stdout).toContain(`${kind}/prestage-cache-leaf-${leaf} deleted\n`);
    // Deleted in the foreground: gone, or going (the garbage collector finishes it where it runs).
    const left = (await apps.listNamespacedDeployment({ namespace: NAMESPACE, labelSelector: 'prestage.dev/cache-tier=leaf' })).items;
    expect(left.filter((item) => !item.metadata!.deletionTimestamp)).toEqual([]);
    const after = (await apps.readNamespacedDaemonSet({ name: AGENT_NAME, namespace: NAMESPACE })).spec!.template.spec!.containers[0]!.args!;
    expect(after.filter((arg) => arg.startsWith('--cache-leaf'))).toEqual([]);
  }, 60_000);

  it('on OpenShift (config.openshift.io CRDs as openshift/api release-4.21 ships them): an ImageDigestMirrorSet sends quay.io digest pulls to the cache first, its address joins the Image config\'s insecure (and allowed) registries; without --cache both go, leaving what others put there', async () => {
    const client = new KubeClient(cluster.kubeConfig);
    await installOpenShiftCrds(client, OPENSHIFT_4_21, 'config');
    const sources = { insecureRegistries: ['registry.corp:5000'], allowedRegistries: ['quay.io', 'registry.corp:5000', 'registry.redhat.io'] };
    await client.request('POST', '/apis/config.openshift.io/v1/images', { body: { apiVersion: 'config.openshift.io/v1', kind: 'Image', metadata: { name: 'cluster' }, spec: { registrySources: sources } } });
    const image = `docker.io/library/registry@sha256:${'c'.repeat(64)}`;
    const flags = { on: ['--cache', '--cache-image', image, '--cache-size', '20Gi'], keep: [], off: ['--no-cache'] };
    const install = (cache: keyof typeof flags) => runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', ...flags[cache], '--apply', '--kubeconfig', cluster.kubeconfigPath]);
    const on = await install('on');
    console.log(`$ prestage install --image ghcr.io/prestage/prestage:test --cache --apply  (OpenShift, exit ${on.code})\n${on.stdout.split('\n').slice(-4).join('\n')}`);
    expect([on.code, on.stderr]).toEqual([0, '']);
    const clusterIP = (await cluster.kubeConfig.makeApiClient(CoreV1Api).readNamespacedService({ name: 'prestage-cache', namespace: NAMESPACE })).spec!.clusterIP!;
    const cache = `${clusterIP}:5000`;
    const mirrorSet = await client.get<{ metadata: { annotations: Record<string, string> }; spec: unknown }>('/apis/config.openshift.io/v1/imagedigestmirrorsets/prestage-cache');
    expect(mirrorSet.spec).toEqual({ imageDigestMirrors: [{ source: 'quay.io', mirrors: [cache], mirrorSourcePolicy: 'AllowContactingSource' }] });
    const imageConfig = () => client.get<{ spec: { registrySources: unknown } }>('/apis/config.openshift.io/v1/images/cluster').then((config) => config.spec.registrySources);
    expect(await imageConfig()).toEqual({ insecureRegistries: ['registry.corp:5000', cache], allowedRegistries: ['quay.io', 'registry.corp:5000', 'registry.redhat.io', cache] });
    expect(on.stdout).toContain(`imagedigestmirrorset/prestage-cache serverside-applied: quay.io digest pulls through ${cache} first\n`);
    // Again: nothing more.
    const again = await install('on');
    expect([again.code, again.stderr]).toEqual([0, '']);
    expect(again.stdout).toContain('(unchanged)');
    expect(await imageConfig()).toEqual({ insecureRegistries: ['registry.corp:5000', cache], allowedRegistries: ['quay.io', 'registry.corp:5000', 'registry.redhat.io', cache] });
    // Installing again without a cache flag (a new agent image, say) keeps the cache and its wiring.
    const kept = await install('keep');
    expect([kept.code, kept.stderr]).toEqual([0, '']);
    expect(kept.stdout).toContain(`agents keep pulling through the cache: --cache-mirror=quay.io=${cache} (install --no-cache --apply turns it off)\n`);
    expect(await client.find('/apis/config.openshift.io/v1/imagedigestmirrorsets/prestage-cache')).toBeDefined();
    // Off: the mirror set and exactly the entries it added go, then the cache itself.
    const off = await install('off');
    expect([off.code, off.stderr]).toEqual([0, '']);
    expect(off.stdout).toContain('imagedigestmirrorset/prestage-cache deleted\n');
    expect(off.stdout).toContain('deployment/prestage-cache deleted\nservice/prestage-cache deleted\nconfigmap/prestage-cache deleted\npersistentvolumeclaim/prestage-cache deleted\n');
    expect(await client.find('/apis/config.openshift.io/v1/imagedigestmirrorsets/prestage-cache')).toBeUndefined();
    expect(await imageConfig()).toEqual(sources);
    const daemonSet = await cluster.kubeConfig.makeApiClient(AppsV1Api).readNamespacedDaemonSet({ name: AGENT_NAME, namespace: NAMESPACE });
    expect(daemonSet.spec!.template.spec!.containers[0]!.args!.some((arg) => arg.startsWith('--cache-mirror'))).toBe(false);
  }, 60_000);

  it('stage --cache: plans, then checks the cache (there, wired, large enough for the plan) before applying; with no cache in the namespace it stops there with a one-line error', async () => {
    const registryFlags = ['--mirror', `quay.io=${upstream.host}`, '--insecure-registry', upstream.host, '--no-cluster'];
    const setNames = async () => (await new KubeClient(cluster.kubeConfig).get<{ items: Array<{ metadata: { name: string } }> }>(`/apis/${GROUP}/${VERSION}/${PINNED_IMAGE_SETS}`)).items.map((set) => set.metadata.name).sort();
    const before = await setNames();
    const missing = await runCli(['stage', truth.release.pullSpec, ...registryFlags, '--cache', '--cache-namespace', 'elsewhere', '--kubeconfig', cluster.kubeconfigPath]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe('prestage: error: --cache: there is no cache in namespace elsewhere (service prestage-cache); install it with `prestage install --cache --apply` (--cache-namespace names another namespace), or leave --cache out\n');
    // Nothing applied.
    expect(await setNames()).toEqual(before);
    // The cache `install --cache` left (a 20Gi PVC, agents wired): the same plan, checked in-process against it.
    const planned = await runCli(['plan', truth.release.pullSpec, ...registryFlags.slice(0, 4), '-o', 'json']);
    expect(planned.code).toBe(0);
    const plan = JSON.parse(planned.stdout) as Plan;
    await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--cache', '--cache-image', `docker.io/library/registry@sha256:${'c'.repeat(64)}`, '--cache-size', '20Gi', '--apply', '--kubeconfig', cluster.kubeconfigPath]);
    const checked = await checkCacheForPlan(new KubeClient(cluster.kubeConfig), NAMESPACE, plan, AGENT_NAME);
    const bytes = planCacheBytes(plan);
    console.log(`stage --cache: ${checked.lines.join('; ')}`);
    expect(checked.lines).toEqual([`cache prestage/prestage-cache: a 20.0 GiB volume; this plan pulls ${formatBytes(bytes)} through it (wired: the agents and ImageDigestMirrorSet prestage-cache)`]);
    expect(checked.warnings).toEqual([]);
    // Every blob of the sets' images once: at least the largest set, at most all of them together.
    expect(bytes).toBeGreaterThanOrEqual(Math.max(...plan.sets.map((set) => set.compressedBytes)));
    expect(bytes).toBeLessThanOrEqual(plan.sets.reduce((sum, set) => sum + set.compressedBytes, 0));
  }, 120_000);
});

describe('the cache warm, one digest in two repositories', () => {
  it('reads a digest for its second repository only once its first read ended, so the proxy stores it for both: the release image and the image it is built on, warmed together over a slow link, are then served by the cache alone', async () => {
    // distribution's proxy keeps one in-flight set for all repositories: a digest asked for while it is in flight for
    // another repository is streamed from upstream and not stored for this one (registry/proxy/proxyblobstore.go).
    const release = { repository: truth.releaseRepository, image: truth.release.image };
    const layers = new Set(release.image.layers.map((layer) => layer.digest));
    const base = truth.components.find((component) => component.layers.some((layer) => layers.has(layer.digest)))!;
    expect(base, 'a component sharing a layer with the release image (its base image)').toBeDefined();
    const slow = await startFaultProxy({ upstream: upstream.url });
    slow.setBandwidth(1024 * 1024);
    const fresh = await ProxyCache.start({ dir: join(dir, 'shared-digest'), remoteUrl: slow.url });
    const warmer = new LeaseCacheWarmer(new KubeClient(cluster.kubeConfig), { namespace: NAMESPACE, holder: 'master-0', mirrors: [{ source: 'quay.io', location: fresh.host }], log: createLogger('silent') });
    try {
      const images = [`${truth.sourceRegistry}/${release.repository}@${release.image.digest}`, base.pullSpec];
      const warmed = await warmer.fill(images.map(parseReference), 'amd64');
      expect(warmed.failures).toEqual([]);
      const keys = blobGets(slow.stats.log).map((record) => record.target);
      expect(new Set(keys).size, 'each blob over the link once per repository during the warm').toBe(keys.length);
      // Every blob of both images again, as the nodes' pulls ask: all stored, nothing more over the link.
      const before = slow.stats.log.length;
      for (const { repository, image } of [release, { repository: base.repository, image: base }]) {
        for (const blob of [image.config, ...image.layers]) await fetchToEnd(`http://${fresh.host}/v2/${repository}/blobs/${blob.digest}`);
      }
      expect(blobGets(slow.stats.log.slice(before)).map((record) => record.target)).toEqual([]);
    } finally {
      await warmer.close();
      await fresh.stop();
      await slow.stop();
    }
  }, 120_000);
});

const logSize = (path: string) => (existsSync(path) ? statSync(path).size : 0);
