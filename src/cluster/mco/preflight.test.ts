import { describe, expect, it } from 'vitest';
import type { DesiredSet } from '../backend.js';
import { mcoCacheWarnings, mcoDiskRefusals, mcoImageCacheSize, MCO_STORAGE_RESERVE } from './preflight.js';

const GiB = 2 ** 30;
const set = (name: string, role: 'worker' | 'control-plane', images: number, mcoCheckBytes?: number): DesiredSet => ({
  name,
  role,
  labels: { 'machineconfiguration.openshift.io/role': role === 'worker' ? 'worker' : 'master' },
  annotations: {},
  images: Array.from({ length: images }, (_, i) => `quay.io/o/${name}@sha256:${i.toString(16).padStart(64, '0')}`),
  ...(mcoCheckBytes !== undefined ? { mcoCheckBytes } : {}),
});

describe('MCO preflight', () => {
  it('refuses a set whose 2 x compressed bytes reach allocatable - 16 GiB, per set and node, as MCO\'s disk check does', () => {
    const worker = set('w', 'worker', 3, 5 * GiB);
    const targets = new Map([['w', [{ node: 'big', allocatable: 100 * GiB }, { node: 'small', allocatable: 26 * GiB }, { node: 'edge', allocatable: MCO_STORAGE_RESERVE + 10 * GiB + 1 }, { node: 'unknown', allocatable: undefined }]]]);
    expect(mcoDiskRefusals([worker], targets)).toEqual(['w on small: 2 x 5.0 GiB compressed = 10.0 GiB, not below 26.0 GiB allocatable - 16 GiB']);
    // A set the plan did not size (hand-written manifests) is not judged.
    expect(mcoDiskRefusals([set('w', 'worker', 3)], targets)).toEqual([]);
  });
  it('knows the daemon\'s image cache per MCO version: 256 before 4.22, 1024 from it', () => {
    expect([mcoImageCacheSize('4.16.3'), mcoImageCacheSize('4.21.9'), mcoImageCacheSize('4.22.0'), mcoImageCacheSize('5.0.2'), mcoImageCacheSize(undefined)]).toEqual([256, 256, 1024, 1024, 256]);
  });
  it('warns when a pool\'s sets hold more images (with the sets) than that cache', () => {
    const sets = [set('cp', 'control-plane', 190), set('cp-2', 'control-plane', 70), set('w', 'worker', 60)];
    expect(mcoCacheWarnings(sets, '4.21.3')).toEqual(['pool master: its sets hold 260 images, more than MCO\'s image cache of 256 entries (MCO 4.21.3) holds with them: its daemon can requeue forever (OCPBUGS-77140); split the images over fewer at a time']);
    expect(mcoCacheWarnings(sets, '4.22.1')).toEqual([]);
  });
});
