import { describe, expect, it } from 'vitest';
import { linkRate, positiveDuration, positiveLongDuration, positiveSeconds, sizeAtLeast, sizeQuantity } from './flag-values.js';

describe('duration flags', () => {
  it('take 90s, 2m, 1h30m, 250ms and bare seconds, as seconds for the seconds flags', () => {
    const seconds = positiveSeconds('timeout');
    expect([seconds('90s'), seconds('2m'), seconds('1h30m'), seconds('250ms'), seconds('120'), seconds(60)]).toEqual([90, 120, 5400, 0.25, 120, 60]);
    expect(positiveDuration('timeout')('12m')).toBe(720_000);
  });
  it('refuse anything else with one line naming the flag', () => {
    const seconds = positiveSeconds('timeout');
    expect(() => seconds('-5s')).toThrow('--timeout: "-5s" is not a duration; use e.g. 90s, 30m, 1h30m, 720h (bare: seconds)');
    expect(() => seconds('0')).toThrow('--timeout must be longer than zero, e.g. 90s, 30m, 1h30m, 720h');
    expect(() => seconds(['1s', '2s'])).toThrow('--timeout given more than once; give it once, e.g. 90s, 30m, 1h30m, 720h');
  });
  it('hold plain timers to 576h, long timers to a year', () => {
    expect(positiveDuration('resync')('576h')).toBe(576 * 3_600_000);
    expect(() => positiveDuration('resync')('577h')).toThrow('--resync "577h" is longer than 576h, the longest it takes; use e.g. 90s');
    expect(positiveLongDuration('timeout')('720h')).toBe(720 * 3_600_000);
    expect(positiveLongDuration('timeout')('8760h')).toBe(8760 * 3_600_000);
    expect(() => positiveLongDuration('timeout')('8761h')).toThrow('--timeout: "8761h" is longer than a year (8760h)');
  });
});

describe('rate flags', () => {
  it('take bytes and bits per second, decimal and binary', () => {
    const rate = linkRate('link-rate');
    expect([rate('20MiB/s'), rate('100Mbit/s'), rate('5MB'), rate('1.5GiB/s'), rate('800kbit'), rate('1000'), rate('40Mbps')]).toEqual([20 * 2 ** 20, 12_500_000, 5_000_000, 1.5 * 2 ** 30, 100_000, 1000, 5_000_000]);
  });
  it('refuse anything else with one line naming the flag', () => {
    const rate = linkRate('link-rate');
    expect(() => rate('fast')).toThrow('--link-rate: "fast" is not a rate; use e.g. 20MiB/s, 5MB/s (bytes), 40Mbit/s, 40Mbps (bits)');
    expect(() => rate('20MiB/h')).toThrow('--link-rate: "20MiB/h" is not a rate');
    expect(() => rate('0MB/s')).toThrow('--link-rate must be more than zero');
  });
});

describe('size flags', () => {
  it('take quantities and B units, at least the least given', () => {
    const reserve = sizeAtLeast('reserve', 0);
    expect([reserve('16Gi'), reserve('20G'), reserve('100GB'), reserve('0')]).toEqual([16 * 2 ** 30, 20e9, 100e9, 0]);
    expect(() => reserve('16gb')).toThrow('--reserve: "16gb" is not a size (units are case-sensitive');
  });
  it('give a Kubernetes field its own spelling', () => {
    const cacheSize = sizeQuantity('cache-size');
    expect([cacheSize('100GB'), cacheSize('1.5TiB'), cacheSize('100Gi'), cacheSize('512KB'), cacheSize('1000')]).toEqual(['100G', '1.5Ti', '100Gi', '512k', '1000']);
    expect(() => cacheSize('lots')).toThrow('--cache-size: "lots" is not a size; use e.g. 4Gi, 4G, 500Mi, 100GB, 1.5GiB, or plain bytes');
  });
});
