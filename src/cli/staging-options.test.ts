import { describe, expect, it } from 'vitest';
import { parseWindow } from '../api/staging.js';
import { windowHold } from './staging-options.js';

describe('windowHold', () => {
  it('lets a read through at once inside a window, and holds one outside it until the opening, saying so once', async () => {
    const schedule = { windows: [parseWindow('22:00-06:00')], timeZone: 'UTC', strict: false };
    let now = Date.parse('2026-12-02T21:59:30Z');
    const waits: number[] = [];
    const said: string[] = [];
    const hold = windowHold(schedule, (line) => said.push(line), () => now, async (ms) => {
      waits.push(ms);
      now += ms;
    });
    await hold();
    await hold();
    // Re-checked every 10 s at most: a clock set meanwhile is seen.
    expect(waits).toEqual([10_000, 10_000, 10_000]);
    expect(said).toEqual(["--window: the staging windows are shut; the plan's reads over the link wait for the opening (paused until 22:00 UTC (staging windows 22:00-06:00))"]);
    waits.length = 0;
    await hold();
    expect(waits).toEqual([]);
  });
});
