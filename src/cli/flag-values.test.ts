import { describe, expect, it } from 'vitest';
import { positiveDuration, positiveSeconds } from './flag-values.js';

describe('duration flags', () => {
  it('take 90s, 2m, 1h30m, 250ms and bare seconds, as seconds for the seconds flags', () => {
    const seconds = positiveSeconds('timeout');
    expect([seconds('90s'), seconds('2m'), seconds('1h30m'), seconds('250ms'), seconds('120'), seconds(60)]).toEqual([90, 120, 5400, 0.25, 120, 60]);
    expect(positiveDuration('timeout')('12m')).toBe(720_000);
  });
  it('refuse anything else with one line naming the flag', () => {
    const seconds = positiveSeconds('timeout');
    expect(() => seconds('-5s')).toThrow('--timeout: bad duration "-5s": use e.g. 90s, 5m, 1h30m');
    expect(() => seconds('0')).toThrow('--timeout must be longer than zero, e.g. 90s, 30m, 2h');
    expect(() => seconds(['1s', '2s'])).toThrow('--timeout given more than once; give it once, e.g. 90s, 30m, 2h');
  });
});
