/**
 * `npm run bench:link`: the link cap where a site would measure it, this build beside the
 * previous one (BENCH_BASELINE, default the commit before "link cap: every request pays"), one
 * run each (issue #50's measures). The test bed: 3 nodes with real CRI-O and real `prestage
 * agent` processes of the build under test; every image reference through the fault proxy,
 * which counts what it sends (bodies and heads) per second and holds each connection to a
 * 64 KiB TCP window, as a slow link does. For each cap (BENCH_RATES, KiB/s, default 64,256,1024):
 *   small: `stage` of the fixture release (58 images a node), the CLI reading over the link too,
 *          its first 40 s and the pulls then under way (a whole stage takes minutes at these caps);
 *   large: `apply` of two images of one 1.5 MiB layer each to the control plane, to the end.
 * Reported: the most over any 5 s and the mean, against the cap; for large, the time the link
 * was busy against bytes / cap (the goal: within 1.15x, so the cap is not held by idling).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { KubeClient } from '../src/kube/client.js';
import { startCluster } from '../test/cluster/index.js';
import type { Daemon } from '../test/cluster/processes.js';
import { linkWindows, type FaultProxy } from '../test/harness/fault-proxy.js';
import { startFaultProxy, startRegistry } from '../test/harness/index.js';
import { startNodeAgent } from '../test/support/agent-bed.js';
import { file, pushImage } from '../test/support/built-images.js';
import { CURRENT, previousBuild, type Build } from './previous-build.js';
import { emptyNodes as emptyLinkNodes } from './empty-nodes.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MiB = 2 ** 20;
const NAMESPACE = 'prestage';
const RATES = (process.env.BENCH_RATES ?? '64,256,1024').split(',').map((kib) => Number(kib) * 1024);

process.env.BENCH_BASELINE ??= `${(await run('git', ['log', '-1', '--format=%H', '--grep=^link cap: every request pays'], { cwd: ROOT })).stdout.trim()}^`;

const fixture = buildReleaseFixture();
const root = await mkdtemp(join(tmpdir(), 'prestage-bench-link-'));
const registry = await startRegistry({ storageDir: join(root, 'registry') });
await pushFixture(registry.url, fixture);
const bigRegistry = await startRegistry({ storageDir: join(root, 'big') });
const link = await startFaultProxy({ upstream: registry.url });
const bigLink = await startFaultProxy({ upstream: bigRegistry.url });
for (const proxy of [link, bigLink]) {
  proxy.setWindow(64 * 1024);
  proxy.countHeads(true);
}
const large = await Promise.all([0, 1].map(async (n) => (await pushImage(bigRegistry.host, `prestage-test/large-${n}`, [[file(`large-${n}.bin`, randomBytes(1.5 * MiB))]], {})).replace(bigRegistry.host, 'large.example')));
const largeSet = join(root, 'large-images.yaml');
await writeFile(largeSet, ['apiVersion: machineconfiguration.openshift.io/v1', 'kind: PinnedImageSet', 'metadata:', '  name: large-images', '  labels:', '    machineconfiguration.openshift.io/role: master', 'spec:', '  pinnedImages:', ...large.map((image) => `  - name: ${image}`), ''].join('\n'));
const cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': link.host, 'large.example': bigLink.host }, insecureRegistries: [link.host, bigLink.host] });
const client = new KubeClient(cluster.kubeConfig);
const kube = ['--kubeconfig', cluster.kubeconfigPath];

interface Row {
  readonly build: string;
  readonly images: 'small' | 'large';
  readonly cap: number;
  readonly max: number;
  readonly mean: number;
  readonly bytes: number;
  /** Large only: first to last byte over the link against bytes / cap. */
  readonly busy?: number;
}

async function cli(build: Build, args: readonly string[]): Promise<{ code: number; stderr: string }> {
  try {
    const { stderr } = await run(process.execPath, [build.bin, ...args], { maxBuffer: 64 * MiB });
    return { code: 0, stderr };
  } catch (error) {
    const failed = error as { code?: number; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : 1, stderr: failed.stderr ?? '' };
  }
}

const emptyNodes = () => emptyLinkNodes(client, cluster, ['quay.io/openshift-release-dev/', 'large.example/']);

function measured(build: Build, images: Row['images'], cap: number, proxy: FaultProxy, busy: boolean): Row {
  const windows = linkWindows(proxy.stats.perSecond, 5);
  const bytes = proxy.stats.bytesSent;
  return { build: build.name, images, cap, max: windows.maxBytesPerSecond / cap, mean: windows.meanBytesPerSecond / cap, bytes, ...(busy ? { busy: (proxy.stats.lastByteAt - proxy.stats.firstByteAt) / 1000 / (bytes / cap) } : {}) };
}

const installed = await cli(CURRENT, ['install', '--image', 'ghcr.io/prestage/prestage:bench', '--apply', ...kube]);
if (installed.code !== 0) throw new Error(`install: ${installed.stderr}`);
const rows: Row[] = [];
const previous = await previousBuild();
try {
  for (const build of [previous, CURRENT]) {
    const dir = await mkdtemp(join(root, 'agents-'));
    const agents: Daemon[] = [];
    try {
      for (const node of cluster.nodes) agents.push(await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, entry: [build.bin], linkRelay: build === CURRENT, args: ['--concurrency', '4', '--control-plane-concurrency', '4'] }));
      for (const cap of RATES) {
        link.resetStats();
        const staged = await cli(build, ['stage', fixture.truth.release.pullSpec, '--mirror', `quay.io=${link.host}`, ...build.insecure(link.host), '--no-cluster', '--link-rate', String(cap), '--timeout', '40s', ...kube]);
        if (staged.code !== 124) throw new Error(`${build.name} stage at ${cap} B/s: exit ${staged.code}: ${staged.stderr}`);
        await emptyNodes();
        rows.push(measured(build, 'small', cap, link, false));
        bigLink.resetStats();
        const applied = await cli(build, ['apply', largeSet, '--link-rate', String(cap), ...kube]);
        const waited = applied.code === 0 ? await cli(build, ['wait', '--timeout', '5m', ...kube]) : applied;
        if (waited.code !== 0) throw new Error(`${build.name} large images at ${cap} B/s: exit ${waited.code}: ${waited.stderr}`);
        rows.push(measured(build, 'large', cap, bigLink, true));
        await emptyNodes();
        console.error(`${build.name} at ${cap / 1024} KiB/s: done`);
      }
    } finally {
      await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
    }
  }
} finally {
  await cluster.stop();
  for (const stop of [link, bigLink, registry, bigRegistry]) await stop.stop();
  await previous.remove();
  await rm(root, { recursive: true, force: true });
}

console.log('| build | images | cap | max over any 5 s / cap | mean / cap | bytes over the link | busy time / (bytes / cap) |');
console.log('|---|---|---|---|---|---|---|');
for (const row of rows) console.log(`| ${row.build} | ${row.images} | ${row.cap / 1024} KiB/s | ${row.max.toFixed(3)} | ${row.mean.toFixed(3)} | ${(row.bytes / MiB).toFixed(2)} MiB | ${row.busy?.toFixed(2) ?? '-'} |`);
const worst = rows.filter((row) => row.build === CURRENT.name).reduce((most, row) => Math.max(most, row.max), 0);
console.log(`this build, the most over any 5 s: ${worst.toFixed(3)} of the cap (goal <= 1.05)`);
