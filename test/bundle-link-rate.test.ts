/**
 * `bundle create --link-rate`: every blob read of a run shares one pace. Measured where a link
 * would carry the bytes: the fixture release behind a Basic-auth docker-registry and the fault
 * proxy, which logs the bytes it sends per second and holds each connection to a 64 KiB TCP
 * window (over loopback the kernel would otherwise take megabytes the client has not asked for,
 * and count them as sent). The CLI runs as its own process, as on an admin host.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { AHEAD_SHARE, PREPAID_BYTES, pacedRead } from '../src/net/link-rate.js';
import type { StreamPacer } from '../src/net/link-rate.js';
import { parseRate } from '../src/units.js';
import { linkWindows, slowLinkFor } from './harness/fault-proxy.js';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';
import { expectOneLineError } from './support/bundle-files.js';
import { runCli, type CliResult } from './support/cli.js';
import { prestageEntry } from './support/prestage-process.js';
import { authFile, removeTempDirs } from './support/temp-files.js';

const truth = inject('fixtureTruth');
const storageDir = inject('fixtureStorageDir');
const RELEASE = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;
/** About 10 s for the fixture's single-architecture bundle (some 20 MB). */
const RATE = '2MiB/s';

let source: RegistryHandle;
let sourceProxy: FaultProxy;
let work: string;
/** Flags that read the fixture through the proxy, with credentials. */
let from: string[];
let planFile: string;

beforeAll(async () => {
  source = await startRegistry({ storageDir, auth: 'basic' });
  sourceProxy = await startFaultProxy({ upstream: source.url });
  work = await mkdtemp(join(tmpdir(), 'prestage-bundle-link-rate-'));
  const registryConfig = await authFile(sourceProxy.host, source.username!, source.password!);
  from = ['--mirror', `quay.io=${sourceProxy.host}`, '--insecure-registry', sourceProxy.host, '--registry-config', registryConfig];
  // Planned once: the bundle's own reads are the ones measured (a plan reads the release unpaced).
  planFile = join(work, 'plan.json');
  const plan = await runCli(['plan', RELEASE, ...from, '-o', 'json']);
  expect(plan.code, plan.stderr).toBe(0);
  await writeFile(planFile, plan.stdout);
});

afterAll(async () => {
  await sourceProxy?.stop();
  await source?.stop();
  if (work) await rm(work, { recursive: true, force: true });
  removeTempDirs();
});

/** The CLI as a process: the built bin, or the sources through tsx when the build is stale. */
async function prestage(args: readonly string[]): Promise<CliResult> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [...prestageEntry().nodeArgs, ...args], { maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : 1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

describe('bundle create --link-rate', () => {
  /**
   * A capped `bundle create` through the proxy's 64 KiB window, `during` the run (given when it
   * started); what the link carried, and the assertions every capped run holds.
   */
  async function cappedRun(name: string, during?: (startedAt: number) => Promise<void>): Promise<void> {
    const cap = parseRate(RATE)!;
    sourceProxy.setWindow(64 * 1024);
    sourceProxy.resetStats();
    const started = performance.now();
    const run = prestage(['bundle', 'create', planFile, '--output-dir', join(work, name), ...from, '--allow-unsigned', '--link-rate', RATE]);
    const shaping = during?.(started);
    const r = await run;
    const makespan = (performance.now() - started) / 1000;
    await shaping;
    sourceProxy.setBandwidth(null);
    sourceProxy.setWindow(null);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^bundle .*; fetched [\d.]+ MiB in \d+ blobs in [\d.]+ s at 2\.0 MiB\/s cap\n/);

    const { perSecond, bytesSent, log, firstByteAt, lastByteAt } = sourceProxy.stats;
    const windows = linkWindows(perSecond);
    const manifestBytes = log.filter((record) => record.target.includes('/manifests/')).reduce((a, record) => a + record.bytesSent, 0);
    const perSecondFigures = [...perSecond.values()].map((bytes) => (bytes / cap).toFixed(2)).join(' ');
    console.log(`--link-rate ${RATE} (${name}): ${bytesSent} B (${manifestBytes} B of manifests) over ${windows.seconds} s; `
      + `max over 5 s ${(windows.maxBytesPerSecond / cap).toFixed(3)} x cap, mean ${(windows.meanBytesPerSecond / cap).toFixed(3)} x cap; `
      + `makespan ${makespan.toFixed(2)} s (link ${((lastByteAt - firstByteAt) / 1000).toFixed(2)} s), bytes/cap ${(bytesSent / cap).toFixed(2)} s; per second x cap: ${perSecondFigures}`);

    expect([...perSecond.values()].reduce((a, b) => a + b, 0)).toBe(bytesSent);
    // At most the cap, plus what may cross later than it was paid: the bytes reads hold paid
    // ahead (at most AHEAD_SHARE of a window, by construction) and the manifests (paid once read,
    // some 280 KB, most of them first). Steady, measured 1.03-1.04 (2-core host); without the
    // bound on what is paid ahead, 1.02-1.15.
    expect(windows.maxBytesPerSecond).toBeLessThanOrEqual(cap * (1 + AHEAD_SHARE) + manifestBytes / 5);
    // How busy the capped link is kept is a speed, not a verdict: `npm run bench:bundle` reports it
    // (link use against the cap, beside the previous build). Here: never faster than the cap allows,
    // from the first byte to the last, and the whole run.
    expect((lastByteAt - firstByteAt) / 1000).toBeGreaterThanOrEqual((bytesSent / cap) * 0.95);
    expect(makespan).toBeGreaterThanOrEqual((bytesSent / cap) * 0.95);
  }

  it(`holds the link to ${RATE} over every 5 s window, and uses it`, async () => {
    await cappedRun('capped');
  });

  it('holds it too when the link slows below the cap for a while, then recovers', async () => {
    // 1.5 s in, the link carries 0.1 of the cap for 4 s: reads paid ahead then wait in its
    // queue, and cross at once when it recovers, on top of what is paid from then on. Measured
    // 1.024 and 1.053; with no bound on what is paid ahead, 1.148, 1.154 and 1.199.
    const cap = parseRate(RATE)!;
    await cappedRun('slowed', (startedAt) => slowLinkFor(sourceProxy, startedAt, 1_500, 4_000, cap * 0.1));
  });

  it('refuses a rate it cannot read, or zero, before any read', async () => {
    sourceProxy.resetStats();
    for (const [rate, message] of [['fast', /--link-rate: "fast" is not a rate; use e\.g\. 20MiB\/s/], ['0', /--link-rate must be more than zero/]] as const) {
      const r = await runCli(['bundle', 'create', planFile, '--output-dir', join(work, `refused-${rate}`), ...from, '--allow-unsigned', '--link-rate', rate]);
      expectOneLineError(r, 2, message);
      expect(r.stdout).toBe('');
    }
    expect(sourceProxy.stats.requests).toBe(0);
  });
});

describe('pacedRead', () => {
  /** A pacer that records what is paid, and when (`read: n` marks a chunk the source gave). */
  function recording(): { pacer: StreamPacer; events: string[] } {
    const events: string[] = [];
    // Opening a read pays its first window: the same event as paying.
    const pay = async (bytes: number) => void events.push(`pay ${bytes}`);
    const pacer = { open: pay, pay, landed: () => undefined };
    return { pacer: pacer as unknown as StreamPacer, events };
  }
  async function* chunks(sizes: number[], events: string[]): AsyncGenerator<Buffer> {
    for (const size of sizes) {
      events.push(`read ${size}`);
      yield Buffer.alloc(size);
    }
  }
  const signal = new AbortController().signal;

  it('pays the first window before it asks, then each chunk as it comes, and no more than the bytes in all', async () => {
    const { pacer, events } = recording();
    const sizes = [PREPAID_BYTES / 2, PREPAID_BYTES, PREPAID_BYTES, PREPAID_BYTES / 2];
    const bytes = sizes.reduce((a, b) => a + b, 0);
    let got = 0;
    for await (const chunk of pacedRead(chunks(sizes, events), bytes, pacer, signal)) got += chunk.length;
    expect(got).toBe(bytes);
    // The window first; then chunk by chunk; the last window's worth came with the first.
    expect(events).toEqual([`pay ${PREPAID_BYTES}`, `read ${PREPAID_BYTES / 2}`, `pay ${PREPAID_BYTES / 2}`, `read ${PREPAID_BYTES}`, `pay ${PREPAID_BYTES}`,
      `read ${PREPAID_BYTES}`, `pay ${PREPAID_BYTES / 2}`, `read ${PREPAID_BYTES / 2}`]);
    expect(events.filter((e) => e.startsWith('pay')).reduce((a, e) => a + Number(e.slice(4)), 0)).toBe(bytes);
  });

  it('a read smaller than the window is paid whole before it is asked for', async () => {
    const { pacer, events } = recording();
    for await (const chunk of pacedRead(chunks([1000, 2000], events), 3000, pacer, signal)) expect(chunk.length).toBeGreaterThan(0);
    expect(events).toEqual(['pay 3000', 'read 1000', 'read 2000']);
  });
});
