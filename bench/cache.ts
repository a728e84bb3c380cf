/**
 * `npm run bench:cache`: the in-cluster cache against no cache, side by side in one run (issue
 * #15's measures). The fixture release's registry sits behind a bandwidth-capped fault proxy, the
 * slow link (BENCH_LINK_BYTES_PER_SECOND, default 2 MiB/s). Each run starts a fresh test-bed
 * cluster of BENCH_NODES nodes (default 3: real CRI-O each, real `prestage agent` processes with
 * their shipped defaults), creates one PinnedImageSet of the release's every-node images and
 * times it from creation to pinned on every node:
 *   A: through the cache (distribution v3 in proxy mode, `--cache-mirror quay.io=<cache>`);
 *   B: straight over the link (no `--cache-mirror`).
 * Reported per run: blob bytes over the link against the unique compressed bytes of the set,
 * link requests, what the cache fetched and served (its own metrics), the makespan, and for A the
 * bound 1.2 x unique / link rate + LAN time, where LAN time is what the nodes took after the warm
 * (set created to pinned everywhere, minus the warm's own time from its log line).
 *
 * Then the same two with the agents' `--link-rate` (issue #29; BENCH_CAP_BYTES_PER_SECOND,
 * default the link rate above) on a link 4x faster, so the cap binds and not the link:
 *   A+cap, B+cap: the link's bytes per second against the cap (max over any 5 s, mean over the
 *   run), and the time the link carried them against bytes / cap (goal <= 1.1x).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { API_VERSION, GROUP, PINNED_IMAGE_SETS, VERSION } from '../src/api/prestage.js';
import { parseCacheMetrics, type CacheCounters } from '../src/cluster/cache-metrics.js';
import { startCluster, type TestCluster } from '../test/cluster/index.js';
import type { Daemon } from '../test/cluster/processes.js';
import { startFaultProxy, startRegistry } from '../test/harness/index.js';
import { linkWindows, type LinkWindows } from '../test/harness/fault-proxy.js';
import { pinState, startNodeAgent } from '../test/support/agent-bed.js';
import { ProxyCache } from '../test/support/cache-bed.js';
import { runCli } from '../test/support/cli.js';

const NODES = Number(process.env.BENCH_NODES ?? 3);
const LINK_RATE = Number(process.env.BENCH_LINK_BYTES_PER_SECOND ?? 2 * 1024 * 1024);
const CAP = Number(process.env.BENCH_CAP_BYTES_PER_SECOND ?? LINK_RATE);
const NAMESPACE = 'prestage';
const BLOB = /^\/v2\/.+\/blobs\/sha256:[a-f0-9]{64}$/;

const fixture = buildReleaseFixture();
const images = fixture.truth.components.filter((component) => component.role === 'all');
const unique = new Map<string, number>();
for (const component of images) for (const blob of [component.config, ...component.layers]) unique.set(blob.digest, blob.size);
const uniqueBytes = [...unique.values()].reduce((a, b) => a + b, 0);

const root = await mkdtemp(join(tmpdir(), 'prestage-bench-cache-'));
const registry = await startRegistry({ storageDir: join(root, 'registry') });
await pushFixture(registry.url, fixture);
const link = await startFaultProxy({ upstream: registry.url });
link.setBandwidth(LINK_RATE);

interface RunResult {
  readonly name: string;
  readonly makespanS: number;
  readonly linkBlobBytes: number;
  readonly linkRequests: number;
  readonly linkWholeBlobGets: number;
  readonly linkRangeReads: number;
  readonly cache?: CacheCounters;
  readonly warmS?: number;
  /** The link's bytes per second over the run (whole seconds). */
  readonly windows: LinkWindows;
  /** First to last byte over the link, s. */
  readonly linkBusyS: number;
}

async function run(withCache: boolean, cap?: number): Promise<RunResult> {
  // Under a cap the link is 4x faster than it: the cap binds, not the link.
  link.setBandwidth(cap ? 4 * cap : LINK_RATE);
  const dir = await mkdtemp(join(root, withCache ? 'with-' : 'without-'));
  const cache = withCache ? await ProxyCache.start({ dir, remoteUrl: link.url, volumeBytes: 256 * 1024 * 1024 }) : undefined;
  let cluster: TestCluster | undefined;
  const agents: Daemon[] = [];
  try {
    cluster = await startCluster({ workers: NODES - 1, registryMirrors: { 'quay.io': link.host }, insecureRegistries: [link.host] });
    const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:bench', '--apply', '--kubeconfig', cluster.kubeconfigPath]);
    if (installed.code !== 0) throw new Error(`install: ${installed.stderr}`);
    for (const node of cluster.nodes) {
      agents.push(await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, args: [...(cache ? ['--cache-mirror', `quay.io=${cache.host}`] : []), ...(cap ? ['--link-rate', String(cap)] : [])], logName: `agent-${node.name}.log` }));
    }
    const before = cache ? await metrics(cache.metrics) : undefined;
    link.resetStats();
    const started = Date.now();
    await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createClusterCustomObject({
      group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS,
      body: { apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name: 'bench' }, spec: { pinnedImages: images.map((image) => ({ name: image.pullSpec })) } },
    });
    const pullSpecs = images.map((image) => image.pullSpec);
    for (;;) {
      const states = await Promise.all(cluster.nodes.map((node) => pinState(node, pullSpecs)));
      if (states.every((state) => Object.values(state).every((pinned) => pinned === true))) break;
      if (Date.now() - started > 30 * 60_000) throw new Error('not pinned everywhere within 30 minutes');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const makespanS = (Date.now() - started) / 1000;
    const blobGets = link.stats.log.filter((record) => record.method === 'GET' && BLOB.test(record.target));
    const after = cache ? await metrics(cache.metrics) : undefined;
    let warmS: number | undefined;
    if (cache) {
      for (const node of cluster.nodes) {
        for (const line of (await readFile(join(dir, `agent-${node.name}.log`), 'utf8')).split('\n')) {
          if (line.includes('"msg":"cache warmed"')) warmS = (JSON.parse(line) as { ms: number }).ms / 1000;
        }
      }
    }
    const windows = linkWindows(link.stats.perSecond, 5);
    return {
      name: `${withCache ? 'A: through the cache' : 'B: straight'}${cap ? ' +cap' : ''}`,
      makespanS,
      windows,
      linkBusyS: (link.stats.lastByteAt - link.stats.firstByteAt) / 1000,
      linkBlobBytes: blobGets.reduce((total, record) => total + record.bytesSent, 0),
      linkRequests: link.stats.requests,
      linkWholeBlobGets: blobGets.filter((record) => record.range === undefined).length,
      linkRangeReads: blobGets.filter((record) => record.range !== undefined).length,
      ...(before && after ? { cache: difference(after, before) } : {}),
      ...(warmS !== undefined ? { warmS } : {}),
    };
  } finally {
    await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
    await cluster?.stop();
    await cache?.stop();
  }
}

function metrics(address: string): Promise<CacheCounters> {
  return new Promise((resolve, reject) => {
    request(`http://${address}/metrics`, { agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.once('end', () => {
        const counters = parseCacheMetrics(Buffer.concat(chunks).toString('utf8'));
        if (counters) resolve(counters);
        else reject(new Error(`no proxy counters at ${address}`));
      });
    })
      .once('error', reject)
      .end();
  });
}

function difference(after: CacheCounters, before: CacheCounters): CacheCounters {
  return { requests: after.requests - before.requests, hits: after.hits - before.hits, misses: after.misses - before.misses, upstreamBytes: after.upstreamBytes - before.upstreamBytes, servedBytes: after.servedBytes - before.servedBytes };
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(2)} MiB`;
try {
  const withCache = await run(true);
  const without = await run(false);
  const linkS = uniqueBytes / LINK_RATE;
  const lanS = withCache.makespanS - (withCache.warmS ?? 0);
  const bound = 1.2 * linkS + lanS;
  const rows: Array<[string, string, string, string]> = [
    ['link blob bytes / unique bytes', (withCache.linkBlobBytes / uniqueBytes).toFixed(3), (without.linkBlobBytes / uniqueBytes).toFixed(3), (withCache.linkBlobBytes / without.linkBlobBytes).toFixed(2)],
    ['link blob bytes', String(withCache.linkBlobBytes), String(without.linkBlobBytes), (withCache.linkBlobBytes / without.linkBlobBytes).toFixed(2)],
    ['link requests', String(withCache.linkRequests), String(without.linkRequests), (withCache.linkRequests / without.linkRequests).toFixed(2)],
    ['link whole-blob GETs', String(withCache.linkWholeBlobGets), String(without.linkWholeBlobGets), (withCache.linkWholeBlobGets / without.linkWholeBlobGets).toFixed(2)],
    ['link 4-byte size reads (Range)', String(withCache.linkRangeReads), String(without.linkRangeReads), ''],
    ['makespan s (set created to pinned on every node)', withCache.makespanS.toFixed(1), without.makespanS.toFixed(1), (withCache.makespanS / without.makespanS).toFixed(2)],
  ];
  console.log(`bench:cache  ${NODES} nodes (real CRI-O, real agents), link capped at ${mib(LINK_RATE)}/s; one set of the release's ${images.length} every-node images: ${unique.size} unique blobs, ${uniqueBytes} B (${mib(uniqueBytes)}); ratio = A / B`);
  console.log(`  ${''.padEnd(50)}${'A: cache'.padStart(12)}${'B: straight'.padStart(14)}${'ratio'.padStart(8)}`);
  for (const [label, a, b, ratio] of rows) console.log(`  ${label.padEnd(50)}${a.padStart(12)}${b.padStart(14)}${ratio.padStart(8)}`);
  if (withCache.cache) {
    const c = withCache.cache;
    console.log(`  cache (its own metrics): ${c.upstreamBytes} B fetched upstream, ${c.servedBytes} B served; blob requests ${c.requests}: ${c.misses} misses, ${c.hits} hits`);
  }
  console.log(`  A: warm ${withCache.warmS?.toFixed(1) ?? '?'} s for ${mib(uniqueBytes)} (the link alone needs ${linkS.toFixed(1)} s: warm / link time ${((withCache.warmS ?? 0) / linkS).toFixed(2)}); LAN time after the warm ${lanS.toFixed(1)} s`);
  console.log(`  A: makespan ${withCache.makespanS.toFixed(1)} s against the bound 1.2 x ${linkS.toFixed(1)} s + ${lanS.toFixed(1)} s = ${bound.toFixed(1)} s: ${withCache.makespanS <= bound ? 'within' : 'OVER'} (${(withCache.makespanS / bound).toFixed(2)})`);
  console.log(`  B: makespan ${without.makespanS.toFixed(1)} s; the link alone needs ${(without.linkBlobBytes / LINK_RATE).toFixed(1)} s for what B fetched`);

  // The cap (issue #29): the agents' --link-rate on a link 4x faster than it.
  const cappedA = await run(true, CAP);
  const cappedB = await run(false, CAP);
  console.log(`bench:cache --link-rate ${mib(CAP)}/s on a ${mib(4 * CAP)}/s link; ratio = figure / cap`);
  console.log(`  ${''.padEnd(50)}${'A+cap'.padStart(12)}${'B+cap'.padStart(14)}`);
  const capRows: Array<[string, (r: RunResult) => string]> = [
    ['link max over any 5 s / cap', (r) => (r.windows.maxBytesPerSecond / CAP).toFixed(3)],
    ['link mean over the run / cap', (r) => (r.windows.meanBytesPerSecond / CAP).toFixed(3)],
    ['link blob bytes', (r) => String(r.linkBlobBytes)],
    ['link busy s (first to last byte)', (r) => r.linkBusyS.toFixed(1)],
    ['link busy / (link bytes / cap) (goal <= 1.1)', (r) => (r.linkBusyS / (r.linkBlobBytes / CAP)).toFixed(2)],
    ['makespan s', (r) => r.makespanS.toFixed(1)],
    ['makespan / (unique bytes / cap)', (r) => (r.makespanS / (uniqueBytes / CAP)).toFixed(2)],
  ];
  for (const [label, figure] of capRows) console.log(`  ${label.padEnd(50)}${figure(cappedA).padStart(12)}${figure(cappedB).padStart(14)}`);
  console.log(`  A+cap: warm ${cappedA.warmS?.toFixed(1) ?? '?'} s for ${mib(uniqueBytes)}: ${(((cappedA.warmS ?? 0) * CAP) / uniqueBytes).toFixed(2)} x unique / cap; the rest of its makespan is the nodes pulling from the cache over the LAN`);
} finally {
  await link.stop();
  await registry.stop();
  await rm(root, { recursive: true, force: true });
}
