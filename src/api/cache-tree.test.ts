import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { chooseLeaf, leafObjectName, MAX_CACHE_LEAVES, parseCacheLeaf, parseCacheLeaves } from './cache-tree.js';

const leaves = (count: number) => Array.from({ length: count }, (_, index) => ({ name: `leaf-${index}`, location: `10.0.0.${index + 10}:5000` }));

describe('the cache tree', () => {
  it('parses NAME=HOST[:PORT] and refuses the rest in one line naming the value', () => {
    expect(parseCacheLeaf('zone-a=10.0.0.7:5000')).toEqual({ name: 'zone-a', location: '10.0.0.7:5000' });
    expect(parseCacheLeaf('us-east-1a=[fd00::7]:5000')).toEqual({ name: 'us-east-1a', location: '[fd00::7]:5000' });
    for (const bad of ['zone-a', '=10.0.0.7:5000', 'zone a=10.0.0.7', 'zone-a=http://x:5000', 'zone-a=x:5000/path', 'a=b=c']) {
      expect(() => parseCacheLeaf(bad)).toThrow(BadInputError);
      expect(() => parseCacheLeaf(bad)).toThrow(/^--cache-leaf .*expected NAME=HOST\[:PORT\], e\.g\. zone-a=10\.0\.0\.7:5000$/);
    }
    expect(() => parseCacheLeaves(['a=x:1', 'a=y:2'])).toThrow('--cache-leaf names a twice');
    expect(() => parseCacheLeaves(Array.from({ length: MAX_CACHE_LEAVES + 1 }, (_, i) => `l${i}=h:1`))).toThrow(`at most ${MAX_CACHE_LEAVES} leaves`);
  });

  it('by label: the leaf named by the node\'s value, else none (the root)', () => {
    const tree = [{ name: 'zone-a', location: 'a:5000' }, { name: 'zone-b', location: 'b:5000' }];
    const label = 'topology.kubernetes.io/zone';
    expect(chooseLeaf({ name: 'n1', labels: { [label]: 'zone-b' } }, tree, label)?.location).toBe('b:5000');
    expect(chooseLeaf({ name: 'n1', labels: { [label]: 'zone-c' } }, tree, label)).toBeUndefined();
    expect(chooseLeaf({ name: 'n1', labels: {} }, tree, label)).toBeUndefined();
    expect(chooseLeaf({ name: 'n1' }, [], undefined)).toBeUndefined();
  });

  it('by rendezvous hashing: spread over the leaves, and a leaf added moves only the nodes it takes', () => {
    const nodes = Array.from({ length: 1000 }, (_, index) => ({ name: `node-${index}` }));
    const before = nodes.map((node) => chooseLeaf(node, leaves(4))!.name);
    const counts = new Map<string, number>();
    for (const name of before) counts.set(name, (counts.get(name) ?? 0) + 1);
    expect(counts.size).toBe(4);
    for (const count of counts.values()) expect(count).toBeGreaterThan(180);
    const after = nodes.map((node) => chooseLeaf(node, leaves(5))!.name);
    const moved = after.filter((name, index) => name !== before[index]);
    expect(moved.every((name) => name === 'leaf-4')).toBe(true);
    expect(moved.length).toBeGreaterThan(120);
    expect(moved.length).toBeLessThan(280);
  });

  it('names leaf objects as Kubernetes names', () => {
    expect(leafObjectName('prestage-cache', 'zone-a')).toBe('prestage-cache-leaf-zone-a');
    expect(leafObjectName('prestage-cache', 'US_East.1a')).toMatch(/^prestage-cache-leaf-us-east-1a-[0-9a-f]{6}$/);
    expect(leafObjectName('prestage-cache', 'US_East.1a')).not.toBe(leafObjectName('prestage-cache', 'us-east-1a'));
  });
});
