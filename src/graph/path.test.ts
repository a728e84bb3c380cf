import { describe, expect, it } from 'vitest';
import type { GraphEdge, UpdateGraph } from './cincinnati.js';
import { choosePath, cvoRefuses, pathRiskLines } from './path.js';

/** A graph from `from>to` strings; `?` marks a conditional edge. */
function graph(versions: string[], edges: string[], channel = 'stable-4.18'): UpdateGraph {
  const at = (v: string) => versions.indexOf(v);
  return {
    source: 'test',
    channel,
    releases: versions.map((version, i) => ({ version, payload: `quay.io/r/r@sha256:${String(i).padStart(64, '0')}`, channels: [channel] })),
    edges: edges.map((e): GraphEdge => {
      const [from, to] = e.replace('?', '').split('>') as [string, string];
      return { from: at(from), to: at(to), ...(e.endsWith('?') ? { risks: [{ name: 'Risky', message: 'it breaks', rules: ['Always'] }] } : {}) };
    }),
    notes: [],
  };
}

const VERSIONS = ['4.16.3', '4.16.5', '4.16.8', '4.17.2', '4.17.5', '4.17.7', '4.18.2', '4.18.3'];
const EDGES = ['4.16.3>4.16.5', '4.16.3>4.16.8', '4.16.5>4.16.8', '4.16.3>4.17.2?', '4.16.8>4.17.2', '4.16.8>4.17.5', '4.17.2>4.17.5', '4.17.2>4.18.2', '4.17.5>4.18.2', '4.17.5>4.17.7?', '4.17.7>4.18.3', '4.16.3>4.18.2'];
const versionsOf = (path: ReturnType<typeof choosePath>) => [path.from, ...path.hops.map((h) => h.to.version)];
const base = { allowNotRecommended: false, controlPlaneOnly: false };

describe('choosePath', () => {
  it('takes the shortest chain of recommended edges the CVO accepts, through the newest releases', () => {
    const path = choosePath(graph(VERSIONS, EDGES), { ...base, from: '4.16.3', to: '4.18.2' });
    expect(versionsOf(path)).toEqual(['4.16.3', '4.16.8', '4.17.5', '4.18.2']);
    expect(path.equallyShort).toBe(2);
    expect(path.hops.map((h) => h.risks)).toEqual([[], [], []]);
    expect(path.hops[1]!.why).toBe('recommended edge; 1 hop from the target; newest of 2 releases on a shortest path');
    expect(path.refused).toEqual([
      { from: '4.16.3', to: '4.17.2', why: 'conditional, not recommended (Risky; --allow-not-recommended takes it)' },
      { from: '4.16.3', to: '4.18.2', why: '2 minors in one hop (the CVO accepts one: its GiantHop precondition)' },
      { from: '4.17.5', to: '4.17.7', why: 'conditional, not recommended (Risky; --allow-not-recommended takes it)' },
    ]);
  });

  it('takes a conditional edge only when allowed, and says each risk', () => {
    const path = choosePath(graph(VERSIONS, EDGES), { ...base, allowNotRecommended: true, from: '4.16.3', to: '4.18.2' });
    expect(versionsOf(path)).toEqual(['4.16.3', '4.17.2', '4.18.2']);
    expect(pathRiskLines(path)).toEqual(['4.16.3 -> 4.17.2 is not recommended: Risky: it breaks']);
  });

  it('refuses with exit 2 naming both versions and the channel when no path exists, and says when conditional edges would make one', () => {
    expect(() => choosePath(graph(VERSIONS, EDGES), { ...base, from: '4.16.3', to: '4.18.3' })).toThrow(
      'no update path from 4.16.3 to 4.18.3 in channel stable-4.18 of test that the CVO accepts (one minor at most per hop, recommended edges only); a path over conditional edges exists: --allow-not-recommended takes it (its risks are printed); choose another --to or --channel',
    );
    expect(() => choosePath(graph(['4.16.3', '4.18.2'], ['4.16.3>4.18.2']), { ...base, from: '4.16.3', to: '4.18.2' })).toThrow(/^no update path from 4.16.3 to 4.18.2 in channel stable-4.18/);
    expect(() => choosePath(graph(VERSIONS, EDGES), { ...base, from: '4.15.1', to: '4.18.2' })).toThrow('--from 4.15.1: not a release in channel stable-4.18 of test');
    expect(() => choosePath(graph(VERSIONS, EDGES), { ...base, from: '4.18.2', to: '4.18.2' })).toThrow(/already/);
  });

  it('a Control Plane Only update goes even minor to even minor and never leaves them', () => {
    const path = choosePath(graph([...VERSIONS, '4.19.1'], [...EDGES, '4.17.5>4.19.1']), { ...base, controlPlaneOnly: true, from: '4.16.3', to: '4.18.2' });
    expect(path.controlPlaneOnly).toBe(true);
    expect(versionsOf(path)).toEqual(['4.16.3', '4.16.8', '4.17.5', '4.18.2']);
    expect(() => choosePath(graph(VERSIONS, EDGES), { ...base, controlPlaneOnly: true, from: '4.17.2', to: '4.18.2' })).toThrow(/4.17 -> 4.18 is not a Control Plane Only update/);
    const fast = choosePath(graph(VERSIONS, EDGES, 'fast-4.18'), { ...base, controlPlaneOnly: true, from: '4.16.3', to: '4.18.2' });
    expect(fast.notes).toEqual(['a Control Plane Only update is supported once all its edges are in stable; fast-4.18 is not a stable or eus channel']);
  });
});

describe('cvoRefuses', () => {
  it('keeps the GiantHop and rollback rules', () => {
    expect(cvoRefuses('4.16.3', '4.17.0')).toBeUndefined();
    expect(cvoRefuses('4.16.3', '4.16.3')).toMatch(/not newer/);
    expect(cvoRefuses('4.16.3', '4.16.2')).toMatch(/not newer/);
    expect(cvoRefuses('4.16.3', '4.18.0')).toMatch(/2 minors/);
    expect(cvoRefuses('4.22.4', '5.0.1')).toBeUndefined();
    expect(cvoRefuses('4.22.4', '5.1.0')).toMatch(/major/);
  });
});
