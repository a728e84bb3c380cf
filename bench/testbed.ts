/**
 * `npm run bench:testbed`: what the test bed's busiest Go daemons cost in CPU on the suite's own
 * work, the settings the tests use against their baseline, side by side, as ratios (the suite is
 * CPU-bound on 2 cores, so their CPU is its time):
 * - a registry (Debian's docker-registry) answering small requests (a manifest and a config per
 *   component, as plans and size reads do) and whole-release pulls: Go's collector quiet
 *   (`test/harness/go-runtime.ts`) against Go's default;
 * - a CRI-O pulling the fixture release, children included (it re-executes itself to unpack each
 *   layer): overlay and the quiet collector against vfs and Go's default.
 * CPU is read from /proc (utime+stime, and for CRI-O the children it waited for). BENCH_RUNS
 * rounds (default 3), baseline and current alternating; medians.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture, type ComponentTruth } from '../fixtures/release.js';
import { CriClient } from '../src/cri/client.js';
import { testbedBinaries } from '../test/cluster/binaries.js';
import { CrioNode, type StorageDriver } from '../test/cluster/crio.js';
import type { GoCollector } from '../test/harness/go-runtime.js';
import { startRegistry } from '../test/harness/index.js';
import { processCpuSeconds } from './process-cpu.js';
import { median } from './median.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);

/** CPU seconds of the processes whose command line names `marker` (children they waited for too). */
function cpuSeconds(marker: string): number {
  let seconds = 0;
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)) seconds += processCpuSeconds(pid, { children: true });
    } catch {
      // Gone meanwhile.
    }
  }
  return seconds;
}

/** `each` over `items`, `width` at a time. */
async function parallel<T>(items: readonly T[], width: number, each: (item: T) => Promise<void>): Promise<void> {
  const limit = pLimit(width);
  await Promise.all(items.map((item) => limit(() => each(item))));
}

console.log(`bench:testbed: ${RUNS} runs, medians; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
const fixture = buildReleaseFixture();
const components = fixture.truth.components;
const work = await mkdtemp(join(tmpdir(), 'prestage-bench-testbed-'));
const storageDir = join(work, 'storage');
const pushTo = await startRegistry({ storageDir });
await pushFixture(pushTo.url, fixture);
await pushTo.stop();

/** Registry CPU ms per request, small requests and whole pulls. */
async function registryRound(goCollector: GoCollector): Promise<{ small: number; whole: number }> {
  const registry = await startRegistry({ storageDir, goCollector });
  const marker = registry.logFile.replace(/registry\.log$/, '');
  const get = async (path: string, accept?: string) => {
    const reply = await fetch(`${registry.url}/v2/${path}`, accept ? { headers: { accept } } : {});
    if (reply.status !== 200) throw new Error(`GET ${path}: ${reply.status}`);
    await reply.arrayBuffer();
  };
  try {
    const measure = async (requests: (c: ComponentTruth) => Array<[string, string?]>) => {
      const before = cpuSeconds(marker);
      let count = 0;
      await parallel(components, 8, async (c) => {
        for (const [path, accept] of requests(c)) {
          await get(path, accept);
          count++;
        }
      });
      return ((cpuSeconds(marker) - before) * 1000) / count;
    };
    const small = await measure((c) => [[`${c.repository}/manifests/${c.digest}`, c.mediaType], [`${c.repository}/blobs/${c.config.digest}`]]);
    const whole = await measure((c) => [[`${c.repository}/manifests/${c.digest}`, c.mediaType], ...[c.config.digest, ...c.layers.map((l) => l.digest)].map((d): [string] => [`${c.repository}/blobs/${d}`])]);
    return { small, whole };
  } finally {
    await registry.stop();
  }
}

/** CRI-O CPU seconds to pull the release, 4 pulls at a time as the agent does. */
async function crioRound(storageDriver: StorageDriver, goCollector: GoCollector): Promise<number> {
  const registry = await startRegistry({ storageDir });
  const dir = await mkdtemp(join(tmpdir(), 'prestage-bench-crio-'));
  const crio = await CrioNode.start({ dir, binaries: await testbedBinaries(), registries: { mirrors: { 'quay.io': registry.host }, insecure: [registry.host] }, storageDriver, goCollector });
  const cri = await CriClient.connect(crio.socketPath);
  try {
    const before = cpuSeconds(crio.configPath);
    await parallel(components, 4, async (c) => void (await cri.pullImage(c.pullSpec)));
    return cpuSeconds(crio.configPath) - before;
  } finally {
    cri.close();
    await crio.stop();
    await registry.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

try {
  const registry = { quiet: [] as Array<{ small: number; whole: number }>, default: [] as Array<{ small: number; whole: number }> };
  const crio = { current: [] as number[], baseline: [] as number[] };
  for (let run = 0; run < RUNS; run++) {
    registry.default.push(await registryRound('default'));
    registry.quiet.push(await registryRound('quiet'));
    crio.baseline.push(await crioRound('vfs', 'default'));
    crio.current.push(await crioRound('overlay', 'quiet'));
  }
  for (const kind of ['small', 'whole'] as const) {
    const base = median(registry.default.map((r) => r[kind]));
    const now = median(registry.quiet.map((r) => r[kind]));
    console.log(`registry, ${kind === 'small' ? 'manifest and config requests' : 'whole-release pulls'}: ${now.toFixed(2)} ms CPU per request, quiet collector, against ${base.toFixed(2)} with Go's default: ${(now / base).toFixed(2)}x`);
  }
  const base = median(crio.baseline);
  const now = median(crio.current);
  console.log(`CRI-O pulling the fixture release (${components.length} images): ${now.toFixed(1)} s CPU with overlay and the quiet collector, against ${base.toFixed(1)} s with vfs and Go's default: ${(now / base).toFixed(2)}x (runs ${crio.current.map((s) => s.toFixed(1)).join(' ')} / ${crio.baseline.map((s) => s.toFixed(1)).join(' ')})`);
} finally {
  await rm(work, { recursive: true, force: true });
}
