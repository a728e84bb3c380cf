/**
 * One `prestage plan` of the fixture release through the fault proxy at BENCH_RTT_MS (20) (and
 * BENCH_BANDWIDTH bytes/s, default uncapped), with
 * a timeline of its requests (when each arrived at the proxy and when its answer ended, in ms
 * since the process was spawned) and, with BENCH_CPU_PROF=DIR, V8's CPU profile of the plan.
 * What bench:plan's critical-path table summarises, opened up: which request waits on what.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { startFaultProxy, startRegistry, type RequestRecord } from '../test/harness/index.js';
import { CURRENT } from './previous-build.js';

const RTT_MS = Number(process.env.BENCH_RTT_MS ?? 20);
const bin = process.env.BENCH_BIN ?? CURRENT.bin;
const fixture = buildReleaseFixture();
const storageDir = await mkdtemp(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'prestage-trace-'));
const registry = await startRegistry({ storageDir: join(storageDir, 'storage') });
await pushFixture(registry.url, fixture);
const proxy = await startFaultProxy({ upstream: registry.url });
proxy.setLatency(RTT_MS);
// As bench:plan: BENCH_BANDWIDTH bytes/s shared by every request (default uncapped).
if (process.env.BENCH_BANDWIDTH) proxy.setBandwidth(Number(process.env.BENCH_BANDWIDTH));
const release = `quay.io/${fixture.truth.releaseRepository}:${fixture.truth.release.tag}`;

async function plan(profile: boolean): Promise<{ spawned: number; exited: number; ended: Map<RequestRecord, number> }> {
  proxy.resetStats();
  const ended = new Map<RequestRecord, number>();
  // The proxy marks a record ended; note when, to the millisecond.
  const poll = setInterval(() => {
    for (const r of proxy.stats.log) if (r.ended && !ended.has(r)) ended.set(r, Date.now());
  }, 1);
  const node = [...(profile && process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF] : []), bin];
  const spawned = Date.now();
  const child = spawn(process.execPath, [...node, 'plan', release, '--mirror', `quay.io=${proxy.host}`, '--insecure-registry', proxy.host, '-o', 'json'], { stdio: ['ignore', 'ignore', 'inherit'] });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const exited = Date.now();
  clearInterval(poll);
  if (code !== 0) throw new Error(`plan exited ${code}`);
  return { spawned, exited, ended };
}

try {
  await plan(false); // warm the registry
  const { spawned, exited, ended } = await plan(true);
  const log = proxy.stats.log;
  console.log(`plan at RTT ${RTT_MS} ms: ${exited - spawned} ms from spawn to exit, ${log.length} requests`);
  const short = (t: string) => t.replace(/^\/v2\/[^/]+\/[^/]+\//, '').replace(/sha256:([0-9a-f]{8})[0-9a-f]+/, '$1');
  for (const r of log) {
    if (!process.env.BENCH_TRACE_ALL && log.indexOf(r) > 12 && log.indexOf(r) < log.length - 6) continue;
    console.log(`  ${String(r.startedAt - spawned).padStart(5)} → ${String((ended.get(r) ?? exited) - spawned).padStart(5)}  ${r.method} ${short(r.target)}${r.range ? ` ${r.range}` : ''} ${r.status} ${r.bytesSent}`);
  }
  const lastAnswer = Math.max(...log.map((r) => ended.get(r) ?? exited));
  console.log(`  first request at ${log[0]!.startedAt - spawned} ms; last answer at ${lastAnswer - spawned} ms; exit ${exited - lastAnswer} ms after it`);
} finally {
  await proxy.stop();
  await registry.stop();
  await rm(storageDir, { recursive: true, force: true });
}
