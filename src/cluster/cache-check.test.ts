import { describe, expect, it } from 'vitest';
import { quantityBytes } from './cache-check.js';

describe('the cache volume size, as Kubernetes writes quantities', () => {
  it('reads binary and decimal suffixes and plain numbers; undefined for anything else', () => {
    expect(quantityBytes('100Gi')).toBe(100 * 2 ** 30);
    expect(quantityBytes('120G')).toBe(120e9);
    expect(quantityBytes('512Mi')).toBe(512 * 2 ** 20);
    expect(quantityBytes('1.5Ti')).toBe(1.5 * 2 ** 40);
    expect(quantityBytes('5e10')).toBe(5e10);
    expect(quantityBytes('1000')).toBe(1000);
    for (const bad of [undefined, '', 'lots', '10ki', '10 Gi', '-1Gi']) expect(quantityBytes(bad)).toBeUndefined();
  });
});
