/**
 * `npm run bench:bundle`: `prestage bundle create`, this build beside the previous one (built
 * from git in the same run, bench/previous-build.ts), on two fixtures:
 * - the fixture release (≈190 images of small blobs) behind a proxy capped at 8 MiB/s: how busy
 *   each keeps the capped link;
 * - realistic blobs (tens to hundreds of MiB, random bytes made on the fly; BENCH_BIG_MIB
 *   sizes, default 200,120,80,50,30,20): uncapped straight from the local registry (MiB/s, and
 *   the CPU the process spent), capped through the proxy (link use), and through the proxy
 *   with each connection capped at BENCH_FLOW_BYTES (default 16 MiB/s; a flow held back by its
 *   TCP window over a long round trip, or a CDN's per-connection limit) and no link cap (MiB/s).
 * - the fixture release with `bundle create --link-rate BENCH_LINK_RATE` (default 2 MiB/s) through
 *   the proxy uncapped, each connection held to a 64 KiB window as in test/bundle-link-rate: how
 *   busy the paced reads keep the link (mean over the run against the cap), and the most they
 *   carry over any 5 s, on a steady link and on one slowed to 0.3 of the cap from 1.5 s to 4.5 s.
 * Link use is the proxy's body bytes over the time from its first to its last body byte (the
 * proxy stamps both), divided by the cap. Beside it, the CPU seconds that prestage, the
 * registry and the proxy spent in the small-blob run: on a 2-core machine their sum over two
 * cores is a floor under the transfer time that no client can go below.
 * Registry storage is in RAM where possible; bundles are written to the disk as users do.
 * BENCH_BUSY=N keeps N more processes spinning on the CPU through the rounds: a busier or
 * slower machine, where per-request CPU decides how busy the link is.
 * Signatures on, as a 4.21+ release has them: every image of the fixture carries a sigstore
 * attachment at the source (made with a key generated here), and the release a GPG signature in
 * a local store. This build copies and verifies them (and looks up an attachment for every
 * image manifest of the big-blob plan, which has none); a build from before signatures carries
 * none. The rows say how many each carried. BENCH_SIGNATURES=off: this build carries none either.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import type { Plan, PlannedImage } from '../src/plan/types.js';
import { MediaType } from '../src/registry/manifest.js';
import { PushClient } from '../src/registry/upload.js';
import { linkWindows, slowLinkFor } from '../test/harness/fault-proxy.js';
import { startFaultProxy, startRegistry, type FaultProxy } from '../test/harness/index.js';
import { generateGpgKey, signRelease, startSignatureStore } from '../test/support/release-signing.js';
import { generateSigstoreKeys, pushAttachments, signAttachment } from '../test/support/sigstore-signing.js';
import { CURRENT, previousBuild, type Build } from './previous-build.js';
import { processCpuSeconds } from './process-cpu.js';

const run = promisify(execFile);
const CAP = Number(process.env.BENCH_CAP_BYTES ?? 8 * 1024 * 1024);
const FLOW_CAP = Number(process.env.BENCH_FLOW_BYTES ?? 16 * 1024 * 1024);
const LINK_RATE = Number(process.env.BENCH_LINK_RATE ?? 2 * 1024 * 1024);
/** Rounds of every scenario per build; figures are the medians. */
const RUNS = Number(process.env.BENCH_RUNS ?? 2);
const BUSY = Number(process.env.BENCH_BUSY ?? 0);
const BIG_MIB = (process.env.BENCH_BIG_MIB ?? '200,120,80,50,30,20').split(',').map(Number);
const MiB = 1024 * 1024;

const fixture = buildReleaseFixture();
const truth = fixture.truth;
const storage = await mkdtemp(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'prestage-bench-bundle-'));
const root = await mkdtemp(join(tmpdir(), 'prestage-bench-bundle-'));
const registry = await startRegistry({ storageDir: join(storage, 'storage') });
await pushFixture(registry.url, fixture);
const proxy = await startFaultProxy({ upstream: registry.url });
const release = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;

interface Measured {
  readonly ms: number;
  /** Body bytes the registry side sent (through the proxy, or the bundle's blob bytes when direct). */
  readonly bytes: number;
  /** Milliseconds from the first to the last body byte the proxy sent. */
  readonly transferMs: number;
  /** CPU seconds of the prestage process (user + system). */
  readonly cpuS: number;
  /** CPU seconds of the registry, and of this process (the proxy, when one is used). */
  readonly registryCpuS: number;
  readonly proxyCpuS: number;
  readonly requests: number;
  /** The most the proxy sent over any 5 s, in bytes per second (NaN without the proxy). */
  readonly maxOver5s: number;
}

/** CPU seconds (user + system) of the registry processes this bench started. */
async function registryCpuS(): Promise<number> {
  const { stdout } = await run('pgrep', ['-P', String(process.pid), '-f', 'docker-registry']).catch(() => ({ stdout: '' }));
  return stdout.split('\n').filter(Boolean).reduce((seconds, pid) => seconds + processCpuSeconds(pid), 0);
}

/** Wall time, the CPU times, and the proxy's own first and last body byte times (when the link was in use). */
async function measured(fn: () => Promise<{ cpuS: number }>, p: FaultProxy | undefined, bytes?: () => Promise<number>): Promise<Measured> {
  p?.resetStats();
  const registryBefore = await registryCpuS();
  const proxyBefore = process.cpuUsage();
  const started = performance.now();
  const { cpuS } = await fn();
  const ms = performance.now() - started;
  const proxyCpu = process.cpuUsage(proxyBefore);
  const registryCpu = (await registryCpuS()) - registryBefore;
  return {
    ms,
    bytes: p ? p.stats.bytesSent : await bytes!(),
    transferMs: p ? p.stats.lastByteAt - p.stats.firstByteAt : ms,
    cpuS,
    registryCpuS: registryCpu,
    proxyCpuS: (proxyCpu.user + proxyCpu.system) / 1e6,
    requests: p ? p.stats.requests : NaN,
    maxOver5s: p ? linkWindows(p.stats.perSecond).maxBytesPerSecond : NaN,
  };
}

/** Flags that give a build the release's signatures to carry: none for a build from before them. */
let signatureFlags: (build: Build) => string[] = () => [];
/** Where a build is told to write the bundle (`--to` before `--output-dir`). */
let outputDirFlag: (build: Build) => string = () => '--to';

/** `bundle create` as a child process; its CPU time from /usr/bin/time's format. */
async function bundleCreate(build: Build, planFile: string, dir: string, host: string, extra: readonly string[] = []): Promise<{ cpuS: number }> {
  const { stderr } = await run('/usr/bin/time', ['-f', 'cpu %U %S', process.execPath, build.bin, 'bundle', 'create', planFile, outputDirFlag(build), dir, '--mirror', `quay.io=${host}`, ...build.insecure(host), ...signatureFlags(build), ...extra], { maxBuffer: 64 * MiB });
  const m = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(stderr);
  return { cpuS: m ? Number(m[1]) + Number(m[2]) : NaN };
}

async function blobBytes(dir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(join(dir, 'blobs', 'sha256'))) total += (await stat(join(dir, 'blobs', 'sha256', name))).size;
  return total;
}

function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** Images of one random layer each (`BIG_MIB`), pushed under quay.io's repository names; a plan naming them. */
async function pushBigImages(base: Plan): Promise<Plan> {
  const push = new PushClient(registry.host, { pullSecrets: [], insecureRegistries: [registry.host], retry: { attempts: 3, baseDelayMs: 100, maxDelayMs: 1000 }, concurrency: 4, stallTimeoutMs: 60_000 });
  const images: PlannedImage[] = [];
  try {
    for (const [n, mib] of BIG_MIB.entries()) {
      const repository = `bench/big-${n}`;
      const layer = randomBytes(mib * MiB);
      const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [sha256(layer)] } }));
      for (const blob of [config, layer]) await push.uploadBlob(repository, { digest: sha256(blob), size: blob.length }, () => Readable.from([blob]));
      const manifest = Buffer.from(JSON.stringify({
        schemaVersion: 2,
        mediaType: MediaType.ociManifest,
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256(config), size: config.length },
        layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: sha256(layer), size: layer.length }],
      }));
      const digest = sha256(manifest);
      await push.putManifest(repository, digest, manifest, MediaType.ociManifest);
      const template = base.images[0]!;
      images.push({
        ...template,
        name: `big-${n}`,
        pullSpec: `quay.io/${repository}@${digest}`,
        digest,
        config: { digest: sha256(config), size: config.length },
        layers: [{ digest: sha256(layer), mediaType: 'application/vnd.oci.image.layer.v1.tar', compressedBytes: layer.length, diskBytes: layer.length, method: 'uncompressed' }],
      } as PlannedImage);
    }
  } finally {
    await push.close();
  }
  return { ...base, images, skipped: [] };
}

const spinners: ChildProcess[] = [];
const stopSpinners = (): void => {
  for (const spinner of spinners.splice(0)) spinner.kill();
};
const builds: Build[] = [await previousBuild(), CURRENT];
let storeStop: (() => Promise<void>) | undefined;
try {
  const { stdout } = await run(process.execPath, [CURRENT.bin, 'plan', release, '--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host, '-o', 'json'], { maxBuffer: 64 * MiB });
  const smallPlan = join(root, 'small.json');
  await writeFile(smallPlan, stdout);
  // Signatures on: an attachment for every image at the source, a GPG signature in a store.
  const small = JSON.parse(stdout) as Plan;
  const cosign = generateSigstoreKeys();
  const signed = new Map<string, Array<{ digest: string; attachment: ReturnType<typeof signAttachment> }>>();
  for (const { pullSpec } of [...small.images, ...small.skipped]) {
    const [name, digest] = pullSpec.split('@') as [string, string];
    const repository = name.slice('quay.io/'.length);
    signed.set(repository, [...(signed.get(repository) ?? []), { digest, attachment: signAttachment(cosign, digest, name) }]);
  }
  for (const [repository, attachments] of signed) await pushAttachments(registry.host, repository, attachments);
  const gpg = await generateGpgKey('Bench Signer');
  const store = await startSignatureStore({ release: { [small.release.digest]: [await signRelease(gpg, small.release.digest, release)] } });
  storeStop = () => store.stop();
  const cosignPub = join(root, 'cosign.pub');
  await writeFile(cosignPub, cosign.publicPem);
  const help = new Map(await Promise.all(builds.map(async (b) => [b.name, (await run(process.execPath, [b.bin, 'bundle', 'create', '--help'])).stdout] as const)));
  const signing = new Set(builds.filter((b) => help.get(b.name)!.includes('--signature-store')).map((b) => b.name));
  // The attachments name their repository without a tag or digest: a build that checks the identity CRI-O will require is told so.
  const identityRule = (build: Build) => (help.get(build.name)!.includes('--sigstore-identity') ? ['--sigstore-identity', 'matchRepository'] : []);
  outputDirFlag = (build) => (help.get(build.name)!.includes('--output-dir') ? '--output-dir' : '--to');
  // BENCH_SIGNATURES=off: this build carries none either, the transfer path alone beside the previous one.
  const signaturesOff = process.env.BENCH_SIGNATURES === 'off';
  signatureFlags = (build) => (!signing.has(build.name) ? [] : signaturesOff ? ['--allow-unsigned', '--remove-signatures'] : ['--signature-store', store.url('release'), '--verification-key', gpg.publicKeyFile, '--sigstore-key', cosignPub, ...identityRule(build)]);
  const bigPlan = join(root, 'big.json');
  await writeFile(bigPlan, JSON.stringify(await pushBigImages(JSON.parse(stdout) as Plan)));

  let n = 0;
  const fresh = () => join(root, `bundle-${n++}`);
  type Runs = { small: Measured; bigUncapped: Measured; bigCapped: Measured; bigFlows: Measured; paced?: Measured; pacedSlowed?: Measured };
  // A build from before --link-rate (the default baseline) has no paced runs: its cells say n/a.
  const paces = (build: Build) => help.get(build.name)!.includes('--link-rate');
  const runs = new Map<string, Runs[]>(builds.map((b) => [b.name, []]));
  /** Sigstore attachments + release signatures the small bundle carried, per build. */
  const carried = new Map<string, string>();
  for (let i = 0; i < BUSY; i++) spinners.push(spawn(process.execPath, ['-e', 'for (;;);'], { stdio: 'ignore' }));
  const loadBefore = loadavg();
  // Rounds alternate which build goes first, so a load that changes over the run favours neither.
  const order = Array.from({ length: RUNS }, (_, round) => (round % 2 === 0 ? builds : [...builds].reverse())).flat();
  for (const build of order) {
    proxy.setBandwidth(CAP);
    const smallDir = fresh();
    const small = await measured(() => bundleCreate(build, smallPlan, smallDir, proxy.host), proxy);
    const metadata = JSON.parse(readFileSync(join(smallDir, 'prestage-bundle.json'), 'utf8')) as { signatures?: { sigstore?: { found?: number }; release?: { signatures: unknown[] } } };
    carried.set(build.name, `${metadata.signatures?.sigstore?.found ?? 0} + ${metadata.signatures?.release?.signatures.length ?? 0}`);
    const bigCapped = await measured(() => bundleCreate(build, bigPlan, fresh(), proxy.host), proxy);
    proxy.setBandwidth(null);
    proxy.setFlowBandwidth(FLOW_CAP);
    const bigFlows = await measured(() => bundleCreate(build, bigPlan, fresh(), proxy.host), proxy);
    proxy.setFlowBandwidth(null);
    const dir = fresh();
    const bigUncapped = await measured(() => bundleCreate(build, bigPlan, dir, registry.host), undefined, () => blobBytes(dir));
    // --link-rate: prestage's own pace on a link that is faster (the proxy uncapped, a 64 KiB window each).
    proxy.setWindow(64 * 1024);
    const linkRate = ['--link-rate', String(LINK_RATE)];
    const paced = paces(build) ? await measured(() => bundleCreate(build, smallPlan, fresh(), proxy.host, linkRate), proxy) : undefined;
    const pacedSlowed = paces(build) ? await measured(async () => {
      const creating = bundleCreate(build, smallPlan, fresh(), proxy.host, linkRate);
      await slowLinkFor(proxy, performance.now(), 1_500, 3_000, LINK_RATE * 0.3);
      return creating;
    }, proxy) : undefined;
    proxy.setWindow(null);
    runs.get(build.name)!.push({ small, bigUncapped, bigCapped, bigFlows, ...(paced ? { paced } : {}), ...(pacedSlowed ? { pacedSlowed } : {}) });
    for (let i = 0; i < n; i++) await rm(join(root, `bundle-${i}`), { recursive: true, force: true });
  }
  const loadAfter = loadavg();
  stopSpinners();
  // Each figure: the run with the median link use or rate of that scenario (of two, the lower).
  const pick = (list: Runs[], key: keyof Runs, score: (m: Measured) => number): Measured => [...list].map((r) => r[key]!).sort((a, b) => score(a) - score(b))[Math.floor((list.length - 1) / 2)]!;
  const pickPaced = (list: Runs[], key: 'paced' | 'pacedSlowed'): Measured | undefined => (list.every((r) => r[key]) ? pick(list, key, pacedUse) : undefined);
  /** A paced figure, or n/a for a build without --link-rate. */
  const paced = (m: Measured | undefined, f: (m: Measured) => number, digits: number) => (m ? f(m).toFixed(digits) : 'n/a');
  const pacedRatio = (a: Measured | undefined, b: Measured | undefined) => (a && b ? (pacedUse(b) / pacedUse(a)).toFixed(2) : '');

  const mib = (b: number) => (b / MiB).toFixed(1);
  const linkUse = (m: Measured) => m.bytes / (m.transferMs / 1000) / CAP;
  const rate = (m: Measured) => m.bytes / MiB / (m.ms / 1000);
  /** A --link-rate run: the link's mean over the run against the pace asked for. */
  const pacedUse = (m: Measured) => m.bytes / (m.transferMs / 1000) / LINK_RATE;
  const [before, after] = builds.map((b) => {
    const list = runs.get(b.name)!;
    const [p, ps] = [pickPaced(list, 'paced'), pickPaced(list, 'pacedSlowed')];
    return { small: pick(list, 'small', linkUse), bigCapped: pick(list, 'bigCapped', linkUse), bigFlows: pick(list, 'bigFlows', rate), bigUncapped: pick(list, 'bigUncapped', rate), ...(p ? { paced: p } : {}), ...(ps ? { pacedSlowed: ps } : {}) };
  }) as [Runs, Runs];
  const worst = (key: 'paced' | 'pacedSlowed') => builds.map((b) => (paces(b) ? Math.max(...runs.get(b.name)!.map((r) => r[key]!.maxOver5s / LINK_RATE)).toFixed(3) : 'n/a'));
  const spread = (key: keyof Runs, score: (m: Measured) => number, digits: number) => builds.map((b) => runs.get(b.name)!.map((r) => (r[key] ? score(r[key]).toFixed(digits) : 'n/a')).join('/')).join('  vs  ');
  const rows: Array<[string, string, string, string]> = [
    [`small blobs (${truth.release.version}, ${mib(after.small.bytes)} MiB), ${mib(CAP)} MiB/s cap: link use`, linkUse(before.small).toFixed(2), linkUse(after.small).toFixed(2), (linkUse(after.small) / linkUse(before.small)).toFixed(2)],
    [`big blobs (${BIG_MIB.join('+')} MiB), ${mib(CAP)} MiB/s cap: link use`, linkUse(before.bigCapped).toFixed(2), linkUse(after.bigCapped).toFixed(2), (linkUse(after.bigCapped) / linkUse(before.bigCapped)).toFixed(2)],
    ['big blobs uncapped, local registry: MiB/s', rate(before.bigUncapped).toFixed(0), rate(after.bigUncapped).toFixed(0), (rate(after.bigUncapped) / rate(before.bigUncapped)).toFixed(2)],
    [`big blobs, each connection capped at ${mib(FLOW_CAP)} MiB/s: MiB/s`, rate(before.bigFlows).toFixed(0), rate(after.bigFlows).toFixed(0), (rate(after.bigFlows) / rate(before.bigFlows)).toFixed(2)],
    ['big blobs uncapped: CPU s per GiB', (before.bigUncapped.cpuS / (before.bigUncapped.bytes / 1024 / MiB)).toFixed(2), (after.bigUncapped.cpuS / (after.bigUncapped.bytes / 1024 / MiB)).toFixed(2), ((after.bigUncapped.cpuS / after.bigUncapped.bytes) / (before.bigUncapped.cpuS / before.bigUncapped.bytes)).toFixed(2)],
    ['small blobs capped: wall s', (before.small.ms / 1000).toFixed(1), (after.small.ms / 1000).toFixed(1), (after.small.ms / before.small.ms).toFixed(2)],
    ['small blobs capped: transfer s (first to last body byte)', (before.small.transferMs / 1000).toFixed(2), (after.small.transferMs / 1000).toFixed(2), (after.small.transferMs / before.small.transferMs).toFixed(2)],
    ['small blobs capped: requests', String(before.small.requests), String(after.small.requests), (after.small.requests / before.small.requests).toFixed(2)],
    ['small blobs capped: signatures carried (sigstore + GPG)', carried.get(builds[0]!.name) ?? '', carried.get(builds[1]!.name) ?? '', ''],
    ['small blobs capped: CPU s prestage', before.small.cpuS.toFixed(2), after.small.cpuS.toFixed(2), (after.small.cpuS / before.small.cpuS).toFixed(2)],
    ['small blobs capped: CPU s registry', before.small.registryCpuS.toFixed(2), after.small.registryCpuS.toFixed(2), (after.small.registryCpuS / before.small.registryCpuS).toFixed(2)],
    ['small blobs capped: CPU s proxy', before.small.proxyCpuS.toFixed(2), after.small.proxyCpuS.toFixed(2), (after.small.proxyCpuS / before.small.proxyCpuS).toFixed(2)],
    [`small blobs, --link-rate ${mib(LINK_RATE)} MiB/s: link use`, paced(before.paced, pacedUse, 2), paced(after.paced, pacedUse, 2), pacedRatio(before.paced, after.paced)],
    [`small blobs, --link-rate: most over 5 s / cap (worst run)`, worst('paced')[0]!, worst('paced')[1]!, ''],
    ['the same, link slowed to 0.3 of it for 3 s: link use', paced(before.pacedSlowed, pacedUse, 2), paced(after.pacedSlowed, pacedUse, 2), pacedRatio(before.pacedSlowed, after.pacedSlowed)],
    ['the same, slowed: most over 5 s / cap (worst run)', worst('pacedSlowed')[0]!, worst('pacedSlowed')[1]!, ''],
  ];
  /** The three processes' CPU over two cores: no transfer on this machine can be shorter. */
  const cpuFloorS = (m: Measured) => (m.cpuS + m.registryCpuS + m.proxyCpuS) / 2;
  console.log(`bench:bundle  ${builds[0]!.name} vs ${builds[1]!.name};${BUSY ? ` ${BUSY} busy process${BUSY === 1 ? '' : 'es'} beside;` : ''} ${RUNS} rounds, alternating which build goes first; median run of each (of two, the lower); ratio = this / previous`);
  console.log(`  ${''.padEnd(64)} ${'previous'.padStart(9)} ${'this'.padStart(9)} ${'ratio'.padStart(7)}`);
  for (const [what, a, b, r] of rows) console.log(`  ${what.padEnd(64)} ${a.padStart(9)} ${b.padStart(9)} ${r.padStart(7)}`);
  const linkS = (after.small.bytes / CAP).toFixed(2);
  console.log(`  small blobs: the link needs ${linkS} s; CPU of prestage + registry + proxy over 2 cores: previous ${cpuFloorS(before.small).toFixed(2)} s, this ${cpuFloorS(after.small).toFixed(2)} s`);
  console.log(`  every run (previous  vs  this): small link use ${spread('small', linkUse, 2)}; big capped ${spread('bigCapped', linkUse, 2)}; per-connection MiB/s ${spread('bigFlows', rate, 0)}; uncapped MiB/s ${spread('bigUncapped', rate, 0)}`);
  console.log(`  --link-rate, every run: link use ${spread('paced', pacedUse, 2)}; most over 5 s ${spread('paced', (m) => m.maxOver5s / LINK_RATE, 3)}; slowed: link use ${spread('pacedSlowed', pacedUse, 2)}; most over 5 s ${spread('pacedSlowed', (m) => m.maxOver5s / LINK_RATE, 3)}`);
  console.log(`  load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')} before, ${loadAfter.map((l) => l.toFixed(2)).join(' ')} after`);
  console.log('  goals: link use >= 0.9 capped; >= 200 MiB/s uncapped from a local registry; --link-rate: at most 1.05 of it over any 5 s');
} finally {
  stopSpinners();
  for (const build of builds) await build.remove();
  await storeStop?.();
  await proxy.stop();
  await registry.stop();
  await rm(root, { recursive: true, force: true });
  await rm(storage, { recursive: true, force: true });
}
