import { describe, expect, it } from 'vitest';
import { linkCharges, LinkShare, LINK_LEDGER_ANNOTATION } from './link-share.js';
import type { SizeResult } from './image-sizes.js';

const layer = (name: string, linkBytes: number) => ({ digest: `sha256:${name}`, diskBytes: linkBytes * 2, linkBytes, exact: true });

describe('linkCharges', () => {
  it('charges each new layer once, to the first image that pulls it; stored layers cost nothing; unknown images fall back', () => {
    const sizes = new Map<string, SizeResult>([
      ['stored', { layers: [layer('base', 100)], from: 'r' }],
      ['a', { layers: [layer('base', 100), layer('mid', 30), layer('a', 5)], from: 'r' }],
      ['b', { layers: [layer('base', 100), layer('mid', 30), layer('b', 7)], from: 'r' }],
      ['c', { error: 'not found' }],
    ]);
    const charges = linkCharges(['a', 'b', 'c', 'd'], new Set(['stored']), sizes, (image) => (image === 'c' ? 42 : undefined));
    expect(Object.fromEntries(charges)).toEqual({ a: 35, b: 7, c: 42, d: 0 });
  });
});

describe('LinkShare', () => {
  it('is the cap over the slots, averaged over 5 s, and takes over what the Lease carries', () => {
    const share = new LinkShare(3_000, 3, undefined, JSON.stringify([[Date.now(), 4_000], ['bad'], 7]));
    expect(share.ledger.bytesPerWindow).toBe(5_000);
    expect(share.ledger.waitFor(1_000)).toBe(0);
    expect(share.ledger.waitFor(1_001)).toBeGreaterThan(4_000);
    expect(JSON.parse(share.handOver()[LINK_LEDGER_ANNOTATION]!)).toHaveLength(1);
    expect(new LinkShare(3_000, 3, undefined, 'not json').ledger.recent()).toEqual([]);
  });
});
