import { describe, expect, it } from 'vitest';
import { chooseLeaf } from '../../api/cache-tree.js';
import { AGENT_PULL_SECONDS } from './eta.js';
import { DEFAULT_FANOUT, assignNodes, leafName, leavesFor, modelFanout, modelOneCache, nodeName, type FanoutParams } from './fanout.js';

const at = (nodes: number, leaves = leavesFor(nodes, 50), over: Partial<FanoutParams> = {}): FanoutParams => ({ ...DEFAULT_FANOUT, nodes, leaves, ...over });

describe('modelFanout', () => {
  it('sends the unique bytes over the link once, at every node count', () => {
    for (const n of [1, 10, 100, 1000, 5000]) {
      const r = modelFanout(at(n, leavesFor(n, 50, 64)));
      expect(r.bytes.link).toBe(DEFAULT_FANOUT.uniqueBytes);
      expect(r.linkRatio).toBe(1);
      expect(modelOneCache(at(n)).bytes.link).toBe(DEFAULT_FANOUT.uniqueBytes);
    }
  });

  it('has the leaves send U x L (their warm reads) plus N x a x W (their nodes)', () => {
    const p = at(1000, 20, { amplification: 2.67, nodeBytes: 4e9 });
    const r = modelFanout(p);
    expect(r.bytes.leaves).toHaveLength(20);
    expect(r.bytes.totalLeafEgress).toBeCloseTo(p.uniqueBytes * 20 + 1000 * 2.67 * 4e9, -3);
    expect(r.bytes.leaves.reduce((s, l) => s + l.egressBytes, 0)).toBeCloseTo(r.bytes.totalLeafEgress, -3);
    expect(r.bytes.rootEgress).toBe(p.uniqueBytes * 21);
    expect(r.busiestLeaf!.nodes).toBe(Math.max(...r.bytes.leaves.map((l) => l.nodes)));
  });

  it('stages 1000 nodes (20 leaves) in at most twice the time of 10 nodes (1 leaf)', () => {
    const ten = modelFanout(at(10));
    const thousand = modelFanout(at(1000));
    expect(ten.bytes.leaves).toHaveLength(1);
    expect(thousand.seconds.total).toBeLessThanOrEqual(2 * ten.seconds.total);
    expect(thousand.seconds.total).toBeGreaterThan(ten.seconds.total);
  });

  it('is much slower with one cache at 1000 nodes than with the tree', () => {
    const tree = modelFanout(at(1000));
    const one = modelOneCache(at(1000));
    expect(one.bytes.rootEgress).toBe(DEFAULT_FANOUT.uniqueBytes + 1000 * DEFAULT_FANOUT.nodeBytes);
    expect(one.seconds.leafWarm).toBe(0);
    expect(one.seconds.total).toBeGreaterThan(3 * tree.seconds.total);
  });

  it('sums its phases, and adds the pulls\' fixed cost over the concurrency', () => {
    const r = modelFanout(at(10));
    expect(r.seconds.total).toBeCloseTo(r.seconds.rootWarm + r.seconds.leafWarm + r.seconds.nodes, 6);
    expect(r.seconds.rootWarm).toBe(600);
    const a = modelFanout(at(10, 1, { pullSeconds: 0 })).seconds.nodes;
    expect(modelFanout(at(10, 1, { concurrency: 2, pullSeconds: 0 })).seconds.nodes).toBe(a);
    expect(r.seconds.nodes - a).toBeCloseTo(200 * AGENT_PULL_SECONDS, 6);
  });

  it('gives more bytes and time at a higher amplification', () => {
    const one = modelFanout(at(1000));
    const amp = modelFanout(at(1000, 20, { amplification: 2.67 }));
    expect(amp.seconds.nodes).toBeGreaterThan(one.seconds.nodes);
    expect(amp.bytes.totalLeafEgress).toBeGreaterThan(one.bytes.totalLeafEgress);
  });
});

describe('assignNodes', () => {
  it('sums to N and matches chooseLeaf node by node', () => {
    const counts = assignNodes(1000, 7);
    expect([...counts.values()].reduce((s, n) => s + n, 0)).toBe(1000);
    const leaves = Array.from({ length: 7 }, (_, i) => ({ name: leafName(i), location: 'x:5000' }));
    const expected = new Map<string, number>();
    for (let i = 0; i < 1000; i++) {
      const name = chooseLeaf({ name: nodeName(i) }, leaves)!.name;
      expected.set(name, (expected.get(name) ?? 0) + 1);
    }
    for (const [name, n] of counts) expect(n).toBe(expected.get(name) ?? 0);
    expect(modelFanout(at(1000, 7)).bytes.leaves.map((l) => l.nodes)).toEqual([...counts.values()]);
  });
});

describe('inputs', () => {
  it.each<[Partial<FanoutParams>, RegExp]>([
    [{ nodes: 0 }, /nodes/],
    [{ nodes: 1.5 }, /nodes must be an integer/],
    [{ leaves: -1 }, /leaves/],
    [{ uniqueBytes: 0 }, /uniqueBytes must be positive/],
    [{ linkBytesPerSecond: Infinity }, /linkBytesPerSecond must be a finite number/],
    [{ diskBytesPerSecond: Number.NaN }, /diskBytesPerSecond/],
    [{ amplification: 0.5 }, /amplification/],
    [{ concurrency: 0 }, /concurrency/],
    [{ pullSeconds: -1 }, /pullSeconds/],
    [{ nodeBytes: 7e9 }, /nodeBytes must not exceed uniqueBytes/],
  ])('throws for %o', (over, message) => {
    expect(() => modelFanout(at(10, 1, over))).toThrow(message);
  });
});
