/**
 * `npm run bench:operators`: prestage planning the operators of an oc-mirror v2
 * ImageSetConfiguration against a catalog at the scale of Red Hat's operator index
 * (bench/catalog-scale.ts: 400 packages, 8,000 bundles, about 300 MB of configs), beside oc-mirror
 * v2 on the same input, in the same run, on the same machine.
 *
 * The generated catalog, the images its selection brings and the fixture release are pushed to a
 * local docker-registry (RAM-backed storage) behind the fault proxy (test/harness), which counts
 * the requests and the bytes each client reads (round trip BENCH_RTT_MS, default 0). The ISC
 * selects 20 packages (by name, the head of `stable`, channel ranges, package minVersion).
 * Each run is one process timed by /usr/bin/time (wall, CPU, peak RSS):
 * - `prestage plan RELEASE` alone: the release without operators, the part of the plan the
 *   operators do not add to;
 * - `prestage plan RELEASE --config isc.yaml -o json`, and the same through main() in a plain node
 *   process (bin/prestage.js runs `plan` at V8's baseline tier; BENCH_CPU_PROF=DIR profiles the plan);
 * - `prestage bundle create RELEASE --config isc.yaml`, when this build's bundle create takes --config;
 * - oc-mirror v2, when it can be built (`go install` of BENCH_OC_MIRROR_VERSION from the Go module
 *   proxy into ~/.cache/prestage-bench/<version>/, tried once per version; BENCH_OC_MIRROR names a
 *   binary instead): `--dry-run` mirror-to-mirror and mirror-to-disk, reading the local registry
 *   through containers-registries.conf (CONTAINERS_REGISTRIES_CONF: registry.redhat.io and quay.io
 *   rewritten to the proxy, `insecure = true`) with --src-tls-verify=false / --dest-tls-verify=false.
 * BENCH_RUNS rounds (default 1), interleaved; medians. BENCH_PACKAGES, BENCH_BUNDLES and
 * BENCH_CONFIGS_MB (defaults 400, 8000, 300) size the catalog.
 *
 * Coverage, from the plan's JSON: every image oc-mirror mirrors (its dry-run mapping.txt when it
 * ran; else what its rules keep, modelled by the generator: the kept bundles' relatedImages and the
 * catalog) against the plan's operator and catalog images, and the bundles prestage adds as
 * `dependency of ...`, which oc-mirror leaves out.
 *
 * The measurement waits (up to BENCH_LOAD_WAIT_S, default 900 s) for the 1-minute load average to
 * fall under BENCH_MAX_LOAD (default 1.0) and prints the load before and after. Everything it
 * starts (the registry, the proxy, temp dirs) is stopped and removed at the end.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { homedir, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { freePort, startFaultProxy, startRegistry } from '../test/harness/index.js';
import type { Plan } from '../src/plan/types.js';
import { buildScaleCatalog, SCALE_REGISTRY, type ScaleImage } from './catalog-scale.js';
import { median } from './median.js';
import { CURRENT } from './previous-build.js';

const run = promisify(execFile);
const RUNS = Number(process.env.BENCH_RUNS ?? 1);
const RTT_MS = Number(process.env.BENCH_RTT_MS ?? 0);
const MAX_LOAD = Number(process.env.BENCH_MAX_LOAD ?? 1.0);
const LOAD_WAIT_S = Number(process.env.BENCH_LOAD_WAIT_S ?? 900);
/** A commit of openshift/oc-mirror (module github.com/openshift/oc-mirror/v2), or a version the proxy knows. */
const OC_MIRROR_VERSION = process.env.BENCH_OC_MIRROR_VERSION ?? '855b64a3c9c03634bcab6210b641274772050cda';
const OC_MIRROR_MODULE = 'github.com/openshift/oc-mirror/v2';
/** The Makefile's tags for CGO_ENABLED=0 builds, and json1. */
const OC_MIRROR_TAGS = 'json1 exclude_graphdriver_devicemapper exclude_graphdriver_btrfs containers_image_openpgp';
/** One oc-mirror or bundle run may take this long before it is killed. */
const RUN_TIMEOUT_MS = Number(process.env.BENCH_RUN_TIMEOUT_S ?? 1800) * 1000;
const MiB = 1024 * 1024;
const load = (): string => loadavg().map((l) => l.toFixed(2)).join(' ');

console.log(`bench:operators: load average ${load()} at start`);
const generated = performance.now();
const catalog = buildScaleCatalog({
  packages: Number(process.env.BENCH_PACKAGES ?? 400),
  bundles: Number(process.env.BENCH_BUNDLES ?? 8000),
  configsBytes: Number(process.env.BENCH_CONFIGS_MB ?? 300) * MiB,
});
const release = buildReleaseFixture();
const s = catalog.stats;
console.log(`  catalog generated in ${((performance.now() - generated) / 1000).toFixed(1)} s: ${s.packages} packages, ${s.bundles} bundles, ${s.channels} channels, ${s.packagesWithObjects} packages inlining CSV and CRDs, ${s.packagesWithDependencies} with a dependency, ${s.manySkips.package} skipping up to 90 (${s.manySkips.selected ? '' : 'not '}selected); relatedImages per bundle median ${s.relatedImages.median}, mean ${s.relatedImages.mean.toFixed(1)}, max ${s.relatedImages.max}`);
console.log(`  configs ${(s.configsBytes / MiB).toFixed(0)} MiB uncompressed (largest ${s.largestFile.path}, ${(s.largestFile.bytes / MiB).toFixed(1)} MiB), configs layer ${(s.configsLayerBytes / MiB).toFixed(0)} MiB, catalog image (amd64) ${(s.catalogImageBytes / MiB).toFixed(0)} MiB; ${s.builtImages} bundle/operator/operand images built (${(s.builtBlobBytes / MiB).toFixed(1)} MiB of blobs)`);

const work = await mkdtemp(join(tmpdir(), 'prestage-bench-operators-'));
const storage = await mkdtemp(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'prestage-bench-operators-'));
const registry = await startRegistry({ storageDir: join(storage, 'storage') });
const proxy = await startFaultProxy({ upstream: registry.url });
proxy.setLatency(RTT_MS);
const pushed = performance.now();
await pushFixture(registry.url, release);
await pushFixture(registry.url, { blobs: catalog.content.blobs, repositories: catalog.content.toRepositories() });
console.log(`  pushed to ${registry.host} in ${((performance.now() - pushed) / 1000).toFixed(1)} s; proxy ${proxy.host}, RTT ${RTT_MS} ms`);
const RELEASE = `quay.io/${release.truth.releaseRepository}:${release.truth.release.tag}`;
const isc = join(work, 'isc.yaml');
await writeFile(isc, catalog.isc);
const mirrorFlags = ['--mirror', `quay.io=${proxy.host}`, '--mirror', `${SCALE_REGISTRY}=${proxy.host}/${SCALE_REGISTRY}`, '--insecure-registry', proxy.host];

interface Measured {
  readonly wallS: number;
  readonly cpuS: number;
  readonly rssMiB: number;
  readonly requests: number;
  readonly bytes: number;
  readonly stdout: string;
}

/** One process under /usr/bin/time (its figures written to a file, apart from the command's stderr), the proxy's counts over it. */
async function measured(command: string, args: readonly string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<Measured> {
  const timeFile = join(work, `time-${Date.now()}.txt`);
  proxy.resetStats();
  const child = spawn('/usr/bin/time', ['-o', timeFile, '-f', '%e %U %S %M', command, ...args], { env: options.env ?? process.env, cwd: options.cwd ?? work, stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => out.push(c));
  child.stderr.on('data', (c: Buffer) => err.push(c));
  const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(timer);
  const stats = { requests: proxy.stats.requests, bytes: proxy.stats.bytesSent };
  const stderr = Buffer.concat(err).toString('utf8');
  if (code !== 0) throw new Error(`${command} ${args.join(' ')}: exit ${code}\n${stderr.slice(-4000)}`);
  const [wall, user, sys, rss] = (await readFile(timeFile, 'utf8')).trim().split('\n').at(-1)!.split(' ').map(Number);
  await rm(timeFile, { force: true });
  return { wallS: wall!, cpuS: user! + sys!, rssMiB: rss! / 1024, ...stats, stdout: Buffer.concat(out).toString('utf8') };
}

const prestage = (args: readonly string[]): Promise<Measured> => measured(process.execPath, [CURRENT.bin, ...args]);
/**
 * The same command through main() in a plain node process: bin/prestage.js runs `plan` at V8's
 * baseline tier (--max-opt=1, src/cli/main.ts: right for a plan that waits on registries); this
 * shows what that costs when the plan parses a catalog. BENCH_CPU_PROF=DIR profiles the plan.
 */
const FULL_TIER = join(CURRENT.bin, '..', '..', 'dist', 'cli', 'main.js');
async function prestageFullTier(args: readonly string[]): Promise<Measured> {
  const entry = join(work, 'full-tier.mjs');
  await writeFile(entry, `import { main } from ${JSON.stringify(FULL_TIER)};\nprocess.exitCode = await main(process.argv.slice(2));\n`);
  return measured(process.execPath, [entry, ...args]);
}
const profiled = (): string[] => (process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []);

/** oc-mirror v2: BENCH_OC_MIRROR, a cached build, or one `go install` try per version (its error cached beside it). */
async function ocMirror(): Promise<{ bin?: string; why: string }> {
  if (process.env.BENCH_OC_MIRROR) return { bin: process.env.BENCH_OC_MIRROR, why: `BENCH_OC_MIRROR=${process.env.BENCH_OC_MIRROR}` };
  const dir = join(homedir(), '.cache', 'prestage-bench', OC_MIRROR_VERSION);
  const bin = join(dir, 'oc-mirror');
  const failed = join(dir, 'build-error.txt');
  if (existsSync(bin)) return { bin, why: `built from ${OC_MIRROR_MODULE}@${OC_MIRROR_VERSION}` };
  if (existsSync(failed) && !process.env.BENCH_OC_MIRROR_RETRY) return { why: `${OC_MIRROR_MODULE}@${OC_MIRROR_VERSION} did not build (tried before; BENCH_OC_MIRROR_RETRY=1 tries again): ${(await readFile(failed, 'utf8')).trim()}` };
  await mkdir(dir, { recursive: true });
  const command = ['install', '-tags', OC_MIRROR_TAGS, `${OC_MIRROR_MODULE}/cmd/oc-mirror@${OC_MIRROR_VERSION}`];
  console.log(`  building oc-mirror: GOFLAGS=-mod=mod CGO_ENABLED=0 GOBIN=${dir} go ${command.join(' ')}`);
  try {
    await run('go', command, { env: { ...process.env, GOFLAGS: '-mod=mod', CGO_ENABLED: '0', GOBIN: dir }, timeout: 30 * 60 * 1000, maxBuffer: 64 * MiB });
    return { bin, why: `built from ${OC_MIRROR_MODULE}@${OC_MIRROR_VERSION}` };
  } catch (error) {
    const e = error as { stderr?: string; message: string };
    const text = (e.stderr || e.message).trim().split('\n').slice(-6).join('\n');
    await writeFile(failed, `${text}\n`);
    return { why: `go install ${OC_MIRROR_MODULE}/cmd/oc-mirror@${OC_MIRROR_VERSION} failed: ${text}` };
  }
}

/** The environment oc-mirror reads the local registry through: registries.conf rewriting both registries to the proxy, plain HTTP; an empty auth file; its own HOME. */
async function ocMirrorEnv(): Promise<NodeJS.ProcessEnv> {
  const dir = join(work, 'oc-mirror-env');
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'registries.conf'), [
    'unqualified-search-registries = []',
    '',
    '[[registry]]',
    `prefix = "${SCALE_REGISTRY}"`,
    `location = "${proxy.host}/${SCALE_REGISTRY}"`,
    'insecure = true',
    '',
    '[[registry]]',
    'prefix = "quay.io"',
    `location = "${proxy.host}"`,
    'insecure = true',
    '',
    '[[registry]]',
    `location = "${proxy.host}"`,
    'insecure = true',
    '',
  ].join('\n'));
  await writeFile(join(dir, 'auth.json'), '{"auths":{}}\n');
  return { ...process.env, HOME: dir, CONTAINERS_REGISTRIES_CONF: join(dir, 'registries.conf'), REGISTRY_AUTH_FILE: join(dir, 'auth.json') };
}

/** The source references of oc-mirror's mapping.txt (`docker://SRC=docker://DST`). */
function mappingSources(text: string): string[] {
  return text.split('\n').map((l) => l.trim()).filter(Boolean).map((l) => l.split('=docker://')[0]!.replace(/^docker:\/\//, ''));
}

const repositoryOf = (reference: string): string => reference.replace(/[:@][^/]*$/, '');

interface Row {
  readonly label: string;
  readonly runs: Measured[];
  /** Why the row has no figures (not run, or how it failed). */
  note?: string;
}

async function waitForQuiet(): Promise<string> {
  const started = Date.now();
  while (loadavg()[0]! >= MAX_LOAD && Date.now() - started < LOAD_WAIT_S * 1000) await new Promise((resolve) => setTimeout(resolve, 15_000));
  const waited = Math.round((Date.now() - started) / 1000);
  return `${load()} after waiting ${waited} s${loadavg()[0]! >= MAX_LOAD ? ` (still at or over ${MAX_LOAD}: measured anyway)` : ''}`;
}

try {
  const help = (await run(process.execPath, [CURRENT.bin, 'bundle', 'create', '--help'], { maxBuffer: 4 * MiB })).stdout;
  const bundleTakesConfig = /^\s+--config\b/m.test(help);
  const oc = await ocMirror();
  const ocEnv = oc.bin ? await ocMirrorEnv() : undefined;
  // Warm the registry's own caches (and the page cache) so no side pays for them.
  await prestage(['plan', RELEASE, ...mirrorFlags, '--config', isc, '-o', 'json']);
  const quiet = await waitForQuiet();
  console.log(`  load average ${quiet} when measuring`);

  const rows: Row[] = [
    { label: 'prestage plan, release alone', runs: [] },
    { label: 'prestage plan --config', runs: [] },
    { label: '  the same, V8 at every tier', runs: [] },
    { label: 'prestage bundle create --config', runs: [], ...(bundleTakesConfig ? {} : { note: 'not run: this build\'s bundle create takes no --config' }) },
    { label: 'oc-mirror --v2 --dry-run (m2m)', runs: [], ...(oc.bin ? {} : { note: 'not run' }) },
    { label: 'oc-mirror --v2 mirror-to-disk', runs: [], ...(oc.bin ? {} : { note: 'not run' }) },
  ];
  let plan: Plan | undefined;
  let mapping: string[] | undefined;
  for (let i = 0; i < RUNS; i++) {
    rows[0]!.runs.push(await prestage(['plan', RELEASE, ...mirrorFlags, '-o', 'json']));
    const planned = await measured(process.execPath, [...profiled(), CURRENT.bin, 'plan', RELEASE, ...mirrorFlags, '--config', isc, '-o', 'json']);
    rows[1]!.runs.push(planned);
    rows[2]!.runs.push(await prestageFullTier(['plan', RELEASE, ...mirrorFlags, '--config', isc, '-o', 'json']));
    plan ??= JSON.parse(planned.stdout) as Plan;
    if (bundleTakesConfig) {
      const out = join(work, `bundle-${i}`);
      rows[3]!.runs.push(await prestage(['bundle', 'create', RELEASE, ...mirrorFlags, '--config', isc, '--output-dir', out, '--quiet', '--allow-unsigned']));
      await rm(out, { recursive: true, force: true });
      await rm(`${out}.parts`, { recursive: true, force: true });
    }
    if (oc.bin && ocEnv) {
      // oc-mirror's failures are figures too: the row says what it printed, and the bench goes on.
      const attempt = async (row: Row, fn: () => Promise<void>): Promise<void> => {
        try {
          await fn();
        } catch (error) {
          row.note = `failed: ${(error as Error).message.split('\n').slice(0, 3).join(' | ').slice(0, 400)}`;
        }
      };
      await attempt(rows[4]!, async () => {
        const workspace = join(work, `oc-dry-${i}`);
        try {
          rows[4]!.runs.push(await measured(oc.bin!, ['--v2', '-c', isc, '--dry-run', '--workspace', `file://${workspace}`, `docker://${registry.host}/mirror`, '--src-tls-verify=false', '--dest-tls-verify=false', '--cache-dir', join(work, `oc-cache-dry-${i}`), '--port', String(await freePort())], { env: ocEnv }));
          mapping ??= mappingSources(await readFile(join(workspace, 'working-dir', 'dry-run', 'mapping.txt'), 'utf8'));
        } finally {
          await rm(workspace, { recursive: true, force: true });
          await rm(join(work, `oc-cache-dry-${i}`), { recursive: true, force: true });
        }
      });
      await attempt(rows[5]!, async () => {
        const disk = join(work, `oc-disk-${i}`);
        try {
          rows[5]!.runs.push(await measured(oc.bin!, ['--v2', '-c', isc, `file://${disk}`, '--src-tls-verify=false', '--cache-dir', join(work, `oc-cache-disk-${i}`), '--port', String(await freePort())], { env: ocEnv }));
        } finally {
          await rm(disk, { recursive: true, force: true });
          await rm(join(work, `oc-cache-disk-${i}`), { recursive: true, force: true });
        }
      });
    }
  }

  const med = (r: Row, f: (m: Measured) => number): number => median(r.runs.map(f));
  const reference = rows[4]!.runs.length > 0 ? rows[4]! : undefined;
  console.log(`bench:operators  ${RUNS} run${RUNS === 1 ? '' : 's'} each, interleaved${RUNS > 1 ? ', medians' : ''}; proxy RTT ${RTT_MS} ms; load average ${load()} at the end`);
  console.log(`  ${''.padEnd(34)} ${'wall s'.padStart(8)} ${'CPU s'.padStart(7)} ${'peak RSS MiB'.padStart(13)} ${'requests'.padStart(9)} ${'bytes read'.padStart(12)}${reference ? '   ratio to oc-mirror dry-run (wall, RSS, bytes)' : ''}`);
  for (const r of rows) {
    if (r.runs.length === 0) {
      console.log(`  ${r.label.padEnd(34)} ${r.note ?? 'not run'}`);
      continue;
    }
    const ratio = reference && r !== reference ? `   ${(med(r, (m) => m.wallS) / med(reference, (m) => m.wallS)).toFixed(2)} ${(med(r, (m) => m.rssMiB) / med(reference, (m) => m.rssMiB)).toFixed(2)} ${(med(r, (m) => m.bytes) / med(reference, (m) => m.bytes)).toFixed(2)}` : '';
    console.log(`  ${r.label.padEnd(34)} ${med(r, (m) => m.wallS).toFixed(2).padStart(8)} ${med(r, (m) => m.cpuS).toFixed(2).padStart(7)} ${med(r, (m) => m.rssMiB).toFixed(0).padStart(13)} ${String(med(r, (m) => m.requests)).padStart(9)} ${String(med(r, (m) => m.bytes)).padStart(12)}${ratio}`);
  }
  const [alone, withOps] = [rows[0]!, rows[1]!];
  console.log(`  the operators' share: wall +${(med(withOps, (m) => m.wallS) - med(alone, (m) => m.wallS)).toFixed(2)} s, CPU +${(med(withOps, (m) => m.cpuS) - med(alone, (m) => m.cpuS)).toFixed(2)} s, peak RSS +${(med(withOps, (m) => m.rssMiB) - med(alone, (m) => m.rssMiB)).toFixed(0)} MiB, bytes +${med(withOps, (m) => m.bytes) - med(alone, (m) => m.bytes)} (the catalog image: ${s.catalogImageBytes})`);
  if (!oc.bin) console.log(`  oc-mirror: ${oc.why}`);

  // Coverage: what oc-mirror mirrors (mapping.txt, else its rules as the generator models them) against the plan's operator images.
  const planned = plan!;
  const operatorImages = planned.images.filter((i) => i.source === 'operator' || i.source === 'catalog');
  const byDigest = new Set(operatorImages.map((i) => `${repositoryOf(i.pullSpec)}@${i.digest}`));
  const inPlan = (image: ScaleImage): boolean => image.digests.some((d) => byDigest.has(`${repositoryOf(image.reference)}@${d}`)) || operatorImages.some((i) => i.pullSpec === image.reference);
  const expected: ScaleImage[] = mapping
    ? mapping.map((ref) => catalog.ocMirror.images.find((i) => i.reference === ref) ?? { reference: ref, digests: ref.includes('@') ? [ref.split('@')[1]!] : [] })
    : [...catalog.ocMirror.images];
  const missing = expected.filter((i) => !inPlan(i));
  const dependencies = planned.operators?.bundles.filter((b) => b.why.startsWith('dependency of')) ?? [];
  const selectedBundles = planned.operators?.bundles.filter((b) => !b.why.startsWith('dependency of')) ?? [];
  const modelled = [...catalog.ocMirror.bundles.values()].flat();
  const bundleDiff = [...selectedBundles.map((b) => b.name).filter((n) => !modelled.includes(n)).map((n) => `+${n}`), ...modelled.filter((n) => !selectedBundles.some((b) => b.name === n)).map((n) => `-${n}`)];
  const dependencyImages = operatorImages.filter((i) => (i.operator?.bundles ?? []).length > 0 && i.operator!.bundles.every((b) => dependencies.some((d) => d.name === b)));
  console.log(`coverage  oc-mirror's set: ${mapping ? 'its dry-run mapping.txt' : 'its rules (catalog-filter) as the generator models them; oc-mirror did not run'}`);
  console.log(`  images oc-mirror mirrors: ${expected.length}; in prestage's plan: ${expected.length - missing.length} (${((100 * (expected.length - missing.length)) / Math.max(1, expected.length)).toFixed(1)}%)${missing.length > 0 ? `; missing: ${missing.slice(0, 5).map((m) => m.reference).join(', ')}${missing.length > 5 ? ', ...' : ''}` : ''}`);
  console.log(`  prestage's operator and catalog images: ${operatorImages.length}; selected bundles ${selectedBundles.length} (the model's ${modelled.length}${bundleDiff.length > 0 ? `; differ: ${bundleDiff.slice(0, 6).join(' ')}` : ', the same'})`);
  console.log(`  dependencies oc-mirror leaves out: ${dependencies.length} bundles (${dependencies.map((d) => `${d.name}: ${d.why}`).join('; ')}), ${dependencyImages.length} images only they bring`);
  const expectedDeps = catalog.dependencies.map((d) => d.bundle).sort();
  const gotDeps = dependencies.map((d) => d.name).sort();
  console.log(`  dependencies the generator expects (OLM: default channel head): ${expectedDeps.length}${JSON.stringify(expectedDeps) === JSON.stringify(gotDeps) ? ', the same' : `; differ: expected ${expectedDeps.join(' ')}; got ${gotDeps.join(' ')}`}`);
  if (planned.warnings.length > 0) console.log(`  plan warnings: ${planned.warnings.length} (first: ${planned.warnings[0]})`);
} finally {
  await proxy.stop();
  await registry.stop();
  await rm(work, { recursive: true, force: true });
  await rm(storage, { recursive: true, force: true });
}
