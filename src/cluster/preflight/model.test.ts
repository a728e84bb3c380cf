import { describe, expect, it } from 'vitest';
import { checkDisk } from '../../agent/disk.js';
import type { SizeResult } from '../../agent/image-sizes.js';
import { nodeFigures, type ModelImage, type ModelNode, type ModelSet } from './model.js';

const digest = (n: number) => `sha256:${n.toString(16).padStart(64, '0')}`;
const KiB = 1024;
/** Layer n: n KiB compressed, 3n KiB on disk. */
const layer = (n: number) => ({ digest: digest(1000 + n), compressedBytes: n * KiB, diskBytes: 3 * n * KiB });
const image = (n: number, layers: number[], repository = 'quay.io/o/art'): ModelImage => ({ pullSpec: `${repository}@${digest(n)}`, digest: digest(n), config: { digest: digest(5000 + n), size: 100 }, layers: layers.map(layer) });
const GiB = 2 ** 30;

describe('nodeFigures', () => {
  // A base (layers 1, 2) under two components; a third only for the control plane.
  const a = image(1, [1, 2, 10]);
  const b = image(2, [1, 2, 20]);
  const c = image(3, [1, 2, 30]);
  const sets: ModelSet[] = [
    { name: 'cp', images: [a.pullSpec, b.pullSpec, c.pullSpec] },
    { name: 'worker', images: [a.pullSpec, b.pullSpec] },
  ];
  const node = (name: string, held: string[], storage: ModelNode['storage'] = { rule: 'agent', freeBytes: 100 * GiB, reserveBytes: 16 * GiB }, nodeSets = ['worker']): ModelNode => ({ name, sets: nodeSets, held, heldFrom: 'agent', storage });

  it('fetches each blob a node lacks once, a layer shared by two images or two sets once per node', () => {
    const { nodes, fetchBytes, linkBytes } = nodeFigures({ images: [a, b, c], sets, nodes: [node('w0', []), node('m0', [], undefined, ['cp', 'worker'])], heldLayers: new Map() });
    const w0 = nodes.find((n) => n.node === 'w0')!;
    expect(w0.fetchBytes).toBe((1 + 2 + 10 + 20) * KiB + 2 * 100);
    expect(w0.writeBytes).toBe((1 + 2 + 10 + 20) * 3 * KiB);
    const m0 = nodes.find((n) => n.node === 'm0')!;
    // Both sets on one node: the worker set's images are the control plane's too.
    expect(m0.fetchBytes).toBe((1 + 2 + 10 + 20 + 30) * KiB + 3 * 100);
    expect(m0.sets.map((s) => [s.set, s.fetchBytes])).toEqual([['cp', (1 + 2 + 10 + 20 + 30) * KiB + 300], ['worker', (1 + 2 + 10 + 20) * KiB + 200]]);
    // Without a cache every node fetches over the link.
    expect(linkBytes).toBe(fetchBytes);
    expect(fetchBytes).toBe(w0.fetchBytes + m0.fetchBytes);
  });

  it('counts what the node stores: a stored image nothing, a blob stored under another image not fetched, but written again over another base', () => {
    // The node stores a (so layers 1, 2, 10 under their own chain) and an image x whose top layer is b's over another base.
    const x = image(9, [7, 20]);
    const { nodes } = nodeFigures({ images: [a, b, c], sets, nodes: [node('w0', [a.digest, x.digest])], heldLayers: new Map([[x.digest, x.layers.map((l) => l.digest)]]) });
    const [w0] = nodes;
    expect(w0!.present).toBe(1);
    // b: its config only (layers 1 and 2 are a's, 20 is x's blob).
    expect(w0!.fetchBytes).toBe(100);
    // Layer 20 lies on 1, 2 in b but on 7 in x: another chain, written again.
    expect(w0!.writeBytes).toBe(20 * 3 * KiB);
  });

  it('through the cache: each blob crosses the link once per repository, less what the cache holds', () => {
    const other = image(4, [1, 2, 40], 'quay.io/o/other');
    const allSets: ModelSet[] = [{ name: 'worker', images: [a.pullSpec, b.pullSpec, other.pullSpec] }];
    const nodes = [node('w0', []), node('w1', []), node('w2', [a.digest])];
    const { linkBytes, fetchBytes } = nodeFigures({ images: [a, b, other], sets: allSets, nodes, heldLayers: new Map(), cache: { images: new Set([b.digest]) } });
    // b's blobs in quay.io/o/art are held: a's layer 10 and config cross once. other's base (1, 2)
    // a node took with a already (its store reuses a blob by digest), so only its own layer and config.
    expect(linkBytes).toBe(10 * KiB + 100 + 40 * KiB + 100);
    expect(fetchBytes).toBeGreaterThan(2 * linkBytes);
  });

  it("refuses by the agent's rule as agent/disk.ts decides, naming the node and the shortfall", () => {
    const small = node('w9', [], { rule: 'agent', freeBytes: 16 * GiB + 90 * KiB, reserveBytes: 16 * GiB });
    const { nodes, fetchBytes, linkBytes } = nodeFigures({ images: [a, b, c], sets, nodes: [small], heldLayers: new Map() });
    expect(nodes[0]!.verdict).toBe('NO-GO');
    // The node would fetch it all, but a refused set pulls nothing: nothing crosses the link.
    expect([fetchBytes > 0, linkBytes]).toEqual([true, 0]);
    expect(nodes[0]!.reasons).toHaveLength(1);
    expect(nodes[0]!.reasons[0]).toMatch(/^w9: worker does not fit: needs 99(\.0)? KiB of new layers, 90(\.0)? KiB left .* short by /);
  });

  it('agrees with the agent\'s own disk check on which sets fit, over many random nodes', () => {
    let seed = 7;
    const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const images = Array.from({ length: 12 }, (_, i) => image(100 + i, Array.from({ length: 1 + random(4) }, () => 1 + random(8))));
    for (let round = 0; round < 200; round++) {
      const setList: ModelSet[] = Array.from({ length: 1 + random(3) }, (_, i) => ({ name: `s${i}`, images: [...new Set(Array.from({ length: 1 + random(5) }, () => images[random(images.length)]!.pullSpec))] }));
      const held = images.filter(() => random(4) === 0);
      const freeBytes = random(120) * KiB;
      const reserveBytes = random(20) * KiB;
      const [result] = nodeFigures({ images, sets: setList, nodes: [{ name: 'n', sets: setList.map((s) => s.name), held: held.map((i) => i.digest), heldFrom: 'agent', storage: { rule: 'agent', freeBytes, reserveBytes } }], heldLayers: new Map() }).nodes;
      const sizes = new Map<string, SizeResult>(images.map((i) => [i.pullSpec, { layers: i.layers.map((l) => ({ digest: l.digest, diskBytes: l.diskBytes, exact: true })), from: i.pullSpec }]));
      const agent = checkDisk({ sets: setList, present: new Set(held.map((i) => i.pullSpec)), sizes, freeBytes, reserveBytes });
      expect(result!.sets.filter((s) => s.refused).map((s) => s.set)).toEqual([...agent.failures.keys()]);
    }
  });

  it("refuses by MCO's rule: 2 x the compressed layers of the images not on the node, below allocatable less 16 GiB", () => {
    const mco = (allocatableBytes: number) => node('w0', [a.digest], { rule: 'mco', allocatableBytes });
    // b's layers (a's are on the node, but MCO counts every layer of an image not present): 1 + 2 + 20 KiB.
    const fits = nodeFigures({ images: [a, b, c], sets, nodes: [mco(16 * GiB + 47 * KiB)], heldLayers: new Map() }).nodes[0]!;
    expect([fits.verdict, fits.storage.neededBytes]).toEqual(['GO', 2 * 23 * KiB]);
    const refused = nodeFigures({ images: [a, b, c], sets, nodes: [mco(16 * GiB + 46 * KiB)], heldLayers: new Map() }).nodes[0]!;
    expect(refused.reasons[0]).toMatch(/^w0: worker is refused by MCO's disk check: 2 x 23(\.0)? KiB compressed = 46(\.0)? KiB, not below 16\.0 GiB allocatable - 16 GiB/);
  });
});
