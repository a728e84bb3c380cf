import type { Clock } from '../../src/net/link-rate.js';

/** Virtual time: sleeps end in time order, each moving the clock to its end; nothing really waits. */
export function virtualClock(start = 1_000_000): Clock & { slept: number[] } {
  let now = start;
  const slept: number[] = [];
  const timers: Array<{ at: number; wake: () => void }> = [];
  const advance = () => {
    timers.sort((a, b) => a.at - b.at);
    const next = timers.shift();
    if (!next) return;
    now = Math.max(now, next.at);
    next.wake();
  };
  return {
    slept,
    now: () => now,
    sleep: (ms) =>
      new Promise<void>((wake) => {
        slept.push(ms);
        timers.push({ at: now + ms, wake });
        setImmediate(advance);
      }),
  };
}
