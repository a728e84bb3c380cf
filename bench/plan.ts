/**
 * `npm run bench:plan`: prestage plan against the baseline a person would script with public
 * tools for what `oc adm release info --size` does (skopeo: copy the release image to read
 * its payload, then inspect every component, 4 at a time), in the same run, on the fixture
 * release behind a proxy with a 20 ms round trip (every request, plus each new connection's
 * handshake). Prints wall-time ratios and the
 * bytes prestage read against the minimum any planner must read.
 *
 * Beside the baseline, prestage's wall time against the critical-path lower bound for the
 * requests it made, at each round trip in BENCH_RTTS (default 20 and 100 ms):
 * RTT x (dependent round trips + one connection handshake + the other requests / concurrency)
 * + bytes / bandwidth (BENCH_BANDWIDTH bytes/s, default uncapped). The dependent chain is what
 * any planner waits through one after another: the release manifest, its payload layer, a
 * component manifest, a layer trailer; plus the scheme probe an insecure (plain-HTTP) registry costs.
 *
 * Both figures for this checkout's single executable (`npm run dist`, built in the same run) too.
 *
 * First, this build beside the previous one (built from git in the same run,
 * bench/previous-build.ts): wall time and the CPU time of the process, as ratios; then the node
 * agent's size reads (src/agent/image-sizes.ts) of both builds, in this process, through a
 * registries.conf mirror at the same round trip: every component in one batch (a node sizing
 * 100+ images), and in two batches (new sets arriving that share base layers with earlier ones).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import pLimit from 'p-limit';
import { pino } from 'pino';
import tar from 'tar-stream';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { startFaultProxy, startRegistry } from '../test/harness/index.js';
import { CURRENT, previousBuild, type Build } from './previous-build.js';
import { processCpuSeconds } from './process-cpu.js';
import { median } from './median.js';

const run = promisify(execFile);
const RTT_MS = Number(process.env.BENCH_RTT_MS ?? 20);
const BOUND_RTTS = (process.env.BENCH_RTTS ?? '20,100').split(',').map(Number);
const BANDWIDTH = process.env.BENCH_BANDWIDTH ? Number(process.env.BENCH_BANDWIDTH) : undefined;
/** prestage's default --max-concurrency. */
const CONCURRENCY = 32;
/** Scheme probe, release manifest, payload layer, component manifest, layer trailer. */
const DEPENDENT_ROUND_TRIPS = 5;
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
/** The cores the plan and the harness share (pinning the plan to one core and the harness to the other was slower: Node's own threads then wait on the plan's). */
const CORES = availableParallelism();

const fixture = buildReleaseFixture();
const truth = fixture.truth;
// RAM-backed storage where available: the bench measures the clients, not this VM's disk.
const storageDir = await mkdtemp(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'prestage-bench-'));
const registry = await startRegistry({ storageDir: join(storageDir, 'storage') });
await pushFixture(registry.url, fixture);
const proxy = await startFaultProxy({ upstream: registry.url });
proxy.setLatency(RTT_MS);
if (BANDWIDTH !== undefined) proxy.setBandwidth(BANDWIDTH);
const release = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;

/** The CPU seconds the harness has used: this process (the fault proxy, and starting the plan) and the registry. */
function harnessCpuSeconds(): number {
  const own = process.cpuUsage();
  return (own.user + own.system) / 1e6 + (registry.pid === undefined ? 0 : processCpuSeconds(registry.pid));
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; bytes: number; requests: number; harnessCpu: number; value: T }> {
  proxy.resetStats();
  const cpuBefore = harnessCpuSeconds();
  const started = performance.now();
  const value = await fn();
  return { ms: performance.now() - started, bytes: proxy.stats.bytesSent, requests: proxy.stats.requests, harnessCpu: harnessCpuSeconds() - cpuBefore, value };
}

/** A checkout's single executable (`npm run dist`, the host's target), built into this run's temp dir; undefined when that checkout has none. */
async function executableOf(root: string, name: string): Promise<string | undefined> {
  if (!existsSync(join(root, 'scripts/dist.ts'))) return undefined;
  const target = `linux-${process.arch === 'x64' ? 'amd64' : process.arch}`;
  const out = join(storageDir, name);
  await run(process.execPath, [join(root, 'node_modules/tsx/dist/cli.mjs'), join(root, 'scripts/dist.ts'), '--out', out, '--targets', target], { cwd: root });
  return join(out, target, 'prestage');
}
const rootOf = (build: Build) => join(dirname(build.bin), '..');
/** This checkout's single executable, run beside `node bin/prestage.js`. */
const EXECUTABLE = (await executableOf(rootOf(CURRENT), 'dist'))!;

/** One plan by `build` (or an executable of it) as a child process; its CPU seconds (user + system) from /usr/bin/time. */
async function prestage(build: Build = CURRENT, executable: boolean | string = false): Promise<number> {
  const command = typeof executable === 'string' ? [executable] : executable ? [EXECUTABLE] : [process.execPath, build.bin];
  const { stdout, stderr } = await run('/usr/bin/time', ['-f', 'cpu %U %S', ...command, 'plan', release, '--mirror', `quay.io=${proxy.host}`, ...build.insecure(proxy.host), '-o', 'json'], { maxBuffer: 256 * 1024 * 1024 });
  JSON.parse(stdout);
  const m = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(stderr);
  return m ? Number(m[1]) + Number(m[2]) : NaN;
}

/** This build against the previous one, runs interleaved: wall and CPU medians, and their ratios. */
async function againstPrevious(previous: Build): Promise<void> {
  const runs = new Map<Build, Array<Awaited<ReturnType<typeof timed<number>>>>>([[previous, []], [CURRENT, []]]);
  await prestage(previous);
  for (let i = 0; i < RUNS; i++) for (const [build, list] of runs) list.push(await timed(() => prestage(build)));
  const [before, after] = [...runs.values()].map((list) => ({ ms: median(list.map((r) => r.ms)), cpu: median(list.map((r) => r.value)), requests: list[0]!.requests, bytes: list[0]!.bytes }));
  console.log(`bench:plan  ${previous.name} vs ${CURRENT.name}, RTT ${RTT_MS} ms, ${RUNS} runs each, interleaved; ratio = this / previous`);
  console.log(`  ${''.padEnd(20)} ${'previous'.padStart(10)} ${'this'.padStart(10)} ${'ratio'.padStart(7)}`);
  const row = (what: string, a: number, b: number, digits: number) => console.log(`  ${what.padEnd(20)} ${a.toFixed(digits).padStart(10)} ${b.toFixed(digits).padStart(10)} ${(b / a).toFixed(2).padStart(7)}`);
  row('wall ms (median)', before!.ms, after!.ms, 0);
  row('CPU s (median)', before!.cpu, after!.cpu, 2);
  row('requests', before!.requests, after!.requests, 0);
  row('bytes read', before!.bytes, after!.bytes, 0);
}

/** One batch of size lookups, as the node agent of `build` makes them: wall ms and requests. */
type SizesModule = typeof import('../src/agent/image-sizes.js');
async function agentSizes(previous: Build): Promise<void> {
  const conf = join(storageDir, 'agent');
  await mkdir(join(conf, 'registries.conf.d'), { recursive: true });
  await writeFile(join(conf, 'registries.conf'), `[[registry]]\nprefix = "quay.io"\nlocation = "quay.io"\n\n[[registry.mirror]]\nlocation = "${proxy.host}"\ninsecure = true\n`);
  const log = pino({ level: 'silent' });
  const images = truth.components.map((c) => c.pullSpec);
  const half = Math.floor(images.length / 2);
  const modules = new Map<Build, SizesModule>();
  for (const build of [previous, CURRENT]) modules.set(build, (await import(pathToFileURL(join(dirname(build.bin), '..', 'dist', 'agent', 'image-sizes.js')).href)) as SizesModule);
  const lookup = async (mod: SizesModule, batches: string[][]): Promise<Array<{ ms: number; requests: number; answered: number }>> => {
    const sizes = new mod.RegistryImageSizes({ registriesConf: join(conf, 'registries.conf'), registriesConfDir: join(conf, 'registries.conf.d'), log });
    try {
      const out = [];
      for (const batch of batches) {
        const r = await timed(() => sizes.layers(batch, { arch: 'amd64', pullSecrets: [] }));
        out.push({ ms: r.ms, requests: r.requests, answered: [...r.value.values()].filter(mod.hasLayers).length });
      }
      return out;
    } finally {
      await sizes.close();
    }
  };
  const runs = new Map<Build, { all: number[]; second: number[]; requestsAll: number; requestsSecond: number; answered: number }>();
  for (let i = 0; i < RUNS; i++) {
    for (const [build, mod] of modules) {
      const [all] = await lookup(mod, [images]);
      const [, second] = await lookup(mod, [images.slice(0, half), images.slice(half)]);
      const entry = runs.get(build) ?? { all: [], second: [], requestsAll: all!.requests, requestsSecond: second!.requests, answered: all!.answered };
      entry.all.push(all!.ms);
      entry.second.push(second!.ms);
      runs.set(build, entry);
    }
  }
  const [before, after] = [runs.get(previous)!, runs.get(CURRENT)!];
  console.log(`agent size reads  ${previous.name} vs ${CURRENT.name}, RTT ${RTT_MS} ms, ${RUNS} runs each, interleaved; ratio = this / previous`);
  console.log(`  ${''.padEnd(44)} ${'previous'.padStart(10)} ${'this'.padStart(10)} ${'ratio'.padStart(7)}`);
  const row = (what: string, a: number, b: number) => console.log(`  ${what.padEnd(44)} ${a.toFixed(0).padStart(10)} ${b.toFixed(0).padStart(10)} ${(b / a).toFixed(2).padStart(7)}`);
  row(`${images.length} images in one batch: wall ms (median)`, median(before.all), median(after.all));
  row(`  requests (images answered: ${before.answered}, ${after.answered})`, before.requestsAll, after.requestsAll);
  row(`the other ${images.length - half} after ${half}: wall ms (median)`, median(before.second), median(after.second));
  row('  requests', before.requestsSecond, after.requestsSecond);
}

/** The skopeo baseline: copy the release image, read image-references, inspect each component 4 at a time. */
async function baseline(): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'prestage-bench-skopeo-'));
  try {
    await run('skopeo', ['copy', '--quiet', '--src-tls-verify=false', `docker://${proxy.host}/${truth.releaseRepository}:${truth.release.tag}`, `dir:${dir}`]);
    const manifest = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as { layers: Array<{ digest: string }> };
    const last = manifest.layers.at(-1)!.digest.replace('sha256:', '');
    const refs = await imageReferences(gunzipSync(await readFile(join(dir, last))));
    const limit = pLimit(4);
    const sizes = await Promise.all(refs.map((pullSpec) => limit(async () => {
      const { stdout } = await run('skopeo', ['inspect', '--no-tags', '--tls-verify=false', `docker://${pullSpec.replace(/^quay\.io\//, `${proxy.host}/`)}`], { maxBuffer: 16 * 1024 * 1024 });
      const info = JSON.parse(stdout) as { LayersData?: Array<{ Size: number }> };
      return (info.LayersData ?? []).reduce((a, l) => a + l.Size, 0);
    })));
    return sizes.reduce((a, b) => a + b, 0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function imageReferences(tarBytes: Buffer): Promise<string[]> {
  const extract = tar.extract();
  const found: string[] = [];
  const done = (async () => {
    for await (const entry of extract) {
      if (entry.header.name === 'release-manifests/image-references') {
        const chunks: Buffer[] = [];
        for await (const c of entry as AsyncIterable<Buffer>) chunks.push(c);
        const doc = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { spec: { tags: Array<{ from: { kind: string; name: string } }> } };
        found.push(...new Set(doc.spec.tags.filter((t) => t.from.kind === 'DockerImage').map((t) => t.from.name)));
      } else {
        entry.resume();
      }
    }
  })();
  extract.end(tarBytes);
  await done;
  return found;
}

/** What any planner must read: the release manifest and payload layer, every component manifest, 4 bytes per unique gzip layer. */
function minimumBytes(): number {
  const layers = new Set<string>();
  for (const img of [truth.release.image, ...truth.components]) for (const l of img.layers) layers.add(l.digest);
  return truth.release.image.manifestSize + truth.release.manifestsLayer.size
    + truth.components.reduce((a, c) => a + c.manifestSize, 0) + 4 * layers.size;
}

/**
 * The critical-path lower bound for prestage's own requests at each RTT, against the wall time
 * of this build and the previous one (node bin/prestage.js and, where the build has one, its
 * single executable), runs interleaved so that a busy machine weighs on both alike.
 */
async function criticalPath(previous: Build): Promise<void> {
  const previousExecutable = await executableOf(rootOf(previous), 'dist-previous').catch(() => undefined);
  const runners: Array<{ label: string; build: Build; executable: boolean | string }> = [
    { label: 'node', build: previous, executable: false },
    { label: 'node', build: CURRENT, executable: false },
    ...(previousExecutable ? [{ label: 'executable', build: previous, executable: previousExecutable }] : []),
    { label: 'executable', build: CURRENT, executable: true },
  ];
  const start = async (command: string[]) => median(await Promise.all([0, 1, 2].map(async () => (await timed(() => run(command[0]!, [...command.slice(1), '--version']))).ms)));
  const [startup, startupExecutable] = [await start([process.execPath, CURRENT.bin]), await start([EXECUTABLE])];
  console.log(`critical path  bound = RTT x (${DEPENDENT_ROUND_TRIPS} dependent + 1 handshake + other requests / ${CONCURRENCY}) + bytes / ${BANDWIDTH ? `${BANDWIDTH} B/s` : 'uncapped bandwidth'}; process start (--version): node bin/prestage.js ${startup.toFixed(0)} ms, executable ${startupExecutable.toFixed(0)} ms`);
  console.log(`  ${previous.name} beside this build, ${RUNS} runs each, interleaved; medians; vs previous = this build's median / the previous build's, run the same way`);
  console.log(`  harness CPU s: the fault proxy's and the registry's during the plan; cores busy: (prestage's CPU + the harness's) / wall time, of ${CORES}`);
  console.log(`  ${'RTT'.padEnd(8)} ${'run as'.padEnd(11)} ${'build'.padEnd(11)} ${'prestage'.padStart(10)} ${'CPU s'.padStart(6)} ${'harness CPU s'.padStart(14)} ${'cores busy'.padStart(11)} ${'bound'.padStart(8)} ${'ratio'.padStart(6)} ${'vs previous'.padStart(12)} ${'requests'.padStart(9)} ${'bytes'.padStart(9)}   (target ratio <= 1.5)`);
  for (const rtt of BOUND_RTTS) {
    proxy.setLatency(rtt);
    const runs = runners.map(() => [] as Array<Awaited<ReturnType<typeof timed<number>>>>);
    for (let i = 0; i < RUNS; i++) {
      for (const [j, r] of runners.entries()) runs[j]!.push(await timed(() => prestage(r.build, r.executable)));
    }
    const medians = runs.map((list) => median(list.map((r) => r.ms)));
    for (const [j, r] of runners.entries()) {
      const { requests, bytes } = runs[j]!.at(-1)!;
      const roundTrips = DEPENDENT_ROUND_TRIPS + 1 + Math.ceil((requests - DEPENDENT_ROUND_TRIPS) / CONCURRENCY);
      const bound = rtt * roundTrips + (BANDWIDTH ? (bytes / BANDWIDTH) * 1000 : 0);
      const ms = medians[j]!;
      const cpu = median(runs[j]!.map((x) => x.value));
      const harnessCpu = median(runs[j]!.map((x) => x.harnessCpu));
      const busy = median(runs[j]!.map((x) => ((x.value + x.harnessCpu) * 1000) / x.ms));
      const before = r.build === CURRENT ? runners.findIndex((p) => p.build === previous && p.label === r.label) : -1;
      const vs = before >= 0 ? (ms / medians[before]!).toFixed(2) : '';
      console.log(`  ${`${rtt} ms`.padEnd(8)} ${r.label.padEnd(11)} ${(r.build === CURRENT ? 'this' : 'previous').padEnd(11)} ${`${ms.toFixed(0)} ms`.padStart(10)} ${cpu.toFixed(2).padStart(6)} ${harnessCpu.toFixed(2).padStart(14)} ${busy.toFixed(2).padStart(11)} ${`${bound.toFixed(0)} ms`.padStart(8)} ${(ms / bound).toFixed(2).padStart(6)} ${vs.padStart(12)} ${String(requests).padStart(9)} ${String(bytes).padStart(9)}`);
    }
  }
  proxy.setLatency(RTT_MS);
}

const previous = await previousBuild();
/** BENCH_SECTIONS=critical (comma-separated: previous, agent, skopeo, critical) runs only those; default all. */
const SECTIONS = new Set((process.env.BENCH_SECTIONS ?? 'previous,agent,skopeo,critical').split(','));
try {
  await prestage(); // warm the registry's own caches so neither side pays for them
  if (SECTIONS.has('previous')) await againstPrevious(previous);
  if (SECTIONS.has('agent')) await agentSizes(previous);
  if (SECTIONS.has('skopeo')) await skopeoSection();
  if (SECTIONS.has('critical')) await criticalPath(previous);
} finally {
  await previous.remove();
  await proxy.stop();
  await registry.stop();
  await rm(storageDir, { recursive: true, force: true });
}

/** prestage (node and executable) beside skopeo, and prestage's bytes against the minimum. */
async function skopeoSection(): Promise<void> {
  const ours: Array<Awaited<ReturnType<typeof timed<number>>>> = [];
  const oursExecutable: Array<Awaited<ReturnType<typeof timed<number>>>> = [];
  const theirs: Array<Awaited<ReturnType<typeof timed<number>>>> = [];
  for (let i = 0; i < RUNS; i++) {
    ours.push(await timed(() => prestage()));
    oursExecutable.push(await timed(() => prestage(CURRENT, true)));
    theirs.push(await timed(baseline));
  }
  const oursMs = median(ours.map((r) => r.ms));
  const executableMs = median(oursExecutable.map((r) => r.ms));
  const theirsMs = median(theirs.map((r) => r.ms));
  const minimum = minimumBytes();
  const rows = [
    ['', 'wall (median)', 'requests', 'bytes read'],
    [`prestage plan`, `${oursMs.toFixed(0)} ms`, String(ours[0]!.requests), String(ours[0]!.bytes)],
    [`  executable`, `${executableMs.toFixed(0)} ms`, String(oursExecutable[0]!.requests), String(oursExecutable[0]!.bytes)],
    [`skopeo baseline`, `${theirsMs.toFixed(0)} ms`, String(theirs[0]!.requests), String(theirs[0]!.bytes)],
  ];
  console.log(`bench:plan  fixture: ${truth.components.length} components, release ${truth.release.version}; proxy RTT ${RTT_MS} ms (per request, and per new connection); ${RUNS} runs each, interleaved`);
  for (const r of rows) console.log(`  ${r[0]!.padEnd(16)} ${r[1]!.padStart(14)} ${r[2]!.padStart(9)} ${r[3]!.padStart(12)}`);
  console.log(`  speed-up (baseline / prestage wall time): node bin/prestage.js ${(theirsMs / oursMs).toFixed(1)}x, executable ${(theirsMs / executableMs).toFixed(1)}x   (target >= 10x)`);
  console.log(`  prestage bytes / minimum bytes (${minimum}): ${(ours[0]!.bytes / minimum).toFixed(3)}   (target <= 1.05)`);
}
