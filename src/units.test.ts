/** The one grammar of sizes, rates and durations, form by form, and its refusals. */
import { describe, expect, it } from 'vitest';
import { formatRate, parseDuration, parseRate, parseSize, sizeAsQuantity } from './units.js';

const Ki = 2 ** 10;
const Mi = 2 ** 20;
const Gi = 2 ** 30;

describe('sizes', () => {
  it.each([
    ['4Gi', 4 * Gi],
    ['4G', 4e9],
    ['500Mi', 500 * Mi],
    ['500M', 500e6],
    ['1.5Gi', 1.5 * Gi],
    ['1e9', 1e9],
    ['123456', 123456],
    ['100B', 100],
    ['100GB', 100e9],
    ['4GiB', 4 * Gi],
    ['512MB', 512e6],
    ['512MiB', 512 * Mi],
    ['8kB', 8000],
    ['8k', 8000],
    ['8KB', 8000],
    ['8KiB', 8 * Ki],
    ['8Ki', 8 * Ki],
    ['2Ti', 2 * 2 ** 40],
    ['1.5TB', 1.5e12],
    [' 4 GiB ', 4 * Gi],
    ['0.5Ki', 512],
    ['1.0001Ki', 1025],
  ])('%j is %d bytes', (text, bytes) => expect(parseSize(text)).toBe(bytes));

  it.each(['', 'big', '-4G', '4X', '4Gb', '4gi', '4gb', '500m', '4 G i', '4GiBs', '1e400'])('refuses %j, naming it and the forms', (text) => {
    expect(() => parseSize(text)).toThrow(`${JSON.stringify(text)} is not a size`);
    expect(() => parseSize(text)).toThrow('use e.g. 4Gi, 4G, 500Mi, 100GB, 1.5GiB, or plain bytes');
  });

  it('says that units are case-sensitive where a unit in the wrong case was written, and only there', () => {
    for (const text of ['500m', '16gb', '4Gb', '2ti']) expect(() => parseSize(text), text).toThrow('units are case-sensitive: m is milli in Kubernetes; write M, G or Mi, Gi');
    for (const text of ['4 gigs', 'big', '-4G']) expect(() => parseSize(text), text).not.toThrow('case-sensitive');
  });

  it.each([
    ['100GB', '100G'],
    ['100Gi', '100Gi'],
    ['1.5TiB', '1.5Ti'],
    ['8KB', '8k'],
    ['4096', '4096'],
  ])('%j as a Kubernetes quantity is %j', (text, quantity) => expect(sizeAsQuantity(text)).toBe(quantity));
});

describe('rates', () => {
  it.each([
    // bytes per second
    ['5MB/s', 5e6],
    ['5MBps', 5e6],
    ['5MB', 5e6],
    ['5M', 5e6],
    ['20MiB/s', 20 * Mi],
    ['20Mi', 20 * Mi],
    ['20Mi/s', 20 * Mi],
    ['1.5GiB/s', 1.5 * Gi],
    ['1000', 1000],
    ['1000B/s', 1000],
    // bits per second, written with a lowercase b or bit
    ['40Mbps', 5e6],
    ['40Mbit/s', 5e6],
    ['40Mb/s', 5e6],
    ['40mbps', 5e6],
    ['1Gbps', 125e6],
    ['1Gbit', 125e6],
    ['800kbit', 1e5],
    ['800Kbps', 1e5],
    ['8bit/s', 1],
  ])('%j is %d bytes per second', (text, rate) => expect(parseRate(text)).toBe(rate));

  it('reads Mbps as an eighth of MBps, as network gear means them', () => {
    expect(parseRate('40Mbps')! * 8).toBe(parseRate('40MBps'));
  });

  it.each(['', 'fast', '20MiB/h', '5Mps', '20m', '5mB/s', '-5MB/s', '5 MB per second'])('refuses %j', (text) => expect(parseRate(text)).toBeUndefined());

  it.each([
    [5e6, '5 MB/s (40 Mbit/s)'],
    [125e6, '125 MB/s (1 Gbit/s)'],
    [20 * Mi, '20 MiB/s = 21 MB/s (168 Mbit/s)'],
    [1000, '1 kB/s (8 kbit/s)'],
    [12.5, '12.5 B/s (100 bit/s)'],
  ])('%d bytes per second echo as %j', (rate, text) => expect(formatRate(rate)).toBe(text));
});

describe('durations', () => {
  it.each([
    ['30s', 30_000],
    ['5m', 300_000],
    ['720h', 720 * 3_600_000],
    ['1h30m', 5_400_000],
    ['1h30m15s', 5_415_000],
    ['250ms', 250],
    ['90', 90_000],
    ['1.5h', 5_400_000],
    ['8760h', 8760 * 3_600_000],
  ])('%j is %d ms', (text, ms) => expect(parseDuration(text)).toBe(ms));

  it.each(['', '5 minutes', '-5s', '5d', '1h 30m', 'h', '30S'])('refuses %j, naming it and the forms', (text) => {
    expect(() => parseDuration(text)).toThrow(`${JSON.stringify(text)} is not a duration; use e.g. 90s, 30m, 1h30m, 720h (bare: seconds)`);
  });

  it('refuses more than a year, saying the ceiling', () => {
    expect(() => parseDuration('8761h')).toThrow('"8761h" is longer than a year (8760h), the longest a duration may be');
    expect(() => parseDuration('9999999999')).toThrow('is longer than a year');
  });
});
