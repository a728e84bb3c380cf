/**
 * A timeout that may be longer than Node's timers hold. `setTimeout` keeps a delay in 32 bits:
 * past 2^31-1 ms (about 24.8 days) it warns and fires at once, so `wait --timeout 720h` ended at
 * once and `--fail-after 720h` re-judged in a busy loop. This one re-arms in steps up to that
 * bound until the deadline, read from the clock each time (a suspended machine does not stretch it).
 */

/** The longest delay `setTimeout` holds. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export interface LongTimer {
  clear(): void;
}

export function setLongTimeout(fire: () => void, delayMs: number, now: () => number = Date.now): LongTimer {
  const deadline = now() + Math.max(0, delayMs);
  let timer: NodeJS.Timeout | undefined;
  let cleared = false;
  const arm = () => {
    if (cleared) return;
    const left = deadline - now();
    timer = left > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS) : setTimeout(fire, Math.max(0, left));
  };
  arm();
  return {
    clear: () => {
      cleared = true;
      clearTimeout(timer);
    },
  };
}
