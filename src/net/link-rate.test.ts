import { describe, expect, it } from 'vitest';
import { virtualClock as fakeClock } from '../../test/support/virtual-clock.js';
import { pacedRead, pacerMeter, StreamPacer, WindowLedger } from './link-rate.js';

/** Bytes per window of `windowMs` over a list of [time, bytes], the maximum over every start. */
function maxInWindow(events: ReadonlyArray<readonly [number, number]>, windowMs: number): number {
  return Math.max(...events.map(([start]) => events.filter(([at]) => at >= start && at < start + windowMs).reduce((total, [, bytes]) => total + bytes, 0)));
}

describe('StreamPacer', () => {
  it('reads a stream no faster than the rate: 10 MiB at 2 MiB/s takes 5 s, the first window paid before it is asked for', async () => {
    const clock = fakeClock();
    const pacer = new StreamPacer(2 * 2 ** 20, clock);
    const chunks = Array.from({ length: 160 }, () => Buffer.alloc(64 * 1024));
    async function* source() {
      yield* chunks;
    }
    const started = clock.now();
    const times: Array<[number, number]> = [];
    for await (const chunk of pacedRead(source(), 10 * 2 ** 20, pacer)) times.push([clock.now(), chunk.length]);
    const elapsed = clock.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(4_999);
    expect(elapsed).toBeLessThanOrEqual(5_001);
    // Over any second, at most the rate and the first window.
    expect(maxInWindow(times, 1_000)).toBeLessThanOrEqual(2 * 2 ** 20 + 320 * 1024);
  });

  it('shares one rate between readers', async () => {
    const clock = fakeClock();
    const pacer = new StreamPacer(1_000, clock);
    await Promise.all([pacer.pay(1_000), pacer.pay(1_000), pacer.pay(1_000)]);
    // The third reader waited for all three seconds' worth.
    expect(Math.max(...clock.slept)).toBe(3_000);
  });

  it('as a transport meter: each request pays what it expects before it is sent, its body the rest as it arrives, all on one rate', async () => {
    const clock = fakeClock();
    const pacer = new StreamPacer(1_000, clock);
    const meter = pacerMeter(pacer);
    const start = clock.now();
    // A manifest's worth expected, 3,000 bytes arriving: 1,000 before the send, 2,000 as they come.
    const read = await meter.open(1_000);
    expect(clock.now() - start).toBe(1_000);
    expect(read.arrived(1_000)).toBeUndefined();
    await read.arrived(2_000);
    expect(clock.now() - start).toBe(3_000);
    read.close();
    expect(pacer.paidAhead).toBe(0);
    // A second request shares the rate: its 500 expected bytes wait behind the first's.
    await meter.open(500);
    expect(clock.now() - start).toBe(3_500);
  });

  it('as a transport meter, a body of known length keeps its first window paid ahead, as pacedRead does, to the same bytes and times', async () => {
    const chunks = Array.from({ length: 160 }, () => Buffer.alloc(64 * 1024));
    const total = 10 * 2 ** 20;
    const expected = 320 * 1024;
    async function* source() {
      yield* chunks;
    }
    const paced = fakeClock();
    const pacedTimes: number[] = [];
    for await (const _ of pacedRead(source(), total, new StreamPacer(2 * 2 ** 20, paced))) pacedTimes.push(paced.now());

    const metered = fakeClock();
    const meterTimes: number[] = [];
    const read = await pacerMeter(new StreamPacer(2 * 2 ** 20, metered)).open(expected, undefined, total);
    for (const chunk of chunks) {
      await read.arrived(chunk.length);
      meterTimes.push(metered.now());
    }
    expect(meterTimes).toEqual(pacedTimes);
    // All of it paid, none twice: 10 MiB at 2 MiB/s.
    expect(meterTimes.at(-1)! - 1_000_000).toBe(5_000);
    // Without the length, the first window's bytes ride free and each later chunk pays only itself: no lead.
    const bare = fakeClock();
    const bareRead = await pacerMeter(new StreamPacer(2 * 2 ** 20, bare)).open(expected);
    await bareRead.arrived(expected);
    expect(bare.now() - 1_000_000).toBe(156.25);
    await bareRead.arrived(64 * 1024);
    expect(bare.now() - 1_000_000).toBe(187.5);
  });

  it('holds what reads pay ahead to a tenth of a window: a read beyond it waits its turn until bytes land, a read alone always goes', async () => {
    const clock = fakeClock();
    const pacer = new StreamPacer(2 ** 20, clock);
    // 1 MiB/s: a 5 s window carries 5 MiB, a tenth of it is 512 KiB.
    expect(pacer.aheadBytes).toBe(512 * 1024);
    const order: string[] = [];
    await pacer.open(320 * 1024);
    const second = pacer.open(320 * 1024).then(() => order.push('second'));
    const third = pacer.open(100 * 1024).then(() => order.push('third'));
    await new Promise((resolve) => setImmediate(resolve));
    // The third would fit beside the first, but waits behind the second: reads go in turn.
    expect(order).toEqual([]);
    expect(pacer.paidAhead).toBe(320 * 1024);
    pacer.landed(320 * 1024);
    await Promise.all([second, third]);
    expect(order).toEqual(['second', 'third']);
    expect(pacer.paidAhead).toBe(420 * 1024);
    pacer.landed(420 * 1024);
    // Bigger than the room, alone: it goes.
    await pacer.open(2 ** 20);
    expect(pacer.paidAhead).toBe(2 ** 20);
  });

  it('a read that gives up waiting for room leaves its turn to the next, and counts nothing ahead', async () => {
    const pacer = new StreamPacer(2 ** 20, fakeClock());
    await pacer.open(400 * 1024);
    const abort = new AbortController();
    const given = pacer.open(400 * 1024, abort.signal);
    const next = pacer.open(100 * 1024);
    abort.abort(new Error('stopped'));
    await expect(given).rejects.toThrow('stopped');
    await next;
    expect(pacer.paidAhead).toBe(500 * 1024);
  });

  it('pacedRead lands every byte it paid ahead: read whole, or left early', async () => {
    const pacer = new StreamPacer(2 * 2 ** 20, fakeClock());
    async function* source(count: number) {
      for (let i = 0; i < count; i++) yield Buffer.alloc(64 * 1024);
    }
    for await (const _ of pacedRead(source(20), 20 * 64 * 1024, pacer)) expect(pacer.paidAhead).toBeLessThanOrEqual(320 * 1024);
    expect(pacer.paidAhead).toBe(0);
    for await (const _ of pacedRead(source(20), 20 * 64 * 1024, pacer)) break;
    expect(pacer.paidAhead).toBe(0);
    // A body shorter than it said: what never came is landed too.
    for await (const _ of pacedRead(source(2), 20 * 64 * 1024, pacer)) expect(pacer.paidAhead).toBeGreaterThan(0);
    expect(pacer.paidAhead).toBe(0);
  });

  it('refuses a rate of zero', () => {
    expect(() => new StreamPacer(0)).toThrow(/more than zero/);
  });
});

describe('WindowLedger', () => {
  it('never lets a 5 s window hold more than its bytes, whatever the sizes', async () => {
    const clock = fakeClock();
    const ledger = new WindowLedger(10_000, 5_000, clock);
    const starts: Array<[number, number]> = [];
    for (const bytes of [3_000, 4_000, 2_500, 6_000, 1_000, 9_000, 500, 500, 7_000, 2_000]) {
      await ledger.start(bytes);
      starts.push([clock.now(), bytes]);
    }
    expect(maxInWindow(starts, 5_000)).toBeLessThanOrEqual(10_000);
    // And it is not idle for nothing: 35.5 kB over 10 kB per 5 s is at least 12.75 s, well under twice that.
    expect(clock.now() - 1_000_000).toBeLessThan(25_000);
  });

  it('lets a start bigger than a window go alone, once the ledger is empty, and holds it for its time at the rate', async () => {
    const clock = fakeClock();
    const ledger = new WindowLedger(1_000, 5_000, clock);
    await ledger.start(600);
    await ledger.start(5_000);
    expect(clock.now() - 1_000_000).toBe(5_001);
    expect(ledger.recent()).toEqual([[clock.now(), 5_000]]);
    // 5 000 bytes at 200 B/s: 25 s before anything else starts, so the long-run rate holds.
    await ledger.start(10);
    expect(clock.now() - 1_000_000).toBe(5_001 + 25_001);
  });

  it('starts from charges handed over by a previous holder', async () => {
    const clock = fakeClock();
    const ledger = new WindowLedger(1_000, 5_000, clock);
    ledger.absorb([[clock.now() - 1_000, 900], [clock.now() - 9_000, 900]]);
    expect(ledger.waitFor(500)).toBe(4_001);
    expect(ledger.waitFor(100)).toBe(0);
  });
});
