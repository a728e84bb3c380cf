import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { MAX_TIMER_MS, setLongTimeout } from './long-timer.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

const HOUR = 3_600_000;

it('holds 720h, past what setTimeout holds, and fires once at the deadline', () => {
  const fire = vi.fn();
  expect(720 * HOUR).toBeGreaterThan(MAX_TIMER_MS);
  setLongTimeout(fire, 720 * HOUR);
  vi.advanceTimersByTime(720 * HOUR - 1);
  expect(fire).not.toHaveBeenCalled();
  vi.advanceTimersByTime(1);
  expect(fire).toHaveBeenCalledTimes(1);
  vi.advanceTimersByTime(720 * HOUR);
  expect(fire).toHaveBeenCalledTimes(1);
});

it('fires a short delay as setTimeout would, and a negative one at once', () => {
  const short = vi.fn();
  const late = vi.fn();
  setLongTimeout(short, 90_000);
  setLongTimeout(late, -5);
  vi.advanceTimersByTime(0);
  expect(late).toHaveBeenCalledTimes(1);
  vi.advanceTimersByTime(89_999);
  expect(short).not.toHaveBeenCalled();
  vi.advanceTimersByTime(1);
  expect(short).toHaveBeenCalledTimes(1);
});

it('never fires once cleared, before or after a re-arm', () => {
  const early = vi.fn();
  const late = vi.fn();
  const a = setLongTimeout(early, 720 * HOUR);
  const b = setLongTimeout(late, 720 * HOUR);
  a.clear();
  vi.advanceTimersByTime(MAX_TIMER_MS + 1);
  b.clear();
  vi.advanceTimersByTime(720 * HOUR);
  expect(early).not.toHaveBeenCalled();
  expect(late).not.toHaveBeenCalled();
  expect(vi.getTimerCount()).toBe(0);
});

it('keeps to the clock: a deadline the clock passed while the timer slept fires at the next re-arm', () => {
  const fire = vi.fn();
  setLongTimeout(fire, 720 * HOUR);
  // The machine slept: the clock moved on, the timers did not.
  vi.setSystemTime(Date.now() + 720 * HOUR);
  vi.advanceTimersByTime(MAX_TIMER_MS - 1);
  expect(fire).not.toHaveBeenCalled();
  // At the re-arm the deadline is past: it fires with the next tick (a 0 ms timer is 1 ms in Node).
  vi.advanceTimersByTime(2);
  expect(fire).toHaveBeenCalledTimes(1);
});
