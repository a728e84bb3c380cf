/**
 * `npm run bench:agent`: the node agent's memory, this build against the previous one, side by
 * side in one run (issue #39's measures). Each run starts a fresh test-bed cluster of BENCH_NODES
 * nodes (default 3: real CRI-O each) and one real `prestage agent` process per node, as the
 * DaemonSet runs it (NODE_OPTIONS as the DaemonSet sets them, plus the run's own), creates one
 * PinnedImageSet of the fixture release's every image and samples each agent's /proc status
 * every 250 ms until every node has pinned them all, then for BENCH_IDLE_S more (default 30).
 * Reported: peak RSS (VmHWM) and idle RSS (VmRSS at the end, and the median of the idle samples:
 * a resync pass near the end moves the former), the most of any node, in MiB.
 *
 * The baseline is BENCH_BASELINE (a git ref), default the commit before the agent's own entry.
 *
 * BENCH_IMAGES=100,1000: this build only, one run per N with N tiny synthetic images (sets of 500)
 * (bench/synthetic-images.ts) instead of the release, on BENCH_NODES nodes (default 1: each
 * agent sees only its own node, so one is enough); reports each N's figures and their ratio to
 * the first N's (goal: memory flat, within ±5 %, from 100 to 1000 images). With BENCH_BASELINE
 * set, the previous build runs beside this one for each N.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import { API_VERSION, MAX_PINNED_IMAGES as SET_MAX_IMAGES } from '../src/api/prestage.js';
import { AGENT_NODE_OPTIONS } from '../src/install/manifests.js';
import { KubeClient } from '../src/kube/client.js';
import { startCluster, type TestCluster } from '../test/cluster/index.js';
import type { Daemon } from '../test/cluster/processes.js';
import { startRegistry } from '../test/harness/index.js';
import { pinState, startNodeAgent } from '../test/support/agent-bed.js';
import { runCli } from '../test/support/cli.js';
import { processCpuSeconds } from './process-cpu.js';
import { syntheticImages } from './synthetic-images.js';
import { median } from './median.js';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** BENCH_IMAGES: counts of synthetic images, one run each (empty: the fixture release, against the baseline). */
const IMAGE_COUNTS = (process.env.BENCH_IMAGES ?? '').split(',').filter(Boolean).map(Number);
if (IMAGE_COUNTS.some((n) => !Number.isInteger(n) || n < 1)) {
  console.error(`BENCH_IMAGES=${process.env.BENCH_IMAGES}: want positive image counts separated by commas, e.g. BENCH_IMAGES=100,1000`);
  process.exit(2);
}
const NODES = Number(process.env.BENCH_NODES ?? (IMAGE_COUNTS.length > 0 ? 1 : 3));
const IDLE_S = Number(process.env.BENCH_IDLE_S ?? 30);
/** BENCH_AGENT_ARGS: the agent's extra flags, space-separated (e.g. --log-level=debug). */
const AGENT_ARGS = (process.env.BENCH_AGENT_ARGS ?? '').split(' ').filter(Boolean);
const NAMESPACE = 'prestage';
/** MiB, as the tables give them. */
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

interface Variant {
  readonly name: string;
  readonly entry: readonly string[];
  readonly nodeOptions: string;
  readonly env?: Readonly<Record<string, string>>;
}

/** The baseline's tree beside this one (git worktree, this node_modules), built by its own `npm run build`'s tsc. */
async function baselineEntry(): Promise<{ name: string; entry: string[]; remove: () => Promise<void> }> {
  const ref = process.env.BENCH_BASELINE ?? `${(await exec('git', ['log', '-1', '--format=%H', '--grep=^agent: an entry of its own'], { cwd: ROOT })).stdout.trim()}^`;
  const commit = (await exec('git', ['rev-parse', '--short', ref], { cwd: ROOT })).stdout.trim();
  const dir = join(tmpdir(), `prestage-baseline-${commit}`);
  if (!existsSync(join(dir, 'dist'))) {
    if (!existsSync(dir)) await exec('git', ['worktree', 'add', '--detach', dir, ref], { cwd: ROOT });
    if (!existsSync(join(dir, 'node_modules'))) await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    await exec(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: dir });
    if (existsSync(join(dir, 'scripts/agent-bundle.ts'))) await exec(process.execPath, ['--import', 'tsx', 'scripts/agent-bundle.ts'], { cwd: dir });
  }
  return { name: `previous (${commit})`, entry: [join(dir, 'bin/prestage.js')], remove: async () => void (await exec('git', ['worktree', 'remove', '--force', dir], { cwd: ROOT })) };
}

interface Sample {
  readonly rss: number;
  readonly hwm: number;
  /** RssAnon: the process's own pages, without the node binary's and libraries' file pages. */
  readonly anon: number;
  readonly anonPeak: number;
}

/** A `Field:   N kB` line of a /proc file (status, smaps_rollup), in bytes; 0 when absent. */
const kibField = (text: string, field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024;

async function status(pid: number, before?: Sample): Promise<Sample> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => kibField(text, field);
  const anon = kib('RssAnon');
  return { rss: kib('VmRSS'), hwm: kib('VmHWM'), anon, anonPeak: Math.max(anon, before?.anonPeak ?? 0) };
}

/** What of the idle RSS is lazily freed or huge pages (smaps_rollup), for reading the idle figure. */
async function idlePages(pid: number): Promise<string> {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  return ['Anonymous', 'LazyFree', 'AnonHugePages', 'Private_Dirty', 'Private_Clean', 'Shared_Clean'].map((field) => `${field} ${mib(kibField(text, field))}`).join(', ');
}

interface Figures {
  readonly peak: number;
  readonly idle: number;
  readonly anonPeak: number;
  readonly anonIdle: number;
  /** Medians of each node's samples over the idle time (the most of any node). */
  readonly idleMedian: number;
  readonly anonIdleMedian: number;
  readonly cpu: number;
  readonly perNode: string;
}


async function run(variant: Variant, registryHost: string, images: readonly string[]): Promise<Figures> {
  const dir = await mkdtemp(join(tmpdir(), 'prestage-bench-agent-'));
  let cluster: TestCluster | undefined;
  const agents: Daemon[] = [];
  try {
    cluster = await startCluster({ workers: NODES - 1, registryMirrors: { 'quay.io': registryHost }, insecureRegistries: [registryHost] });
    const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:bench', '--apply', '--kubeconfig', cluster.kubeconfigPath]);
    if (installed.code !== 0) throw new Error(`install: ${installed.stderr}`);
    const env = { ...process.env, ...variant.env, NODE_OPTIONS: `${AGENT_NODE_OPTIONS} ${variant.nodeOptions}`.trim() };
    for (const node of cluster.nodes) agents.push(await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, env, entry: variant.entry, logName: `agent-${node.name}.log`, args: AGENT_ARGS }));
    const client = new KubeClient(cluster.kubeConfig);
    // The CRD takes at most MAX_PINNED_IMAGES a set: more images, more sets (bench-0, bench-1, ...).
    for (let i = 0; i * SET_MAX_IMAGES < images.length; i++) {
      const part = images.slice(i * SET_MAX_IMAGES, (i + 1) * SET_MAX_IMAGES);
      await client.request('POST', AGENT_PATHS.pinnedImageSets, { body: { apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name: i === 0 ? 'bench' : `bench-${i}` }, spec: { pinnedImages: part.map((name) => ({ name })) } } });
    }
    const started = Date.now();
    let sampling = true;
    const last = new Map<number, Sample>();
    let idling = false;
    const idleSamples = new Map<number, Sample[]>(agents.map((agent) => [agent.pid, []]));
    const sampler = (async () => {
      while (sampling) {
        for (const agent of agents) {
          const sample = await status(agent.pid, last.get(agent.pid));
          last.set(agent.pid, sample);
          if (idling) idleSamples.get(agent.pid)!.push(sample);
        }
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    for (;;) {
      const states = await Promise.all(cluster.nodes.map((node) => pinState(node, images)));
      if (states.every((state) => Object.values(state).every((pinned) => pinned === true))) break;
      if (Date.now() - started > 15 * 60_000) throw new Error('not pinned everywhere within 15 minutes');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    idling = true;
    await new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000));
    sampling = false;
    await sampler;
    // Pages the process gave back with MADV_FREE still count in RSS until the kernel needs them.
    for (const agent of agents) console.log(`  (${variant.name}, ${images.length} images, pid ${agent.pid} at idle: ${await idlePages(agent.pid)})`);
    const figures = [...last.values()];
    // CPU the agents used, staging and idle: what a flag that saves memory costs.
    const cpu = agents.reduce((sum, agent) => sum + processCpuSeconds(agent.pid), 0) / agents.length;
    const idles = [...idleSamples.values()];
    return {
      peak: Math.max(...figures.map((f) => f.hwm)),
      idle: Math.max(...figures.map((f) => f.rss)),
      anonPeak: Math.max(...figures.map((f) => f.anonPeak)),
      anonIdle: Math.max(...figures.map((f) => f.anon)),
      idleMedian: Math.max(...idles.map((samples) => median(samples.map((f) => f.rss)))),
      anonIdleMedian: Math.max(...idles.map((samples) => median(samples.map((f) => f.anon)))),
      cpu,
      perNode: figures.map((f) => `${mib(f.hwm)}/${mib(f.rss)}`).join(' '),
    };
  } finally {
    await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
    await cluster?.stop();
    // BENCH_AGENT_LOGS: keep the agents' logs (with BENCH_AGENT_ARGS=--log-level=debug, each pass's).
    if (process.env.BENCH_AGENT_LOGS) await cp(dir, join(process.env.BENCH_AGENT_LOGS, `${variant.name}-${images.length}`.replace(/[^\w.-]+/g, '_')), { recursive: true, filter: (path) => !path.endsWith('.kubeconfig') });
    await rm(dir, { recursive: true, force: true });
  }
}

const root = await mkdtemp(join(tmpdir(), 'prestage-bench-agent-registry-'));
const registry = await startRegistry({ storageDir: join(root, 'registry') });
if (IMAGE_COUNTS.length > 0) {
  try {
    await byImageCount(IMAGE_COUNTS);
  } finally {
    await registry.stop();
    await rm(root, { recursive: true, force: true });
  }
  process.exit(0);
}
const fixture = buildReleaseFixture();
const images = fixture.truth.components.map((component) => component.pullSpec);
await pushFixture(registry.url, fixture);
const baseline = await baselineEntry();
// As the DaemonSet runs it: bin/prestage.js, which runs the agent's own bundle (dist/agent.cjs).
const current = [join(ROOT, 'bin/prestage.js')];
/** `NAME=VALUE` words are the agent's environment, the rest node's own flags (V8 flags NODE_OPTIONS refuses, e.g. --optimize-for-size). */
function variantOf(words: string): Variant {
  const env = Object.fromEntries(words.split(' ').filter((w) => /^[A-Z_]+=/.test(w)).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]));
  const args = words.split(' ').filter((w) => w !== '' && !/^[A-Z_]+=/.test(w));
  return { name: `this build, ${words}`, entry: [...args, ...current], nodeOptions: '', env };
}
const variants: Variant[] = [
  { name: baseline.name, entry: baseline.entry, nodeOptions: '' },
  { name: 'this build', entry: current, nodeOptions: '' },
  ...(process.env.BENCH_AGENT_VARIANTS ?? '').split(';').filter(Boolean).map(variantOf),
];
try {
  const results = [];
  for (const variant of variants) {
    results.push({ variant, ...(await run(variant, registry.host, images)) });
    const r = results.at(-1)!;
    console.log(`  (done: ${variant.name}: peak ${mib(r.peak)} MiB, idle ${mib(r.idle)} MiB (median ${mib(r.idleMedian)}); anonymous ${mib(r.anonPeak)}/${mib(r.anonIdle)} (median ${mib(r.anonIdleMedian)}); CPU ${r.cpu.toFixed(1)} s an agent)`);
  }
  const base = results[0]!;
  console.log(`bench:agent  ${NODES} nodes (real CRI-O), one set of the fixture release's ${images.length} images; NODE_OPTIONS ${AGENT_NODE_OPTIONS} (the DaemonSet's) + the variant's; MiB, the most of any node; idle at the end and the median over ${IDLE_S} s idle; ratio = variant / ${base.variant.name}`);
  console.log(`  ${'variant'.padEnd(58)}${'peak'.padStart(8)}${'ratio'.padStart(7)}${'idle'.padStart(8)}${'ratio'.padStart(7)}${'median'.padStart(8)}${'ratio'.padStart(7)}  anon peak/idle  cpu s  ratio   per node peak/idle`);
  for (const r of results) {
    console.log(
      `  ${r.variant.name.padEnd(58)}${mib(r.peak).padStart(8)}${(r.peak / base.peak).toFixed(2).padStart(7)}${mib(r.idle).padStart(8)}${(r.idle / base.idle).toFixed(2).padStart(7)}${mib(r.idleMedian).padStart(8)}${(r.idleMedian / base.idleMedian).toFixed(2).padStart(7)}  ${`${mib(r.anonPeak)}/${mib(r.anonIdle)}`.padStart(14)}${r.cpu.toFixed(1).padStart(7)}${(r.cpu / base.cpu).toFixed(2).padStart(7)}   ${r.perNode}`,
    );
  }
  console.log('  goals: peak <= 64 MiB, idle <= 48 MiB');
} finally {
  await registry.stop();
  await rm(root, { recursive: true, force: true });
  if (!process.env.BENCH_KEEP_BASELINE) await baseline.remove().catch(() => undefined);
}

/** This build, one run per count of synthetic images; ratios to the first count's run. */
async function byImageCount(counts: readonly number[]): Promise<void> {
  // BENCH_AGENT_NODE_OPTIONS: e.g. --heapsnapshot-signal=SIGUSR2, to see what the agent holds; BENCH_AGENT_NODE_FLAGS: flags
  // NODE_OPTIONS refuses (e.g. --trace-gc, with BENCH_AGENT_LOGS to keep what it prints), on node's command line.
  const flags = (process.env.BENCH_AGENT_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  const current: Variant = { name: 'this build', entry: [...flags, join(ROOT, 'bin/prestage.js')], nodeOptions: process.env.BENCH_AGENT_NODE_OPTIONS ?? '' };
  // With BENCH_BASELINE, the previous build too, each count's runs side by side.
  const baseline = process.env.BENCH_BASELINE ? await baselineEntry() : undefined;
  const variants: Variant[] = [...(baseline ? [{ name: baseline.name, entry: [...flags, ...baseline.entry], nodeOptions: current.nodeOptions }] : []), current];
  const results: (Figures & { count: number; variant: Variant })[] = [];
  try {
    for (const count of counts) {
      const synthetic = syntheticImages(count);
      await pushFixture(registry.url, synthetic.fixture);
      for (const variant of variants) {
        results.push({ count, variant, ...(await run(variant, registry.host, synthetic.pullSpecs)) });
        const r = results.at(-1)!;
        console.log(`  (done: ${variant.name}, ${count} images: peak ${mib(r.peak)} MiB, idle ${mib(r.idle)} MiB (median ${mib(r.idleMedian)}); anonymous ${mib(r.anonPeak)}/${mib(r.anonIdle)} (median ${mib(r.anonIdleMedian)}); CPU ${r.cpu.toFixed(1)} s an agent)`);
      }
    }
  } finally {
    if (baseline && !process.env.BENCH_KEEP_BASELINE) await baseline.remove().catch(() => undefined);
  }
  const ratio = (value: number, of: number) => (value / of).toFixed(3).padStart(7);
  console.log(`bench:agent  ${NODES} node(s) (real CRI-O), N tiny synthetic images (one unique layer each) in sets of at most ${SET_MAX_IMAGES}; NODE_OPTIONS ${AGENT_NODE_OPTIONS} (the DaemonSet's); MiB, the most of any node; idle at the end and the median over ${IDLE_S} s idle; ratio = N's / ${counts[0]}'s of the same build`);
  console.log(`  ${'build'.padEnd(20)}${'images'.padStart(7)}${'peak'.padStart(8)}${'ratio'.padStart(7)}${'idle'.padStart(8)}${'ratio'.padStart(7)}${'median'.padStart(8)}${'ratio'.padStart(7)}${'anon peak'.padStart(11)}${'ratio'.padStart(7)}${'anon idle'.padStart(11)}${'median'.padStart(8)}${'ratio'.padStart(7)}  cpu s`);
  for (const r of results) {
    const base = results.find((other) => other.variant === r.variant)!;
    console.log(
      `  ${r.variant.name.padEnd(20)}${String(r.count).padStart(7)}${mib(r.peak).padStart(8)}${ratio(r.peak, base.peak)}${mib(r.idle).padStart(8)}${ratio(r.idle, base.idle)}${mib(r.idleMedian).padStart(8)}${ratio(r.idleMedian, base.idleMedian)}${mib(r.anonPeak).padStart(11)}${ratio(r.anonPeak, base.anonPeak)}${mib(r.anonIdle).padStart(11)}${mib(r.anonIdleMedian).padStart(8)}${ratio(r.anonIdleMedian, base.anonIdleMedian)}${r.cpu.toFixed(1).padStart(7)}`,
    );
  }
  console.log('  goal: memory flat (ratio within 0.95..1.05) from the fewest images to the most');
}
