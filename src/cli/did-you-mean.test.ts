import { expect, it } from 'vitest';
import { didYouMean, editDistance } from './did-you-mean.js';

it('counts edits, a swap of two neighbours as one', () => {
  expect(editDistance('plan', 'plan')).toBe(0);
  expect(editDistance('plna', 'plan')).toBe(1);
  expect(editDistance('stat', 'status')).toBe(2);
  expect(editDistance('', 'abc')).toBe(3);
});

it('names the closest command or flag, or none when nothing is close', () => {
  const commands = ['plan', 'bundle', 'status', 'stage', 'wait', 'verify', 'version'];
  expect(didYouMean('plna', commands)).toBe('plan');
  expect(didYouMean('stauts', commands)).toBe('status');
  expect(didYouMean('verison', commands)).toBe('version');
  expect(didYouMean('kubernetes', commands)).toBeUndefined();
  expect(didYouMean('regstry-config', ['registry-config', 'ca-file'])).toBe('registry-config');
  expect(didYouMean('registry', ['registry-config', 'ca-file'])).toBe('registry-config');
  expect(didYouMean('x', ['registry-config', 'ca-file'])).toBeUndefined();
});
