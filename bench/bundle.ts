/**
 * `npm run bench:bundle`: `prestage bundle create` against the baseline a person would script
 * with public tools (skopeo: copy every image of the plan to a directory, 4 at a time), in
 * the same run, on the fixture release behind a proxy capped at 8 MiB/s. Both start from the
 * same plan file. Prints the bytes each read upstream against the unique bytes the images
 * need (shared layers counted once) and how well each kept the capped link busy.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pLimit from 'p-limit';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import type { Plan } from '../src/plan/types.js';
import { startFaultProxy, startRegistry, type FaultProxy } from '../test/harness/index.js';

const run = promisify(execFile);
const CAP = Number(process.env.BENCH_CAP_BYTES ?? 8 * 1024 * 1024);
const BIN = fileURLToPath(new URL('../bin/prestage.js', import.meta.url));

const fixture = buildReleaseFixture();
const truth = fixture.truth;
const root = await mkdtemp(join(tmpdir(), 'prestage-bench-bundle-'));
const registry = await startRegistry({ storageDir: join(root, 'storage') });
await pushFixture(registry.url, fixture);
const proxy = await startFaultProxy({ upstream: registry.url });
const release = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;

interface Measured {
  readonly ms: number;
  readonly bytes: number;
  readonly requests: number;
  /** Milliseconds from the first to the last body byte the proxy sent. */
  readonly transferMs: number;
}

/** Wall time, and the proxy's bytes sampled every few ms to find when the link was in use. */
async function measured(fn: () => Promise<void>): Promise<Measured> {
  proxy.resetStats();
  let first: number | undefined;
  let last = 0;
  let seen = 0;
  const sampler = setInterval(() => {
    const now = performance.now();
    if (proxy.stats.bytesSent !== seen) {
      seen = proxy.stats.bytesSent;
      first ??= now;
      last = now;
    }
  }, 2);
  const started = performance.now();
  await fn();
  const ms = performance.now() - started;
  clearInterval(sampler);
  return { ms, bytes: proxy.stats.bytesSent, requests: proxy.stats.requests, transferMs: last - (first ?? last) };
}

async function prestage(planFile: string, dir: string): Promise<void> {
  await run(process.execPath, [BIN, 'bundle', 'create', planFile, '--to', dir, '--mirror', `quay.io=${proxy.host}`, '--tls-verify=false'], { maxBuffer: 64 * 1024 * 1024 });
}

/** The baseline: `skopeo copy` of every planned image by digest into its own directory, 4 at a time. */
async function skopeo(plan: Plan, dir: string, p: FaultProxy): Promise<void> {
  const limit = pLimit(4);
  await Promise.all(plan.images.map((image, n) => limit(() => run('skopeo', [
    'copy', '--quiet', '--src-tls-verify=false',
    `docker://${image.pullSpec.replace(/^quay\.io\//, `${p.host}/`)}`, `dir:${join(dir, String(n))}`,
  ]))));
}

async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(dir)) total += (await stat(join(dir, name))).size;
  return total;
}

try {
  const planFile = join(root, 'plan.json');
  const { stdout } = await run(process.execPath, [BIN, 'plan', release, '--mirror', `quay.io=${proxy.host}`, '--tls-verify=false', '-o', 'json'], { maxBuffer: 64 * 1024 * 1024 });
  await writeFile(planFile, stdout);
  const plan = JSON.parse(stdout) as Plan;

  // What this machine's registry and prestage manage with no cap: the ceiling for link use.
  const uncapped = await measured(() => prestage(planFile, join(root, 'uncapped')));
  proxy.setBandwidth(CAP);
  const bundleDir = join(root, 'bundle');
  const ours = await measured(() => prestage(planFile, bundleDir));
  // The unique bytes the planned images need: what the bundle holds (manifests, configs, layers once each).
  const unique = await dirBytes(join(bundleDir, 'blobs', 'sha256'));
  const skopeoDir = join(root, 'skopeo');
  await mkdir(skopeoDir);
  const theirs = await measured(() => skopeo(plan, skopeoDir, proxy));

  const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  const row = (name: string, m: Measured) => [
    name,
    `${(m.ms / 1000).toFixed(1)} s`,
    String(m.requests),
    mib(m.bytes),
    (m.bytes / unique).toFixed(2),
    (m.bytes / (m.transferMs / 1000) / CAP).toFixed(2),
    (m.bytes / (m.ms / 1000) / CAP).toFixed(2),
  ];
  const rows = [
    ['', 'wall', 'requests', 'upstream', 'up/unique', 'link use', 'end-to-end'],
    row('prestage bundle', ours),
    row('skopeo baseline', theirs),
  ];
  console.log(`bench:bundle  fixture: ${plan.images.length} images, release ${truth.release.version}; unique blob bytes ${mib(unique)}; proxy capped at ${mib(CAP)}/s; both start from the same plan file`);
  for (const r of rows) console.log(`  ${r[0]!.padEnd(16)} ${r.slice(1).map((c, i) => c.padStart([8, 9, 11, 10, 9, 11][i]!)).join(' ')}`);
  console.log(`  prestage upstream / unique bytes: ${(ours.bytes / unique).toFixed(3)}   (target 1.00; skopeo ${(theirs.bytes / unique).toFixed(2)}: it re-fetches shared layers per image)`);
  console.log(`  prestage throughput while transferring / cap: ${(ours.bytes / (ours.transferMs / 1000) / CAP).toFixed(2)}   (target >= 0.9; end to end incl. process start and manifests: ${(ours.bytes / (ours.ms / 1000) / CAP).toFixed(2)})`);
  console.log(`  the same run uncapped moves ${mib(uncapped.bytes / (uncapped.transferMs / 1000))}/s (${(uncapped.bytes / (uncapped.transferMs / 1000) / CAP).toFixed(2)}x the cap): below ~1.1x, this machine's registry and CPU, not the link, set the pace`);
  console.log(`  wall time, skopeo / prestage: ${(theirs.ms / ours.ms).toFixed(1)}x`);
} finally {
  await proxy.stop();
  await registry.stop();
  await rm(root, { recursive: true, force: true });
}
