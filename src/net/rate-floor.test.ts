import { describe, expect, it } from 'vitest';
import { MIN_BYTES_PER_SECOND, RateFloor } from './rate-floor.js';

describe('rate floor', () => {
  const clock = () => {
    let t = 0;
    return { now: () => t, advance: (ms: number) => (t += ms) };
  };

  it('calls a trickle too slow, a window at the floor not', () => {
    const c = clock();
    const floor = new RateFloor(2_000, c.now);
    c.advance(1_500);
    floor.arrived(1, false);
    c.advance(500);
    expect(floor.tooSlow(false)).toBe(true);
    floor.arrived(2 * MIN_BYTES_PER_SECOND, false);
    c.advance(2_000);
    expect(floor.tooSlow(false)).toBe(false);
    expect(floor.floorBytes).toBe(2 * MIN_BYTES_PER_SECOND);
  });

  it('excuses a window in which the reader held the body back, at any point or at its end', () => {
    const c = clock();
    const floor = new RateFloor(2_000, c.now);
    floor.arrived(16_384, true);
    c.advance(2_000);
    expect(floor.tooSlow(false)).toBe(false);
    c.advance(2_000);
    expect(floor.tooSlow(true)).toBe(false);
    c.advance(2_000);
    expect(floor.tooSlow(false)).toBe(true);
  });

  it('judges no window shorter than its length (a timer that fired early)', () => {
    const c = clock();
    const floor = new RateFloor(2_000, c.now);
    c.advance(1_999);
    expect(floor.tooSlow(false)).toBe(false);
  });
});
