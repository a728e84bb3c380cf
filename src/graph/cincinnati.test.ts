import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { GRAPH_BOUNDS, parseGraph } from './cincinnati.js';

const digest = (n: number) => `sha256:${n.toString(16).padStart(64, '0')}`;
const node = (version: string, n: number, channels = 'stable-4.17') => ({
  version,
  payload: `quay.io/openshift-release-dev/ocp-release@${digest(n)}`,
  metadata: { 'io.openshift.upgrades.graph.release.channels': channels, 'io.openshift.upgrades.graph.release.manifestref': digest(n), url: `https://access.redhat.com/errata/${n}` },
});
const risk = (name: string, rules: unknown[] = [{ type: 'Always' }]) => ({ name, message: `${name}\n happens`, url: `https://issues.redhat.com/${name}`, matchingRules: rules });

describe('parseGraph', () => {
  it('reads nodes, edges by index and conditional edges by version, as the CVO does', () => {
    const graph = parseGraph(JSON.stringify({
      nodes: [node('4.16.3', 1), node('4.16.8', 2), node('4.17.2', 3)],
      edges: [[0, 1], [1, 2], [0, 2]],
      conditionalEdges: [{ edges: [{ from: '4.16.3', to: '4.17.2' }], risks: [risk('A', [{ type: 'PromQL', promql: { promql: 'group(x)\n or y' } }])] }],
    }), 'graph.json', 'stable-4.17');
    expect(graph.releases.map((r) => r.version)).toEqual(['4.16.3', '4.16.8', '4.17.2']);
    expect(graph.releases[0]!.channels).toEqual(['stable-4.17']);
    expect(graph.edges).toEqual([
      { from: 0, to: 1 },
      { from: 0, to: 2, risks: [{ name: 'A', message: 'A happens', url: 'https://issues.redhat.com/A', rules: ['PromQL: group(x) or y'] }] },
      { from: 1, to: 2 },
    ]);
    expect(graph.notes).toEqual(['4.16.3 -> 4.17.2 is both an edge and a conditional edge: conditional, as the CVO prefers']);
  });

  it('drops what the CVO drops: a risk without a rule it knows, two conditional edges to one target', () => {
    const graph = parseGraph(JSON.stringify({
      nodes: [node('4.16.3', 1), node('4.16.8', 2), node('4.17.2', 3)],
      edges: [],
      conditionalEdges: [
        { edges: [{ from: '4.16.3', to: '4.16.8' }], risks: [risk('Unknown', [{ type: 'Metric' }])] },
        { edges: [{ from: '4.16.8', to: '4.17.2' }], risks: [risk('B')] },
        { edges: [{ from: '4.16.8', to: '4.17.2' }], risks: [risk('C')] },
        { edges: [{ from: '4.15.1', to: '4.17.2' }], risks: [risk('D')] },
      ],
    }), 'graph.json');
    expect(graph.edges).toEqual([]);
    expect(graph.notes).toHaveLength(3);
  });

  const refused: Array<[string, unknown, RegExp]> = [
    ['not JSON', '{', /not JSON/],
    ['an error answer', { kind: 'invalid_params', value: 'unknown channel' }, /answered an error: "invalid_params": "unknown channel"/],
    ['no nodes', { edges: [] }, /no nodes array/],
    ['a version that is not semver', { nodes: [{ ...node('4.16.3', 1), version: 'latest' }] }, /node 0 has no semver version/],
    ['a payload by tag', { nodes: [{ ...node('4.16.3', 1), payload: 'quay.io/x/y:4.16.3' }] }, /no payload pullspec by digest/],
    ['an index out of range', { nodes: [node('4.16.3', 1)], edges: [[0, 7]] }, /edge 0 is not a pair of node indices below 1/],
    ['an edge to itself', { nodes: [node('4.16.3', 1)], edges: [[0, 0]] }, /to itself/],
    ['a release twice', { nodes: [node('4.16.3', 1), node('4.16.3', 2)] }, /listed twice/],
    ['a risk without a name', { nodes: [node('4.16.3', 1)], conditionalEdges: [{ edges: [], risks: [{ message: 'm', matchingRules: [] }] }] }, /has no name/],
  ];
  it.each(refused)('refuses %s in one line naming the source', (_what, doc, message) => {
    const text = typeof doc === 'string' ? doc : JSON.stringify(doc);
    expect(() => parseGraph(text, 'https://updates.example/graph')).toThrow(BadInputError);
    expect(() => parseGraph(text, 'https://updates.example/graph')).toThrow(message);
    try {
      parseGraph(text, 'https://updates.example/graph');
    } catch (error) {
      expect((error as Error).message).toMatch(/^update graph https:\/\/updates\.example\/graph: /);
      expect((error as Error).message).not.toContain('\n');
    }
  });

  it('bounds the number of releases before reading them', () => {
    const nodes = Array.from({ length: GRAPH_BOUNDS.nodes + 1 }, (_, i) => ({ version: `4.16.${i}` }));
    expect(() => parseGraph(JSON.stringify({ nodes }), 'big.json')).toThrow(/50001 nodes, over the bound of 50000/);
  });
});
