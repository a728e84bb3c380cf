import { describe, expect, it } from 'vitest';
import { newBytesPerNode, type NodeHolding } from './held.js';
import type { PlannedImage, PlannedSet } from './types.js';

const digest = (n: number) => `sha256:${n.toString(16).padStart(64, '0')}`;
/** Layer n: n KiB compressed, 3n KiB on disk. */
const layer = (n: number) => ({ digest: digest(1000 + n), mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', compressedBytes: n * 1024, diskBytes: n * 3 * 1024, method: 'gzip-isize' as const });
const image = (n: number, layers: number[], role: PlannedImage['role'] = 'all'): PlannedImage => ({
  name: `c${n}`, names: [`c${n}`], pullSpec: `quay.io/o/art@${digest(n)}`, digest: digest(n), source: 'component', role, evidence: [],
  compressedBytes: 0, diskBytes: 0, sizeMethod: 'gzip-isize', config: { digest: digest(5000 + n), size: 100 }, layers: layers.map(layer),
});
const set = (role: PlannedSet['role'], images: PlannedImage[]): PlannedSet => ({
  name: `prestage-4.16.3-${role}`, role, labels: {}, images: images.map((i) => i.pullSpec), compressedBytes: 0, diskBytes: 0, estimate: { method: 'exact', exactLayers: 0, estimatedLayers: 0 },
});
const KiB = 1024;

describe('newBytesPerNode', () => {
  // Target: a base (layers 1, 2) under two components; one control-plane-only component.
  const a = image(1, [1, 2, 10]);
  const b = image(2, [1, 2, 20]);
  const cpOnly = image(3, [1, 2, 30], 'control-plane');
  const sets = [set('control-plane', [a, b, cpOnly]), set('worker', [a, b])];

  it('counts only the layers the node does not hold, and the configs of images it does not run', () => {
    // worker-0 runs the previous build of c1: same base, another top layer.
    const nodes: NodeHolding[] = [{ name: 'worker-0', role: 'worker', images: [digest(901)] }];
    const [row] = newBytesPerNode([a, b, cpOnly], sets, nodes, new Map([[digest(901), [digest(1001), digest(1002), digest(1099)]]]));
    expect(row).toEqual({
      role: 'worker', nodes: ['worker-0'], sets: ['prestage-4.16.3-worker'],
      diskBytes: (1 + 2 + 10 + 20) * 3 * KiB,
      heldDiskBytes: (1 + 2) * 3 * KiB,
      newDiskBytes: (10 + 20) * 3 * KiB,
      newCompressedBytes: (10 + 20) * KiB + 2 * 100,
    });
  });

  it('holds a layer only over the same layers below it, as containers/storage stores layers', () => {
    // The node holds layer 10 over another base: stored again under the new base.
    const nodes: NodeHolding[] = [{ name: 'worker-0', role: 'worker', images: [digest(902)] }];
    const [row] = newBytesPerNode([a, b], [set('worker', [a, b])], nodes, new Map([[digest(902), [digest(1007), digest(1010)]]]));
    expect(row!.heldDiskBytes).toBe(0);
    expect(row!.newDiskBytes).toBe((1 + 2 + 10 + 20) * 3 * KiB);
  });

  it('an image the node runs costs no download, and a node that runs nothing needs everything', () => {
    const nodes: NodeHolding[] = [
      { name: 'worker-1', role: 'worker', images: [a.digest, b.digest] },
      { name: 'worker-0', role: 'worker', images: [] },
    ];
    const rows = newBytesPerNode([a, b, cpOnly], sets, nodes, new Map([[a.digest, [digest(1001), digest(1002), digest(1010)]], [b.digest, [digest(1001), digest(1002), digest(1020)]]]));
    expect(rows.map((r) => [r.nodes, r.newDiskBytes, r.newCompressedBytes])).toEqual([
      [['worker-0'], (1 + 2 + 10 + 20) * 3 * KiB, (1 + 2 + 10 + 20) * KiB + 200],
      [['worker-1'], 0, 0],
    ]);
  });

  it('groups nodes with equal figures, control-plane first, and leaves out nodes no set targets', () => {
    const nodes: NodeHolding[] = ['worker-2', 'master-1', 'worker-0', 'master-0'].map((name) => ({ name, role: name.startsWith('master') ? 'control-plane' : 'worker', images: [] }));
    const rows = newBytesPerNode([a, b, cpOnly], sets, nodes, new Map());
    expect(rows.map((r) => [r.role, r.nodes, r.sets])).toEqual([
      ['control-plane', ['master-0', 'master-1'], ['prestage-4.16.3-control-plane']],
      ['worker', ['worker-0', 'worker-2'], ['prestage-4.16.3-worker']],
    ]);
    expect(rows[0]!.diskBytes).toBe((1 + 2 + 10 + 20 + 30) * 3 * KiB);
    expect(newBytesPerNode([a, b, cpOnly], [sets[0]!], nodes, new Map()).map((r) => r.role)).toEqual(['control-plane']);
  });
});
