import { describe, expect, it } from 'vitest';
import type { PinnedImageSet } from '../api/prestage.js';
import { LINK_RATE_ANNOTATION, PAUSED_ANNOTATION, WINDOWS_ANNOTATION, WINDOW_TZ_ANNOTATION } from '../api/staging.js';
import { gateFor, rateOf, waitingSets } from './staging-gate.js';

const set = (name: string, images: string[], annotations: Record<string, string> = {}): PinnedImageSet =>
  ({ apiVersion: 'prestage.dev/v1alpha1', kind: 'PinnedImageSet', metadata: { name, annotations }, spec: { pinnedImages: images.map((image) => ({ name: image })) } }) as PinnedImageSet;

describe('staging gate', () => {
  it('lets an image start when any set naming it is open, and says the first reason otherwise', () => {
    const paused = set('a', ['x', 'y'], { [PAUSED_ANNOTATION]: '2026-11-26T12:00:00Z' });
    // A window that never holds now: an hour that is not this one.
    const hour = new Date().getUTCHours();
    const shut = set('b', ['y', 'z'], { [WINDOWS_ANNOTATION]: `${String((hour + 2) % 24).padStart(2, '0')}:00-${String((hour + 3) % 24).padStart(2, '0')}:00`, [WINDOW_TZ_ANNOTATION]: 'UTC' });
    const open = set('c', ['z']);
    const gate = gateFor(() => [paused, shut, open]);
    expect(gate('x')).toMatchObject({ open: false, why: 'paused' });
    expect(gate('y')).toMatchObject({ open: false, why: 'paused' });
    expect(gate('z')).toEqual({ open: true });
    expect(gate('not named')).toEqual({ open: true });
    // Unreadable windows mid-pass: nothing starts, and it says why.
    expect(gateFor(() => [set('d', ['w'], { [WINDOWS_ANNOTATION]: 'soon' })])('w')).toMatchObject({ open: false, note: expect.stringContaining('bad window "soon"') });
  });

  it('names the sets whose images are held back, and the lowest cap', () => {
    const sets = [set('a', ['x']), set('b', ['y'], { [LINK_RATE_ANNOTATION]: '2000' }), set('c', ['z'], { [LINK_RATE_ANNOTATION]: '1000' })];
    expect(Object.fromEntries(waitingSets(sets, new Map([['y', { note: 'paused until 22:00 UTC' }]])))).toEqual({ b: 'paused until 22:00 UTC' });
    expect(rateOf(sets)).toEqual({ linkRate: 1000 });
    expect(rateOf([set('a', ['x'])])).toEqual({});
  });
});
