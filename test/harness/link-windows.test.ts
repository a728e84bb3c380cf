/**
 * linkWindows: the rate a link held over sliding windows of whole seconds, from the fault
 * proxy's per-second byte log. Pure; no registry.
 */
import { describe, expect, it } from 'vitest';
import { linkWindows } from './fault-proxy.js';

const log = (entries: Array<[number, number]>): Map<number, number> => new Map(entries);

describe('linkWindows', () => {
  it('nothing carried: all zero', () => {
    expect(linkWindows(new Map())).toEqual({ maxBytesPerSecond: 0, meanBytesPerSecond: 0, seconds: 0 });
    expect(linkWindows(log([[100, 0]]))).toEqual({ maxBytesPerSecond: 0, meanBytesPerSecond: 0, seconds: 0 });
  });

  it('a steady link: max and mean are its rate', () => {
    const steady = log(Array.from({ length: 12 }, (_, i) => [1_000 + i, 500] as [number, number]));
    expect(linkWindows(steady)).toEqual({ maxBytesPerSecond: 500, meanBytesPerSecond: 500, seconds: 12 });
  });

  it('the max is the fullest window of consecutive seconds; empty seconds inside count 0', () => {
    // seconds 10..19; 13 is missing (nothing written), 15 and 16 a burst.
    const bursty = log([[10, 100], [11, 100], [12, 100], [14, 100], [15, 900], [16, 900], [17, 100], [18, 100], [19, 100]]);
    const windows = linkWindows(bursty);
    // 14..18 (or 15..19): 100 + 900 + 900 + 100 + 100 = 2100 over 5 s.
    expect(windows.maxBytesPerSecond).toBe(420);
    expect(windows.meanBytesPerSecond).toBe(2500 / 10);
    expect(windows.seconds).toBe(10);
    // Windows of 1 s: the busiest second; of 2 s: 15 and 16.
    expect(linkWindows(bursty, 1).maxBytesPerSecond).toBe(900);
    expect(linkWindows(bursty, 2).maxBytesPerSecond).toBe(900);
  });

  it('windows lie between the first and the last second that carried bytes', () => {
    // A window reaching past either end would hold less, never more: the max is of the span's own windows.
    const windows = linkWindows(log([[0, 600], [1, 0], [2, 0], [3, 0], [4, 0], [5, 0], [6, 0], [7, 0], [8, 0], [9, 400]]), 5);
    expect(windows.maxBytesPerSecond).toBe(600 / 5);
    expect(windows.seconds).toBe(10);
  });

  it('a span shorter than the window is one window padded with empty seconds', () => {
    const short = linkWindows(log([[50, 300], [52, 700]]), 5);
    expect(short).toEqual({ maxBytesPerSecond: 1000 / 5, meanBytesPerSecond: 1000 / 3, seconds: 3 });
    expect(linkWindows(log([[7, 1000]]), 5)).toEqual({ maxBytesPerSecond: 200, meanBytesPerSecond: 1000, seconds: 1 });
  });

  it('refuses a window that is not a whole number of seconds', () => {
    expect(() => linkWindows(log([[1, 1]]), 0)).toThrow(RangeError);
    expect(() => linkWindows(log([[1, 1]]), 2.5)).toThrow(RangeError);
  });
});
