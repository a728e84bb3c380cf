import { describe, expect, it } from 'vitest';
import type { RuntimeImage } from '../cri/client.js';
import { createLogger } from '../telemetry/log.js';
import type { CacheWarmer } from './cache-warm.js';
import type { PullPacer, PullSlot } from './pacing.js';
import { virtualClock } from '../../test/support/virtual-clock.js';
import { SYSTEM_CLOCK, type Clock } from '../net/link-rate.js';
import { MemoryLinkLedger } from './link-share.js';
import { PULL_DEADLINE_GRACE_MS, PullExecutor, type PullExecutorOptions, type PullRound } from './pull-executor.js';
import type { ImageFilesystem, ImageRuntime, RuntimePullOptions } from './runtime.js';

const image = (n: number) => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;
const MiB = 2 ** 20;

/** A runtime whose pulls answer from a script: each call takes the next outcome for its image (none left: success). */
class ScriptedRuntime implements ImageRuntime {
  readonly calls: Array<{ image: string; at: number; timeoutMs?: number }> = [];
  inFlight = 0;
  maxInFlight = 0;
  constructor(
    private readonly script: Record<string, Array<string | undefined>> = {},
    private readonly pullMs = 0,
    /** The executor's clock, so that call times are the executor's times. */
    private readonly clock: Clock = SYSTEM_CLOCK,
  ) {}
  async pull(name: string, options?: RuntimePullOptions): Promise<void> {
    this.calls.push({ image: name, at: this.clock.now(), ...(options?.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}) });
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.pullMs > 0) await this.clock.sleep(this.pullMs);
      const error = this.script[name]?.shift();
      if (error) throw new Error(error);
    } finally {
      this.inFlight--;
    }
  }
  async listImages(): Promise<RuntimeImage[]> {
    return [];
  }
  async imageFilesystem(): Promise<ImageFilesystem> {
    return { mountpoint: '/', capacityBytes: 0, freeBytes: 0 };
  }
  async pin(): Promise<void> {}
  close(): void {}
}

const executor = (runtime: ImageRuntime, options: Partial<PullExecutorOptions> = {}) =>
  new PullExecutor({ runtime, log: createLogger('silent'), retry: { attempts: 4, initialDelayMs: 20, maxDelayMs: 30 }, progressed: () => undefined, ...options });

const round = (admitted: Array<[string, number | undefined]>, overrides: Partial<PullRound> = {}): PullRound & { events: string[] } => {
  const events: string[] = [];
  return {
    admitted: new Map(admitted),
    arch: 'amd64',
    concurrency: 2,
    auth: () => undefined,
    wanted: () => true,
    progress: { poke: () => void events.push('poke'), settle: async () => void events.push('settle') },
    onSlotLost: () => void events.push('slot lost'),
    events,
    ...overrides,
  };
};

describe('PullExecutor.pull: retries', () => {
  it('retries a failing pull with doubling delays capped at maxDelayMs, and forgets the error once one succeeds', async () => {
    const clock = virtualClock();
    const runtime = new ScriptedRuntime({ [image(1)]: ['connection reset', 'connection reset', 'i/o timeout'] }, 0, clock);
    const pulls = executor(runtime, { clock });
    let retries = 0;
    await pulls.pull(image(1), undefined, undefined, () => retries++);
    expect(runtime.calls).toHaveLength(4);
    expect(retries).toBe(3);
    // 20 ms, then 40 capped to 30, then 30.
    expect(runtime.calls.map((call) => call.at - runtime.calls[0]!.at)).toEqual([0, 20, 50, 80]);
    expect(clock.slept).toEqual([20, 30, 30]);
    expect(pulls.history(image(1))).toEqual({ attempts: 4, pulling: false, lastError: undefined, notBefore: undefined });
  });

  it('gives up after the policy\'s attempts and keeps the last error; the image does not rest', async () => {
    const runtime = new ScriptedRuntime({ [image(1)]: ['a', 'b', 'c', 'd\n  on two lines', 'never reached'] });
    const pulls = executor(runtime);
    await pulls.pull(image(1), undefined, undefined, () => undefined);
    expect(runtime.calls).toHaveLength(4);
    expect(pulls.history(image(1))).toMatchObject({ attempts: 4, pulling: false, lastError: 'd on two lines' });
    expect(pulls.resting(image(1))).toBe(false);
  });

  it('stops at a permanent error (no retry) and rests the image for the backoff', async () => {
    const clock = virtualClock();
    const runtime = new ScriptedRuntime({ [image(1)]: ['writing blob: no space left on device'] }, 0, clock);
    const pulls = executor(runtime, { permanentFailureBackoffMs: 60_000, clock });
    const failedAt = clock.now();
    await pulls.pull(image(1), undefined, undefined, () => undefined);
    expect(runtime.calls).toHaveLength(1);
    expect(clock.slept).toEqual([]);
    expect(pulls.history(image(1))?.lastError).toBe('writing blob: no space left on device');
    expect(pulls.resting(image(1))).toBe(true);
    expect(pulls.resting(image(1), failedAt + 60_000 - 1)).toBe(true);
    expect(pulls.resting(image(1), failedAt + 60_000)).toBe(false);
  });

  it("explains CRI-O's signature refusal in the recorded error", async () => {
    const runtime = new ScriptedRuntime({ [image(1)]: ['Source image rejected: A signature was required, but no signature exists'] });
    const pulls = executor(runtime);
    await pulls.pull(image(1), undefined, undefined, () => undefined);
    expect(runtime.calls).toHaveLength(1);
    expect(pulls.history(image(1))?.lastError).toMatch(/^refused by the node's signature policy: .*Source image rejected/);
  });

  it('starts no retry once stopped', async () => {
    const runtime = new ScriptedRuntime({ [image(1)]: ['reset', 'reset'] });
    const pulls = executor(runtime);
    pulls.stop();
    await pulls.pull(image(1), undefined, undefined, () => undefined);
    expect(runtime.calls).toHaveLength(1);
  });
});

describe('PullExecutor.pull: the cache detour', () => {
  it('after a corrupt blob, pulls again at once past the cache, once, and ends the detour when the image is done', async () => {
    const clock = virtualClock();
    const runtime = new ScriptedRuntime({ [image(1)]: ['Digest did not match, expected sha256:a, got sha256:b', 'digest mismatch again'] }, 0, clock);
    const steps: string[] = [];
    const pulls = executor(runtime, {
      clock,
      retry: { attempts: 4, initialDelayMs: 200, maxDelayMs: 200 },
      bypassCache: async (name, error) => {
        steps.push(`bypass ${name === image(1)} ${error.startsWith('Digest did not match')}`);
        return async () => void steps.push('detour ended');
      },
    });
    await pulls.pull(image(1), undefined, undefined, () => undefined);
    expect(runtime.calls).toHaveLength(3);
    // The second attempt follows the first at once; the third waits the backoff (the detour is taken once).
    expect(runtime.calls.map((call) => call.at - runtime.calls[0]!.at)).toEqual([0, 0, 200]);
    expect(clock.slept).toEqual([200]);
    expect(steps).toEqual(['bypass true true', 'detour ended']);
  });

  it('without a detour (none configured, or the cache cannot be bypassed) backs off as for any error', async () => {
    for (const bypassCache of [undefined, async () => undefined]) {
      const clock = virtualClock();
      const runtime = new ScriptedRuntime({ [image(1)]: ['checksum mismatch'] }, 0, clock);
      await executor(runtime, { clock, ...(bypassCache ? { bypassCache } : {}) }).pull(image(1), undefined, undefined, () => undefined);
      expect(runtime.calls.map((call) => call.at - runtime.calls[0]!.at)).toEqual([0, 20]);
    }
  });
});

describe('PullExecutor: deadlines', () => {
  it("gives each pull a CRI timeout from its size and the minimum throughput, never under the minimum, and a deadline a grace later", async () => {
    const clock = virtualClock();
    const runtime = new ScriptedRuntime({}, 50, clock);
    const pulls = executor(runtime, { minThroughputBytesPerSecond: MiB, minPullTimeoutMs: 1_000, clock });
    expect(pulls.withinDeadlines()).toBeUndefined();
    const started = clock.now();
    const pulling = pulls.pull(image(1), 10 * MiB, undefined, () => undefined);
    expect(pulls.withinDeadlines(started)).toBe(true);
    expect(pulls.withinDeadlines(started + 10_000 + PULL_DEADLINE_GRACE_MS - 1)).toBe(true);
    expect(pulls.withinDeadlines(started + 10_000 + PULL_DEADLINE_GRACE_MS)).toBe(false);
    await pulling;
    expect(pulls.withinDeadlines()).toBeUndefined();
    await pulls.pull(image(2), 1, undefined, () => undefined);
    await pulls.pull(image(3), undefined, undefined, () => undefined);
    expect(runtime.calls.map((call) => call.timeoutMs)).toEqual([10_000, 1_000, 1_000]);
  });

  it('counts an attempt ended as progress', async () => {
    const runtime = new ScriptedRuntime({ [image(1)]: ['reset'] });
    let steps = 0;
    await executor(runtime, { progressed: () => steps++ }).pull(image(1), undefined, undefined, () => undefined);
    expect(steps).toBe(2);
  });
});

describe('PullExecutor.pullAll', () => {
  it('pulls at most `concurrency` at once, publishing progress, and settles the status before it returns', async () => {
    const runtime = new ScriptedRuntime({}, 20);
    const pulls = executor(runtime);
    const work = round(Array.from({ length: 7 }, (_, n): [string, undefined] => [image(n), undefined]), { concurrency: 3 });
    await pulls.pullAll(work);
    expect(runtime.calls).toHaveLength(7);
    expect(runtime.maxInFlight).toBe(3);
    expect(work.events.filter((event) => event === 'poke')).toHaveLength(14);
    expect(work.events.at(-1)).toBe('settle');
  });

  it('skips images no selecting set wants any more, and those resting after a permanent error', async () => {
    const runtime = new ScriptedRuntime({ [image(2)]: ['manifest unknown'] });
    const pulls = executor(runtime);
    await pulls.pullAll(round([[image(2), undefined]]));
    await pulls.pullAll(round([[image(1), undefined], [image(2), undefined], [image(3), undefined]], { wanted: (name) => name !== image(3) }));
    expect(runtime.calls.map((call) => call.image)).toEqual([image(2), image(1)]);
  });

  it('waits for the cache warm and a pull slot, releases the slot after the status settled, and pulls nothing once the slot is lost', async () => {
    const steps: string[] = [];
    let held = true;
    const slot: PullSlot = { held: () => held, release: async () => void steps.push('release') };
    const pacer: PullPacer = { acquire: async () => (steps.push('acquire'), slot) };
    const warmer: CacheWarmer = { warm: async (images, arch) => void steps.push(`warm ${images.length} ${arch}`), close: async () => undefined };
    const runtime = new ScriptedRuntime();
    const pulls = executor(runtime, { pacer, cacheWarmer: warmer });
    const work = round([[image(1), undefined]], { arch: 'arm64', progress: { poke: () => undefined, settle: async () => void steps.push('settle') } });
    await pulls.pullAll(work);
    expect(steps).toEqual(['warm 1 arm64', 'acquire', 'settle', 'release']);
    expect(runtime.calls).toHaveLength(1);

    held = false;
    const lost = round([[image(2), undefined]]);
    await pulls.pullAll(lost);
    expect(runtime.calls).toHaveLength(1);
    expect(lost.events).toContain('slot lost');
  });

  it('asks for no turn when nothing is due', async () => {
    let asked = false;
    const pulls = executor(new ScriptedRuntime(), { pacer: { acquire: async () => ((asked = true), { held: () => true, release: async () => undefined }) } });
    await pulls.pullAll(round([]));
    expect(asked).toBe(false);
  });

  it('under a link cap, starts each pull only when the ledger has room, and warms at the whole cap', async () => {
    let warmedAt: number | undefined;
    const runtime = new ScriptedRuntime();
    const clock = virtualClock(Date.now());
    const ledger = new MemoryLinkLedger(clock);
    // Another node charged 6 MiB a second ago: 10 MiB per 5 s at 2 MiB/s leaves 4 MiB.
    await ledger.start(6 * MiB, 2 * MiB);
    const charges = new Map([[image(1), 2 * MiB], [image(2), 1 * MiB], [image(3), 2 * MiB]]);
    const started = clock.now();
    const startedAt = new Map<string, number>();
    const timed: ImageRuntime = { ...runtime, pull: async (name) => void startedAt.set(name, clock.now() - started), listImages: runtime.listImages, imageFilesystem: runtime.imageFilesystem, pin: runtime.pin, close: runtime.close };
    const timedPulls = executor(timed, { clock, linkLedger: ledger, linkRate: 2 * MiB, cacheWarmer: { warm: async (_images, _arch, _wait, rate) => void (warmedAt = rate), close: async () => undefined } });
    await timedPulls.pullAll(round([[image(1), undefined], [image(2), undefined], [image(3), undefined]], { concurrency: 3, linkBytes: (name) => charges.get(name)! }));
    // One pull at a time under a cap. Images 1 and 2 fit the window with the other node's 6 MiB;
    // image 3 waits for those 6 MiB to leave it, 5 s on.
    expect(startedAt.get(image(1))).toBe(0);
    expect(startedAt.get(image(2))).toBe(0);
    expect(startedAt.get(image(3))).toBe(5_001);
    expect(timedPulls.linkBytes()).toEqual({ bytes: 5 * MiB, pendingBytes: 0 });
    expect(warmedAt).toBe(2 * MiB);
  });

  it('through the link relay: no pull is charged whole beforehand; each opens a relay session just before CRI is asked, closed once it returns; one CRI-O took around the relay is charged after it', async () => {
    const clock = virtualClock(Date.now());
    const ledger = new MemoryLinkLedger(clock);
    const charged: number[] = [];
    const counting = { start: async (bytes: number, cap: number, signal?: AbortSignal, openMs?: number) => (charged.push(bytes), ledger.start(bytes, cap, signal, openMs)) };
    const events: string[] = [];
    const runtime = new ScriptedRuntime({}, 0, clock);
    const relayed: ImageRuntime = { ...runtime, pull: async (name, options) => (events.push(`pull ${name.slice(-1)}`), runtime.pull(name, options)), listImages: runtime.listImages, imageFilesystem: runtime.imageFilesystem, pin: runtime.pin, close: runtime.close };
    const wired: string[][] = [];
    const linkRelay = {
      wire: async (images: readonly string[]) => (wired.push([...images]), true),
      open: (name: string, cap: number, _secrets: unknown, expected?: number) => {
        events.push(`open ${name.slice(-1)} at ${cap} for ${expected}`);
        // Image 2's pull never reached the relay.
        return { close: async () => (events.push(`close ${name.slice(-1)}`), name === image(2) ? { bytes: 0, requests: 0 } : { bytes: 5, requests: 3 }) };
      },
    };
    await executor(relayed, { clock, linkLedger: counting, linkRate: MiB, linkRelay }).pullAll(round([[image(1), undefined], [image(2), undefined]], { linkBytes: () => 3 * MiB }));
    expect(wired).toEqual([[image(1), image(2)]]);
    expect(events).toEqual([`open 1 at ${MiB} for ${3 * MiB}`, 'pull 1', 'close 1', `open 2 at ${MiB} for ${3 * MiB}`, 'pull 2', 'close 2']);
    // Only image 2's bytes, after its pull: image 1's were paid part by part in the relay.
    expect(charged).toEqual([3 * MiB]);
  });

  it('under a cap pulls over the link one image at a time, whatever the concurrency, and through the cache at the node\'s concurrency', async () => {
    const runtime = new ScriptedRuntime({}, 20);
    await executor(runtime, { linkRate: 100 * MiB }).pullAll(round([[image(1), undefined], [image(2), undefined], [image(3), undefined]], { concurrency: 3, linkBytes: () => 1 }));
    expect(runtime.maxInFlight).toBe(1);
    const free = new ScriptedRuntime({}, 20);
    await executor(free).pullAll(round([[image(1), undefined], [image(2), undefined], [image(3), undefined]], { concurrency: 3 }));
    expect(free.maxInFlight).toBe(3);
    // Served by the cache: nothing over the link, the node's concurrency.
    const cached = new ScriptedRuntime({}, 20);
    await executor(cached, { linkRate: 100 * MiB, servedByCache: () => true }).pullAll(round([[image(1), undefined], [image(2), undefined], [image(3), undefined]], { concurrency: 3, linkBytes: () => 1 }));
    expect(cached.maxInFlight).toBe(3);
  });

  it('starts nothing a shut gate holds back, says why, and a strict window stops a pull under way at its close', async () => {
    const runtime = new ScriptedRuntime({}, 0);
    const pulls = executor(runtime);
    const note = 'paused until 22:00 UTC (staging windows 22:00-06:00)';
    const shut = { open: false, why: 'window', opensAt: Date.now() + 60_000, note } as const;
    await pulls.pullAll(round([[image(1), undefined], [image(2), undefined]], { gate: (name) => (name === image(1) ? shut : { open: true }) }));
    expect(runtime.calls.map((call) => call.image)).toEqual([image(2)]);
    expect([...pulls.held()]).toEqual([[image(1), shut]]);

    // A runtime that pulls until cancelled: the window closes 100 ms in.
    let cancelled = false;
    const slow: ImageRuntime = {
      ...new ScriptedRuntime(),
      pull: (_name, options) =>
        new Promise((_resolve, reject) => options?.signal?.addEventListener('abort', () => ((cancelled = true), reject(new Error('CRI pull cancelled'))))),
      listImages: async () => [],
      imageFilesystem: async () => ({ mountpoint: '/', capacityBytes: 0, freeBytes: 0 }),
      pin: async () => undefined,
      close: () => undefined,
    };
    const strict = executor(slow);
    const closesAt = Date.now() + 100;
    await strict.pullAll(round([[image(3), undefined]], { gate: () => (Date.now() >= closesAt ? shut : { open: true, closesAt, strict: true }) }));
    expect(cancelled).toBe(true);
    // Not a failure: no error, no attempt counted; held back until the next window.
    expect(strict.history(image(3))).toMatchObject({ attempts: 0, pulling: false });
    expect(strict.history(image(3))?.lastError).toBeUndefined();
    expect([...strict.held().keys()]).toEqual([image(3)]);
  });
});

