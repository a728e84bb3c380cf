import { describe, expect, it } from 'vitest';
import { assemblePath, pathNodeBytes, type PathInput, type PlannedHop } from './path-plan.js';
import type { Plan, PlannedImage, PlannedSet } from './types.js';

const layer = (digest: string, compressedBytes: number) => ({ digest, mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', compressedBytes, diskBytes: compressedBytes * 2, method: 'gzip-isize' as const });
function image(name: string, layers: Array<[string, number]>, role: PlannedImage['role'] = 'all'): PlannedImage {
  return {
    name, names: [name], pullSpec: `quay.io/x/${name}@sha256:${name.padEnd(64, '0')}`, digest: `sha256:${name.padEnd(64, '0')}`, source: 'component', role, evidence: [],
    compressedBytes: 0, diskBytes: 0, sizeMethod: 'gzip-isize', config: { digest: `sha256:c${name.padEnd(63, '0')}`, size: 10 }, layers: layers.map(([d, n]) => layer(d, n)),
  };
}
function plan(version: string, images: PlannedImage[]): Plan {
  const set = (role: 'control-plane' | 'worker'): PlannedSet => ({ name: `prestage-${version}-${role}`, role, labels: {}, images: images.filter((i) => i.role === 'all' || i.role === role).map((i) => i.pullSpec), compressedBytes: 0, diskBytes: 0, estimate: { method: 'exact', exactLayers: 1, estimatedLayers: 0 } });
  return { images, sets: [set('control-plane'), set('worker')], warnings: [`w ${version}`, 'same'], nodes: [{ role: 'worker', nodes: ['w1'], sets: [], diskBytes: 0, heldDiskBytes: 0, newDiskBytes: 0, newCompressedBytes: 0 }] } as unknown as Plan;
}
const input: PathInput = { from: '4.16.3', to: '4.17.5', graph: 'g', controlPlaneOnly: false, hops: [], refused: [], equallyShort: 1, notes: ['note'] };
const hop = (from: string, to: string, p: Plan): PlannedHop => ({ from, to, pullSpec: `r@${to}`, risks: [], why: 'w', workersPaused: false, plan: p });

describe('assemblePath', () => {
  it('counts a layer shared between hops once per node, and says what each hop adds', () => {
    const base: [string, number] = ['base', 1000];
    const hops = [
      hop('4.16.3', '4.16.8', plan('4.16.8', [image('a', [base, ['a1', 100]]), image('cp', [base, ['cp1', 50]], 'control-plane')])),
      hop('4.16.8', '4.17.5', plan('4.17.5', [image('b', [base, ['a1', 100], ['b2', 30]]), image('cp', [base, ['cp1', 50]], 'control-plane')])),
    ];
    const path = assemblePath(input, hops);
    const worker = path.union.perNode.find((t) => t.role === 'worker')!;
    expect(worker.sets).toEqual(['prestage-4.16.8-worker', 'prestage-4.17.5-worker']);
    expect(worker.images).toBe(2);
    // base + a1 + b2, plus two configs of 10
    expect(worker.compressedBytes).toBe(1000 + 100 + 30 + 20);
    expect(worker.diskBytes).toBe((1000 + 100 + 30) * 2);
    expect(worker.perHop).toEqual([{ version: '4.16.8', newCompressedBytes: 1110, newDiskBytes: 2200 }, { version: '4.17.5', newCompressedBytes: 40, newDiskBytes: 60 }]);
    const cp = path.union.perNode.find((t) => t.role === 'control-plane')!;
    expect(cp.images).toBe(3);
    expect(path.union.compressedBytes).toBe(1000 + 100 + 30 + 50 + 30);
    expect(path.warnings).toEqual(['note', '4.16.8: w 4.16.8', '4.16.8, 4.17.5: same', '4.17.5: w 4.17.5']);
    expect(pathNodeBytes(path)).toEqual([{ role: 'worker', nodes: ['w1'], sets: worker.sets, diskBytes: worker.diskBytes, heldDiskBytes: 0, newDiskBytes: worker.diskBytes, newCompressedBytes: worker.compressedBytes }]);
  });
});
