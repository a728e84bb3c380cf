import { expect, it } from 'vitest';
import { count, plural } from './plural.js';

it('says one thing as one and every other count as many', () => {
  expect(count(1, 'set')).toBe('1 set');
  expect(count(0, 'set')).toBe('0 sets');
  expect(count(2, 'attempt')).toBe('2 attempts');
  expect(count(1, 'entry', 'entries')).toBe('1 entry');
  expect(count(3, 'entry', 'entries')).toBe('3 entries');
  expect(plural(1, 'blob')).toBe('blob');
});
