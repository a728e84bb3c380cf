import { describe, expect, it } from 'vitest';
import { LedgerMeter, linkCharges, LeaseLinkLedger, LINK_LEDGER_ANNOTATION, MemoryLinkLedger } from './link-share.js';
import { meteredChunks, prepaidFor } from '../net/link-rate.js';
import type { KubeClient } from '../kube/client.js';
import { createLogger } from '../telemetry/log.js';
import { virtualClock } from '../../test/support/virtual-clock.js';
import type { SizeResult } from './image-sizes.js';

const layer = (name: string, linkBytes: number) => ({ digest: `sha256:${name}`, diskBytes: linkBytes * 2, linkBytes, exact: true });

describe('linkCharges', () => {
  it('charges each new layer once, to the first image that pulls it, plus its config and manifests; stored layers cost nothing; unknown images fall back', () => {
    const sizes = new Map<string, SizeResult>([
      ['stored', { layers: [layer('base', 100)], from: 'r' }],
      ['a', { layers: [layer('base', 100), layer('mid', 30), layer('a', 5)], from: 'r', overheadBytes: 0 }],
      ['b', { layers: [layer('base', 100), layer('mid', 30), layer('b', 7)], from: 'r', overheadBytes: 3 }],
      ['c', { error: 'not found' }],
    ]);
    const charges = linkCharges(['a', 'b', 'c', 'd'], new Set(['stored']), sizes, (image) => (image === 'c' ? 42 : undefined));
    expect(Object.fromEntries(charges)).toEqual({ a: 35, b: 10, c: 42, d: 0 });
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

describe('LedgerMeter', () => {
  it("reserves reads on the pulls' ledger a slice at a time, before they cross: reads and pulls together hold the cap over any 5 s", async () => {
    const clock = virtualClock();
    const ledger = new MemoryLinkLedger(clock);
    const cap = 100_000;
    const meter = new LedgerMeter(ledger, cap, 10_000);
    const t0 = clock.now();
    const crossed: Array<[number, number]> = [];
    // A pull takes 4.5 windows' worth of the cap's 5 s... then 300 reads of a 2 kB manifest each, read in 1 kB chunks.
    await ledger.start(450_000, cap);
    crossed.push([clock.now(), 450_000]);
    for (let read = 0; read < 300; read++) {
      await meter.pay(prepaidFor('GET', undefined));
      async function* body() {
        yield Buffer.alloc(1_000);
        yield Buffer.alloc(1_500);
      }
      for await (const chunk of meteredChunks(body(), meter, 2_048)) crossed.push([clock.now(), chunk.length]);
    }
    // Then another pull, charged as the agents charge theirs.
    await ledger.start(200_000, cap);
    crossed.push([clock.now(), 200_000]);
    const most = Math.max(...crossed.map(([start]) => crossed.filter(([at]) => at >= start && at < start + 5_000).reduce((total, [, bytes]) => total + bytes, 0)));
    expect(most).toBeLessThanOrEqual(cap * 5);
    // Every byte read was reserved (300 x 2.5 kB), no more than a slice beyond it.
    expect(meter.reserved()).toBeGreaterThanOrEqual(300 * 2_500);
    expect(meter.reserved()).toBeLessThan(300 * 2_500 + 10_000);
    // Reading waited for the pull's room: the cap, not the reads, set the time.
    expect(clock.now() - t0).toBeGreaterThanOrEqual(((450_000 + 300 * 2_500) / cap) * 1000 - 5_000);
  });

  it('prepays a bounded Range its length, a HEAD nothing, anything else a manifest\'s worth', () => {
    expect(prepaidFor('GET', { range: 'bytes=96-99' })).toBe(4);
    expect(prepaidFor('HEAD', undefined)).toBe(0);
    expect(prepaidFor('GET', { accept: 'application/json' })).toBe(2 * 1024);
  });
});
