/**
 * `npm run bench:path`: an upgrade of three hops (the fixture's 4.16.3 -> 4.16.8 -> 4.17.5 ->
 * 4.18.2, releases sharing layers as consecutive ones do) against the releases one at a time,
 * side by side in the same run, on the test bed (one control-plane node and two workers, each
 * with its own CRI-O and prestage agent) behind a link of BENCH_LINK_RATE bytes/s (default
 * 4 MiB/s) with a BENCH_RTT_MS round trip (default 20 ms):
 * - plan: `plan --from --to --graph` (every hop, the layer sizes read once) against `plan HOP`
 *   three times one after another, and against one plan;
 * - stage, from cold nodes each time: the path in one `stage`, against one release's `stage`,
 *   and against three single-release stages one after another: bytes over the link (the proxy
 *   counts what it sends) and wall time.
 * Goals (issue 51): the path's bytes <= 1.3x one release's, its stage <= 1.5x one stage's time,
 * its plan <= 1.5x (of one plan; three plans are the baseline).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pushFixture } from '../fixtures/push.js';
import { buildReleasePath } from '../fixtures/release-path.js';
import { buildUpdateGraph } from '../fixtures/update-graph.js';
import { KubeClient } from '../src/kube/client.js';
import { startCluster } from '../test/cluster/index.js';
import type { Daemon } from '../test/cluster/processes.js';
import { startFaultProxy, startRegistry, startUpdateService } from '../test/harness/index.js';
import { startNodeAgent } from '../test/support/agent-bed.js';
import { emptyNodes } from './empty-nodes.js';
import { median } from './median.js';
import { CURRENT } from './previous-build.js';

const run = promisify(execFile);
const MiB = 2 ** 20;
const RATE = Number(process.env.BENCH_LINK_RATE ?? 4 * MiB);
const RTT_MS = Number(process.env.BENCH_RTT_MS ?? 20);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CHANNEL = 'eus-4.18';

const fixture = buildReleasePath();
const [from, ...hops] = fixture.truth.releases.map((r) => r.version) as [string, ...string[]];
const last = hops.at(-1)!;
const pullSpecOf = (version: string) => fixture.truth.releases.find((r) => r.version === version)!.pullSpec;
const root = await mkdtemp(join(tmpdir(), 'prestage-bench-path-'));
const registry = await startRegistry({ storageDir: join(root, 'registry') });
await pushFixture(registry.url, fixture);
const link = await startFaultProxy({ upstream: registry.url });
link.setLatency(RTT_MS);
const service = await startUpdateService({ graphs: (channel) => (channel === CHANNEL ? buildUpdateGraph(fixture, channel) : undefined) });
const graph = ['--graph', `${service.url}/api/upgrades_info/v1/graph`, '--channel', CHANNEL];
const registryFlags = ['--mirror', `quay.io=${link.host}`, ...CURRENT.insecure(link.host)];
const cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': link.host }, insecureRegistries: [link.host] });
const client = new KubeClient(cluster.kubeConfig);
const kube = ['--kubeconfig', cluster.kubeconfigPath];

async function cli(args: readonly string[]): Promise<number> {
  const started = performance.now();
  try {
    await run(process.execPath, [CURRENT.bin, ...args], { maxBuffer: 256 * MiB });
  } catch (error) {
    throw new Error(`prestage ${args.join(' ')}: ${(error as { stderr?: string }).stderr ?? error}`);
  }
  return (performance.now() - started) / 1000;
}

const agents: Daemon[] = [];
try {
  await cli(['install', '--image', 'ghcr.io/prestage/prestage:bench', '--apply', ...kube]);
  for (const node of cluster.nodes) agents.push(await startNodeAgent(cluster, node, { dir: root, namespace: 'prestage', args: ['--concurrency', '4', '--control-plane-concurrency', '4'] }));

  // Plan: no bandwidth cap, the round trip only (a plan reads little).
  link.setBandwidth(null);
  const planPath = [] as number[];
  const planThree = [] as number[];
  const planOne = [] as number[];
  for (let i = 0; i < RUNS; i++) {
    planPath.push(await cli(['plan', '--from', from, '--to', last, ...graph, ...registryFlags, '-o', 'json']));
    let three = 0;
    for (const hop of hops) three += await cli(['plan', pullSpecOf(hop), ...registryFlags, '-o', 'json']);
    planThree.push(three);
    planOne.push(await cli(['plan', pullSpecOf(last), ...registryFlags, '-o', 'json']));
  }

  // Stage from cold nodes, the link capped.
  link.setBandwidth(RATE);
  const stage = async (args: readonly string[]) => cli(['stage', ...args, ...registryFlags, ...kube, '--no-cluster', '--timeout', '30m']);
  const measure = async (what: () => Promise<number>) => {
    await emptyNodes(client, cluster, ['quay.io/openshift-release-dev/']);
    link.resetStats();
    const seconds = await what();
    return { seconds, bytes: link.stats.bytesSent };
  };
  const path = await measure(() => stage(['--from', from, '--to', last, ...graph]));
  const one = await measure(() => stage([pullSpecOf(last)]));
  const three = await measure(async () => {
    let seconds = 0;
    for (const hop of hops) seconds += await stage([pullSpecOf(hop)]);
    return seconds;
  });

  const ratio = (a: number, b: number) => (a / b).toFixed(2);
  const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;
  console.log(`\nbench:path: ${from} -> ${hops.join(' -> ')}; test bed 1 control-plane node + 2 workers; link ${mib(RATE)}/s, ${RTT_MS} ms round trip; plans median of ${RUNS}, stages one run each\n`);
  console.log('| measure | path | one release | three releases one after another | path / one | path / three |');
  console.log('|---|---|---|---|---|---|');
  console.log(`| plan wall time | ${median(planPath).toFixed(2)} s | ${median(planOne).toFixed(2)} s | ${median(planThree).toFixed(2)} s | ${ratio(median(planPath), median(planOne))} | ${ratio(median(planPath), median(planThree))} |`);
  console.log(`| bytes over the link (stage) | ${mib(path.bytes)} | ${mib(one.bytes)} | ${mib(three.bytes)} | ${ratio(path.bytes, one.bytes)} | ${ratio(path.bytes, three.bytes)} |`);
  console.log(`| stage wall time | ${path.seconds.toFixed(1)} s | ${one.seconds.toFixed(1)} s | ${three.seconds.toFixed(1)} s | ${ratio(path.seconds, one.seconds)} | ${ratio(path.seconds, three.seconds)} |`);
} finally {
  await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
  await cluster.stop();
  await service.close();
  await link.stop();
  await registry.stop();
  await rm(root, { recursive: true, force: true });
}
