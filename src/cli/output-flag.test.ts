import { expect, it } from 'vitest';
import { normalizeOutputFlag } from './output-flag.js';

it('splits the attached form kubectl users type', () => {
  expect(normalizeOutputFlag(['plan', 'R', '-oyaml'])).toEqual(['plan', 'R', '-o', 'yaml']);
  expect(normalizeOutputFlag(['status', '-o=json'])).toEqual(['status', '-o', 'json']);
});

it('keeps only the last output flag, whichever spelling, where the last one stood', () => {
  expect(normalizeOutputFlag(['plan', '-o', 'json', 'R', '-oyaml'])).toEqual(['plan', 'R', '-o', 'yaml']);
  expect(normalizeOutputFlag(['plan', '--output=wide', '-o', 'json', 'R'])).toEqual(['plan', '-o', 'json', 'R']);
  expect(normalizeOutputFlag(['plan', '-ojson', '--output', 'table'])).toEqual(['plan', '--output', 'table']);
});

it('leaves other flags, a trailing -o with no value and everything after -- alone', () => {
  expect(normalizeOutputFlag(['plan', '--output-dir', 'out', '-o'])).toEqual(['plan', '--output-dir', 'out', '-o']);
  expect(normalizeOutputFlag(['a', '-o', 'json', '--', '-o', 'yaml'])).toEqual(['a', '-o', 'json', '--', '-o', 'yaml']);
});
