import { describe, expect, it } from 'vitest';
import { MemoryLinkLedger } from '../agent/link-share.js';
import { virtualClock } from '../../test/support/virtual-clock.js';
import { expectedResponseBytes, LedgerMeter, LinkShutError, partBytesFor, RESPONSE_HEAD_BYTES } from './link-meter.js';

/** The most bytes any window of `ms` holds, over [time, bytes] events. */
function most(events: ReadonlyArray<readonly [number, number]>, ms: number): number {
  return Math.max(...events.map(([start]) => events.filter(([at]) => at >= start && at < start + ms).reduce((total, [, bytes]) => total + bytes, 0)));
}

describe('LedgerMeter', () => {
  it("charges reads on the pulls' ledger before they cross: reads (longer than expected too) and pulls after them hold the cap over any 5 s", async () => {
    const clock = virtualClock();
    const ledger = new MemoryLinkLedger(clock);
    const cap = 10_000;
    const meter = new LedgerMeter(ledger, cap, { sliceBytes: 10_000 });
    const crossed: Array<[number, number]> = [];
    // 200 reads, 20 at a time: each expects a manifest's worth (2 KiB) and brings 1.5-3.5 kB in two chunks.
    const read = async (n: number) => {
      const metered = await meter.open(2_048);
      for (const bytes of [1_000, 500 + (n % 5) * 500]) {
        crossed.push([clock.now(), bytes]);
        await metered.arrived(bytes);
      }
      await clock.sleep(10);
      metered.close();
    };
    for (let batch = 0; batch < 10; batch++) await Promise.all(Array.from({ length: 20 }, (_, i) => read(batch * 20 + i)));
    await meter.finish();
    // Then the pulls, charged as the agents charge theirs; their bytes cross at their end.
    for (const bytes of [30_000, 20_000]) {
      const charge = await ledger.start(bytes, cap, undefined, 60_000);
      await clock.sleep(2_000);
      crossed.push([clock.now(), bytes]);
      await charge.end();
    }
    expect(crossed.reduce((total, [, bytes]) => total + bytes, 0)).toBe(200 * 1_000 + 40 * (500 + 1_000 + 1_500 + 2_000 + 2_500) + 50_000);
    expect(most(crossed, 5_000)).toBeLessThanOrEqual(cap * 5);
  });

  it('ends a slice with the bytes that crossed (the head too), and only once every read that drew on it closed', async () => {
    const ends: Array<number | undefined> = [];
    const ledger = { start: async () => ({ end: async (bytes?: number) => void ends.push(bytes) }) };
    const meter = new LedgerMeter(ledger, 1_000, { sliceBytes: 5_000 });
    const open = await meter.open(4);
    await open.arrived(4);
    await meter.finish();
    expect(ends).toEqual([]);
    open.close();
    expect(ends).toEqual([4 + RESPONSE_HEAD_BYTES]);
  });

  it('expects a bounded Range its length, a HEAD nothing, anything else a manifest\'s worth', () => {
    expect(expectedResponseBytes('GET', { range: 'bytes=96-99' })).toBe(4);
    expect(expectedResponseBytes('HEAD', undefined)).toBe(0);
    expect(expectedResponseBytes('GET', { accept: 'application/json' })).toBe(2 * 1024);
  });

  it('asks a long blob in parts of half a second of the cap, 16 KiB to 320 KiB, none longer than a slice', () => {
    expect(partBytesFor(64 * 1024)).toBe(32 * 1024);
    expect(partBytesFor(8 * 1024)).toBe(16 * 1024);
    expect(partBytesFor(10 * 1024 * 1024)).toBe(320 * 1024);
    expect(new LedgerMeter(new MemoryLinkLedger(), 1024 * 1024, { sliceBytes: 100_000 }).partBytes).toBe(100_000);
  });

  it('asks its gate before paying, and again once paid: a window that shut meanwhile holds the request back, and the slice ends with nothing crossed', async () => {
    const ends: Array<number | undefined> = [];
    let shut = false;
    let started = 0;
    const ledger = { start: async () => (started++, { end: async (bytes?: number) => void ends.push(bytes) }) };
    const meter = new LedgerMeter(ledger, 1_000, { sliceBytes: 5_000, gate: () => {
      if (shut) throw new LinkShutError();
    } });
    shut = true;
    await expect(meter.open(4)).rejects.toBeInstanceOf(LinkShutError);
    expect(started).toBe(0);
    // Open at the first ask, shut by the second (after the ledger gave room).
    let asks = 0;
    const closing = new LedgerMeter(ledger, 1_000, { sliceBytes: 5_000, gate: () => {
      if (++asks === 2) throw new LinkShutError();
    } });
    await expect(closing.open(4)).rejects.toBeInstanceOf(LinkShutError);
    await closing.finish();
    expect(ends).toEqual([0]);
  });
});
