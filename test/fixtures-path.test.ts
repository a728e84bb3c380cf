/**
 * The multi-hop release path and its update graph: determinism, the first release being the
 * 4.16.3 fixture release, how much consecutive releases share, and the graph's edge shapes.
 */
import yaml from 'js-yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { COMPONENTS } from '../fixtures/components.js';
import { CHANNELS, PREVIOUS, VERSION } from '../fixtures/release-image.js';
import { PATH_VERSIONS, buildReleasePath, compareVersions, parseVersion, type ReleasePathFixture } from '../fixtures/release-path.js';
import { GRAPH_SHAPES, METADATA_KEYS, buildUpdateGraph, graphDataTree, graphOnlyVersions, knownChannels, type CincinnatiGraph } from '../fixtures/update-graph.js';

let path: ReleasePathFixture;
let buildMs: number;

beforeAll(() => {
  const started = Date.now();
  path = buildReleasePath();
  buildMs = Date.now() - started;
});

const release = (version: string) => path.truth.releases.find((r) => r.version === version)!;
const digestOf = (version: string, name: string): string => release(version).components.find((c) => c.name === name)!.digest;
const NODE_OS = COMPONENTS.filter((c) => c.placement.how === 'node-os').map((c) => c.name);

interface ImageManifest {
  readonly config: { readonly digest: string; readonly size: number };
  readonly layers: readonly { readonly digest: string; readonly size: number }[];
}
const manifestOf = (digest: string): ImageManifest => {
  const found = path.repositories.flatMap((r) => r.manifests).find((m) => m.digest === digest);
  if (!found) throw new Error(`no manifest ${digest}`);
  return JSON.parse(found.bytes.toString()) as ImageManifest;
};

describe('buildReleasePath', () => {
  it('is deterministic', () => {
    const again = buildReleasePath();
    expect(again.truth).toEqual(path.truth);
    expect([...again.blobs.keys()].sort()).toEqual([...path.blobs.keys()].sort());
  });

  // The digest test/fixtures.test.ts pins for buildReleaseFixture's 4.16.3 release (and the README
  // quotes). Building that fixture here too would cost ~4 s; the release digest covers every
  // component digest anyway (image-references is in its last layer).
  it('starts with the 4.16.3 release of buildReleaseFixture, digest for digest', () => {
    const first = path.truth.releases[0]!;
    expect(first.version).toBe(VERSION);
    expect(first.digest).toBe('sha256:0cf6405341bcfe4e84d4f529aa78d245305bbdc6af98db69e722a08010856331');
    expect(first.previous).toEqual(PREVIOUS);
    expect(first.channels).toEqual(CHANNELS);
    expect(first.components.map((c) => c.name)).toEqual(COMPONENTS.map((c) => c.name));
    expect(first.components.find((c) => c.name === 'cli')!.names).toEqual(['cli', 'oc']);
  });

  it('tags every release x86_64 in the release repository, components in the art repository', () => {
    const repos = new Map(path.repositories.map((r) => [r.name, r]));
    const releases = repos.get(path.truth.releaseRepository)!;
    expect(releases.tags.map((t) => t.tag).sort()).toEqual(PATH_VERSIONS.map((v) => `${v}-x86_64`).sort());
    for (const r of path.truth.releases) {
      expect(releases.tags.find((t) => t.tag === r.tag)!.digest).toBe(r.digest);
      expect(r.pullSpec).toBe(`quay.io/openshift-release-dev/ocp-release:${r.version}-x86_64`);
      expect(r.components).toHaveLength(COMPONENTS.length);
    }
    const art = new Set(repos.get(path.truth.componentRepository)!.blobs);
    for (const digest of art) expect(path.blobs.has(digest)).toBe(true);
  });

  it('rebuilds about 10 % on a z-stream hop, 30 % on a minor hop, and the node OS on every hop', () => {
    const others = COMPONENTS.length - NODE_OS.length;
    for (let i = 1; i < PATH_VERSIONS.length; i++) {
      const r = path.truth.releases[i]!;
      const minorHop = parseVersion(PATH_VERSIONS[i - 1]!).minor !== parseVersion(r.version).minor;
      expect(r.rebuilt.length).toBeGreaterThan(NODE_OS.length);
      expect(r.rebuilt).toEqual(expect.arrayContaining(NODE_OS));
      const share = (r.rebuilt.length - NODE_OS.length) / others;
      const [low, high] = minorHop ? [0.2, 0.4] : [0.04, 0.2];
      expect(share, r.version).toBeGreaterThan(low);
      expect(share, r.version).toBeLessThan(high);
    }
    expect(path.truth.releases[0]!.rebuilt).toEqual([]);
  });

  it('keeps the digest of every component not rebuilt, and the shared layers of the rebuilt', () => {
    for (let i = 1; i < PATH_VERSIONS.length; i++) {
      const [before, now] = [PATH_VERSIONS[i - 1]!, PATH_VERSIONS[i]!];
      const rebuilt = new Set(release(now).rebuilt);
      for (const c of COMPONENTS) {
        if (!rebuilt.has(c.name)) {
          expect(digestOf(now, c.name), `${c.name} in ${now}`).toBe(digestOf(before, c.name));
          continue;
        }
        expect(digestOf(now, c.name)).not.toBe(digestOf(before, c.name));
        const [a, b] = [manifestOf(digestOf(before, c.name)), manifestOf(digestOf(now, c.name))];
        expect(b.layers).toHaveLength(a.layers.length);
        const changed = b.layers.flatMap((l, k) => (l.digest === a.layers[k]!.digest ? [] : [k]));
        expect(changed.length).toBeGreaterThan(0);
        // Only the last layers change, each to one of a similar size.
        expect(changed.at(-1)).toBe(b.layers.length - 1);
        for (const k of changed) {
          const ratio = b.layers[k]!.size / a.layers[k]!.size;
          expect(ratio, `${c.name} layer ${k} in ${now}`).toBeGreaterThan(0.75);
          expect(ratio, `${c.name} layer ${k} in ${now}`).toBeLessThan(1.33);
        }
      }
      // The alias follows its target.
      expect(release(now).components.find((c) => c.name === 'rhel-coreos')!.names).toEqual(['rhel-coreos', 'rhel-coreos-9']);
    }
  });

  it('names each release its minor channels, earlier versions as previous, an errata URL', () => {
    expect(release('4.17.5').channels).toEqual(['candidate-4.17', 'fast-4.17', 'stable-4.17']);
    expect(release('4.18.2').channels).toEqual(['candidate-4.18', 'eus-4.18', 'fast-4.18', 'stable-4.18']);
    expect(release('4.18.2').previous).toEqual(expect.arrayContaining(['4.16.3', '4.17.5']));
    for (const r of path.truth.releases) expect(r.url).toMatch(/^https:\/\/access\.redhat\.com\/errata\/RH[BS]A-\d{4}:\d{4}$/);
  });

  it('shares layers as consecutive releases do', () => {
    const one = path.truth.releases[0]!.layerBytes.compressed;
    const union = path.truth.unionCompressedBytes;
    const hops = new Map<string, number>();
    for (const r of path.truth.releases.slice(1)) {
      for (const digest of [r.digest, ...r.components.map((c) => c.digest)]) {
        const m = manifestOf(digest);
        for (const blob of [m.config, ...m.layers]) hops.set(blob.digest, blob.size);
      }
    }
    const hopUnion = [...hops.values()].reduce((a, b) => a + b, 0);
    console.log(`release path: one release ${one} B, union of ${PATH_VERSIONS.length} ${union} B (${(union / one).toFixed(3)}x), ` +
      `union of the ${PATH_VERSIONS.length - 1} after the first ${hopUnion} B (${(hopUnion / one).toFixed(3)}x), built in ${buildMs} ms`);
    for (const r of path.truth.releases) expect(Math.abs(r.layerBytes.compressed / one - 1)).toBeLessThan(0.05);
    expect(union / one).toBeLessThan(1.5);
    expect(hopUnion / one).toBeLessThanOrEqual(1.3);
  });
});

describe('buildUpdateGraph', () => {
  let graph: CincinnatiGraph;
  beforeAll(() => {
    graph = buildUpdateGraph(path, 'stable-4.18');
  });

  const edgeList = (g: CincinnatiGraph): string[] => g.edges.map(([a, b]) => `${g.nodes[a]!.version}>${g.nodes[b]!.version}`);
  const conditionalList = (g: CincinnatiGraph): string[] => g.conditionalEdges.flatMap((c) => c.edges.map((e) => `${e.from}>${e.to}`));

  it('has every path and graph-only release as a node, with its payload and metadata', () => {
    expect(graph.nodes.map((n) => n.version)).toEqual([...PATH_VERSIONS, ...graphOnlyVersions].sort(compareVersions));
    for (const node of graph.nodes) {
      const built = path.truth.releases.find((r) => r.version === node.version);
      expect(node.payload).toMatch(/^quay\.io\/openshift-release-dev\/ocp-release@sha256:[0-9a-f]{64}$/);
      expect(node.payload.endsWith(`@${node.metadata[METADATA_KEYS.manifestRef]}`)).toBe(true);
      if (built) expect(node.metadata[METADATA_KEYS.manifestRef]).toBe(built.digest);
      expect(node.metadata[METADATA_KEYS.channels]!.split(',')).toContain('stable-4.18');
      expect(node.metadata[METADATA_KEYS.url]).toMatch(/^https:\/\//);
    }
  });

  for (const channel of ['stable-4.18', 'eus-4.18']) {
    it(`has the documented edge shapes in ${channel}`, () => {
      const g = buildUpdateGraph(path, channel);
      const [edges, conditional] = [edgeList(g), conditionalList(g)];
      for (const [from, to] of [...GRAPH_SHAPES.recommended, ...GRAPH_SHAPES.refusedByCvo]) expect(edges).toContain(`${from}>${to}`);
      for (const [from, to] of GRAPH_SHAPES.conditional) {
        expect(conditional).toContain(`${from}>${to}`);
        expect(edges).not.toContain(`${from}>${to}`);
      }
      for (const [from, to] of GRAPH_SHAPES.removed) expect([...edges, ...conditional]).not.toContain(`${from}>${to}`);
      for (const [a, b] of g.edges) expect(g.nodes[a] && g.nodes[b]).toBeTruthy();
    });
  }

  it('puts a PromQL risk on 4.16.3 → 4.17.2 and an Always risk on 4.17.5 → 4.17.7', () => {
    const risksOf = (from: string, to: string) => graph.conditionalEdges.find((c) => c.edges.some((e) => e.from === from && e.to === to))!.risks;
    expect(risksOf('4.16.3', '4.17.2')[0]!.matchingRules[0]!.type).toBe('PromQL');
    expect(risksOf('4.17.5', '4.17.7')[0]!.matchingRules).toEqual([{ type: 'Always' }]);
  });

  it('leads from 4.16.3 to 4.18.2 in 3 CVO-acceptable recommended hops, the newest being PATH_VERSIONS; 2 with risks', () => {
    const recommended = edgeList(graph).map((e) => e.split('>') as [string, string]);
    const risky = conditionalList(graph).map((e) => e.split('>') as [string, string]);
    const shortest = shortestPaths(recommended, '4.16.3', '4.18.2');
    expect(shortest.map((p) => p.join(' '))).toEqual(['4.16.3 4.16.8 4.17.2 4.18.2', '4.16.3 4.16.8 4.17.5 4.18.2']);
    expect(shortest.at(-1)).toEqual(PATH_VERSIONS);
    expect(shortestPaths([...recommended, ...risky], '4.16.3', '4.18.2')).toEqual([['4.16.3', '4.17.2', '4.18.2']]);
  });

  it('filters by channel membership', () => {
    expect(knownChannels()).toEqual(expect.arrayContaining(['stable-4.16', 'fast-4.17', 'eus-4.18']));
    expect(knownChannels()).not.toContain('eus-4.17');
    expect(buildUpdateGraph(path, 'stable-4.16').nodes.map((n) => n.version)).toEqual(['4.16.2', '4.16.3', '4.16.5', '4.16.8']);
    expect(buildUpdateGraph(path, 'stable-4.17').nodes.map((n) => n.version)).not.toContain('4.18.2');
    const channels = graph.nodes.find((n) => n.version === '4.17.5')!.metadata[METADATA_KEYS.channels]!.split(',');
    expect(channels).toEqual(['candidate-4.17', 'candidate-4.18', 'eus-4.18', 'fast-4.17', 'fast-4.18', 'stable-4.17', 'stable-4.18']);
    expect(() => buildUpdateGraph(path, 'stable-4.99')).toThrow(/no channel stable-4.99/);
  });

  it('comes with the graph-data files it derives from', () => {
    const tree = graphDataTree('stable-4.18');
    const channel = yaml.load(tree.get('channels/stable-4.18.yaml')!) as { name: string; versions: string[] };
    expect(channel).toEqual({ name: 'stable-4.18', versions: graph.nodes.map((n) => n.version) });
    const blocked = [...tree].filter(([p]) => p.startsWith('blocked-edges/')).map(([, text]) => yaml.load(text) as Record<string, unknown>);
    expect(blocked.filter((b) => b.matchingRules)).toHaveLength(2);
    expect(blocked.find((b) => !b.matchingRules)).toEqual({ to: '4.17.2', from: '4\\.16\\.5' });
    expect(tree.get('version')).toMatch(/^\d+\.\d+\.\d+\n$/);
  });
});

/** Every shortest path over edges, skipping hops across more than one minor (the CVO refuses them). */
function shortestPaths(edges: readonly (readonly [string, string])[], from: string, to: string): string[][] {
  const acceptable = edges.filter(([a, b]) => parseVersion(b).minor - parseVersion(a).minor <= 1);
  let frontier: string[][] = [[from]];
  while (frontier.length > 0) {
    const done = frontier.filter((p) => p.at(-1) === to);
    if (done.length > 0) return done.sort((a, b) => a.join(' ').localeCompare(b.join(' ')));
    frontier = frontier.flatMap((p) => acceptable.filter(([a, b]) => a === p.at(-1) && !p.includes(b)).map(([, b]) => [...p, b]));
  }
  return [];
}
