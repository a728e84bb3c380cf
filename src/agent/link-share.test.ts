import { describe, expect, it } from 'vitest';
import { linkCharges, LeaseLinkLedger, LINK_LEDGER_ANNOTATION, MemoryLinkLedger } from './link-share.js';
import type { KubeClient } from '../kube/client.js';
import { createLogger } from '../telemetry/log.js';
import { virtualClock } from '../../test/support/virtual-clock.js';
import type { SizeResult } from './image-sizes.js';
import { RESPONSE_HEAD_BYTES } from '../net/link-meter.js';

const layer = (name: string, linkBytes: number) => ({ digest: `sha256:${name}`, diskBytes: linkBytes * 2, linkBytes, exact: true });

describe('linkCharges', () => {
  it("charges each new layer once, to the first image that pulls it, plus its config and manifests and every answer's head; stored layers cost nothing; unknown images fall back", () => {
    const sizes = new Map<string, SizeResult>([
      ['stored', { layers: [layer('base', 100)], from: 'r' }],
      ['a', { layers: [layer('base', 100), layer('mid', 30), layer('a', 5)], from: 'r', overheadBytes: 0 }],
      ['b', { layers: [layer('base', 100), layer('mid', 30), layer('b', 7)], from: 'r', overheadBytes: 3 }],
      ['c', { error: 'not found' }],
    ]);
    const charges = linkCharges(['a', 'b', 'c', 'd'], new Set(['stored']), sizes, (image) => (image === 'c' ? 42 : undefined));
    // a: layers mid and a, 5 manifest and config answers and 2 layer answers, each with its head.
    expect(Object.fromEntries(charges)).toEqual({ a: 35 + 7 * RESPONSE_HEAD_BYTES, b: 10 + 6 * RESPONSE_HEAD_BYTES, c: 42, d: 0 });
  });
});

describe('MemoryLinkLedger', () => {
  it('holds starts to the cap over 5 s, whatever cap each start brings', async () => {
    const clock = virtualClock();
    const ledger = new MemoryLinkLedger(clock);
    const t0 = clock.now();
    await ledger.start(6_000, 2_000);
    await ledger.start(4_000, 2_000);
    expect(clock.now()).toBe(t0);
    await ledger.start(1, 2_000);
    expect(clock.now()).toBe(t0 + 5_001);
  });
});

describe('MemoryLinkLedger, transfers whose bytes cross any time until they end', () => {
  // Three nodes, each pulling one image after another; each pull's bytes cross all at once at
  // its very end (the worst case for a ledger: CRI-O reports nothing while it pulls).
  async function stage(openMs: number): Promise<Array<[number, number]>> {
    const clock = virtualClock();
    const ledger = new MemoryLinkLedger(clock);
    const cap = 1_000;
    const crossed: Array<[number, number]> = [];
    const node = async (pulls: ReadonlyArray<readonly [bytes: number, ms: number]>) => {
      for (const [bytes, ms] of pulls) {
        const charge = await ledger.start(bytes, cap, undefined, openMs);
        await clock.sleep(ms);
        crossed.push([clock.now(), bytes]);
        await charge.end();
      }
    };
    // Slow pulls beside fast ones: a slow pull's bytes fall in a later window than its start's.
    await Promise.all([
      node([[2_000, 4_000], [1_500, 100], [2_500, 3_000], [1_000, 50]]),
      node([[1_000, 50], [2_000, 4_500], [500, 10], [2_000, 2_000]]),
      node([[1_500, 3_500], [1_000, 20], [2_000, 100], [1_500, 4_000]]),
    ]);
    return crossed;
  }
  const most = (crossed: ReadonlyArray<readonly [number, number]>) =>
    Math.max(...crossed.map(([start]) => crossed.filter(([at]) => at >= start && at < start + 5_000).reduce((total, [, bytes]) => total + bytes, 0)));

  it('counts each charge until a window after its end: no 5 s holds more than the cap, however long each pull takes', async () => {
    expect(most(await stage(60_000))).toBeLessThanOrEqual(5_000);
  });

  it('where charges counted a window from their start (the earlier rule), the same pulls overshoot', async () => {
    expect(most(await stage(0))).toBeGreaterThan(5_000);
  });
});

describe('LeaseLinkLedger', () => {
  it('counts an entry from a clock a little ahead of ours from now, and drops one hours ahead', async () => {
    const clock = virtualClock();
    const lease = { metadata: { name: 'prestage-link', namespace: 'prestage', resourceVersion: '1', annotations: { [LINK_LEDGER_ANNOTATION]: JSON.stringify([[clock.now() + 10 * 3_600_000, 10_000], [clock.now() + 2_000, 9_500]]) } }, spec: {} };
    const writes: unknown[] = [];
    const client = {
      find: async () => lease,
      request: async (_method: string, _path: string, options: { body: unknown }) => void writes.push(options.body),
    } as unknown as KubeClient;
    const ledger = new LeaseLinkLedger(client, { namespace: 'prestage', holder: 'node-a', log: createLogger('silent'), clock });
    const t0 = clock.now();
    // The 9.5 kB stamped 2 s ahead fill the window (10 kB at 2 kB/s) until 5 s past that stamp;
    // the 10 kB stamped ten hours ahead are dropped, or nothing would start for ten hours.
    await ledger.start(1_000, 2_000);
    expect(clock.now() - t0).toBeGreaterThanOrEqual(5_000);
    expect(clock.now() - t0).toBeLessThanOrEqual(7_001);
    expect(writes).toHaveLength(1);
  });
});

describe('LeaseLinkLedger, ends', () => {
  it("writes a charge open until its deadline, then its end and the bytes that crossed; reads an older agent's [at, bytes] entries too", async () => {
    const clock = virtualClock();
    let lease = { metadata: { name: 'prestage-link', namespace: 'prestage', resourceVersion: '1', annotations: { [LINK_LEDGER_ANNOTATION]: JSON.stringify([[clock.now() - 1_000, 9_000]]) } }, spec: {} };
    const client = {
      find: async () => lease,
      request: async (_method: string, _path: string, options: { body: typeof lease }) => void (lease = options.body),
    } as unknown as KubeClient;
    const ledger = new LeaseLinkLedger(client, { namespace: 'prestage', holder: 'node-a', log: createLogger('silent'), clock });
    const entries = () => JSON.parse(lease.metadata.annotations[LINK_LEDGER_ANNOTATION]) as unknown[][];
    const t0 = clock.now();
    // The older agent's 9 kB leave the 10 kB window 4 s on: then 2 kB fit.
    const charge = await ledger.start(2_000, 2_000, undefined, 60_000);
    expect(clock.now() - t0).toBeGreaterThanOrEqual(4_000);
    const started = clock.now();
    expect(entries().at(-1)).toEqual([started, 2_000, started + 60_000, expect.any(String)]);
    await clock.sleep(3_000);
    await charge.end(1_500);
    expect(entries().at(-1)).toEqual([started, 1_500, started + 3_000, expect.any(String)]);
  });
});
