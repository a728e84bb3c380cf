import { describe, expect, it } from 'vitest';
import { API_VERSION, type PinnedImageSet } from '../api/prestage.js';
import { isControlPlane, selectingSets, selectorMatches } from './selector.js';

describe('selectorMatches', () => {
  const labels = { 'node-role.kubernetes.io/worker': '', zone: 'a' };
  it('selects every node with an empty or absent selector', () => {
    expect(selectorMatches(undefined, labels)).toBe(true);
    expect(selectorMatches({}, labels)).toBe(true);
  });
  it('applies matchLabels and every matchExpressions operator', () => {
    expect(selectorMatches({ matchLabels: { zone: 'a' } }, labels)).toBe(true);
    expect(selectorMatches({ matchLabels: { zone: 'b' } }, labels)).toBe(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a', 'b'] }] }, labels)).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }, labels)).toBe(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'node-role.kubernetes.io/worker', operator: 'Exists' }] }, labels)).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'node-role.kubernetes.io/master', operator: 'DoesNotExist' }] }, labels)).toBe(true);
  });
  it('selects nothing with an operator it does not know', () => {
    expect(selectorMatches({ matchExpressions: [{ key: 'zone', operator: 'Gt', values: ['1'] }] }, labels)).toBe(false);
  });
});

describe('selectingSets', () => {
  const set = (name: string, selector?: PinnedImageSet['spec']['nodeSelector'], deleting = false): PinnedImageSet => ({
    apiVersion: API_VERSION,
    kind: 'PinnedImageSet',
    metadata: { name, ...(deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}) },
    spec: { pinnedImages: [], ...(selector ? { nodeSelector: selector } : {}) },
  });
  it('keeps the sets selecting the node and not being deleted, in name order', () => {
    const sets = [set('c'), set('a', { matchLabels: { zone: 'a' } }), set('b', { matchLabels: { zone: 'b' } }), set('d', undefined, true), set('b2')];
    expect(selectingSets(sets, { zone: 'a' }).map((entry) => entry.metadata.name)).toEqual(['a', 'b2', 'c']);
  });
});

describe('isControlPlane', () => {
  it('knows a control-plane node by either role label', () => {
    expect(isControlPlane({ 'node-role.kubernetes.io/control-plane': '' })).toBe(true);
    expect(isControlPlane({ 'node-role.kubernetes.io/master': '' })).toBe(true);
    expect(isControlPlane({ 'node-role.kubernetes.io/worker': '' })).toBe(false);
  });
});
