import { describe, expect, it } from 'vitest';
import { linkRate, positiveDuration, positiveSeconds } from './flag-values.js';

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

describe('rate flags', () => {
  it('take bytes and bits per second, decimal and binary', () => {
    const rate = linkRate('link-rate');
    expect([rate('20MiB/s'), rate('100Mbit/s'), rate('5MB'), rate('1.5GiB/s'), rate('800kbit'), rate('1000')]).toEqual([20 * 2 ** 20, 12_500_000, 5_000_000, 1.5 * 2 ** 30, 100_000, 1000]);
  });
  it('refuse anything else with one line naming the flag', () => {
    const rate = linkRate('link-rate');
    expect(() => rate('fast')).toThrow('--link-rate: bad rate "fast": use e.g. 20MiB/s, 100Mbit/s, 5MB/s');
    expect(() => rate('20MiB/h')).toThrow('--link-rate: bad rate "20MiB/h"');
    expect(() => rate('0MB/s')).toThrow('--link-rate must be more than zero');
  });
});
