/**
 * The update graph as an update service answers it (the Cincinnati JSON: `nodes`, `edges` by
 * index, `conditionalEdges` by version with their risks), checked as input from outside: bounded,
 * every field typed, every index in range, every version semver, every payload a digest
 * pullspec. What the CVO does with it is kept (FACTS §12, CVO pkg/cincinnati): an edge both
 * unconditional and conditional is conditional; a risk needs a matching rule it knows (Always,
 * PromQL), else the conditional edge is dropped; two conditional edges from one release to the
 * same target are both dropped.
 */
import semver from 'semver';
import { BadInputError } from '../errors.js';

/** Real channel graphs are 1-5 MB with a few thousand releases; far more is no graph. */
export const GRAPH_BOUNDS = {
  bytes: 32 * 1024 * 1024,
  nodes: 50_000,
  edges: 1_000_000,
  risksPerEdge: 64,
  text: 16 * 1024,
} as const;

export interface GraphRelease {
  readonly version: string;
  /** The release image by digest (`quay.io/openshift-release-dev/ocp-release@sha256:…`). */
  readonly payload: string;
  /** `io.openshift.upgrades.graph.release.channels`, split. */
  readonly channels: readonly string[];
  readonly url?: string;
}

export interface GraphRisk {
  readonly name: string;
  readonly message: string;
  readonly url?: string;
  /** `Always`, or `PromQL: <expression>`: which clusters the risk applies to. */
  readonly rules: readonly string[];
}

/** An edge by release index; `risks` present: conditional (not recommended until evaluated). */
export interface GraphEdge {
  readonly from: number;
  readonly to: number;
  readonly risks?: readonly GraphRisk[];
}

export interface UpdateGraph {
  /** Where it was read (a URL without credentials, a file). */
  readonly source: string;
  readonly channel?: string;
  readonly releases: readonly GraphRelease[];
  readonly edges: readonly GraphEdge[];
  /** What the CVO would drop or merge, said once each. */
  readonly notes: readonly string[];
}

const CHANNELS_KEY = 'io.openshift.upgrades.graph.release.channels';
const DIGEST_PULLSPEC = /^[a-z0-9.-]+(:[0-9]+)?(\/[a-z0-9._-]+)+@sha256:[a-f0-9]{64}$/;

/** Parse and check `text` read from `source`; any fault is one line naming the source. */
export function parseGraph(text: string, source: string, channel?: string): UpdateGraph {
  const fail = (what: string): never => {
    throw new BadInputError(`update graph ${source}: ${what}; not an update graph (check --graph, or ClusterVersion spec.upstream)`);
  };
  if (Buffer.byteLength(text) > GRAPH_BOUNDS.bytes) fail(`larger than ${GRAPH_BOUNDS.bytes} bytes`);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    fail('not JSON');
  }
  if (!isRecord(doc)) fail('not a JSON object');
  const body = doc as Record<string, unknown>;
  if (typeof body['kind'] === 'string' && typeof body['value'] === 'string' && !('nodes' in body)) fail(`the service answered an error: ${short(body['kind'])}: ${short(body['value'])}`);
  const nodes = body['nodes'];
  if (!Array.isArray(nodes)) fail('no nodes array');
  if ((nodes as unknown[]).length > GRAPH_BOUNDS.nodes) fail(`${(nodes as unknown[]).length} nodes, over the bound of ${GRAPH_BOUNDS.nodes}`);
  const releases = (nodes as unknown[]).map((node, i) => release(node, i, fail));
  const index = new Map<string, number>();
  releases.forEach((r, i) => {
    if (index.has(r.version)) fail(`release ${r.version} is listed twice (nodes ${index.get(r.version)} and ${i})`);
    index.set(r.version, i);
  });

  const rawEdges = body['edges'] ?? [];
  if (!Array.isArray(rawEdges)) fail('edges is not an array');
  const conditionalGroups = body['conditionalEdges'] ?? [];
  if (!Array.isArray(conditionalGroups)) fail('conditionalEdges is not an array');
  if ((rawEdges as unknown[]).length + (conditionalGroups as unknown[]).length > GRAPH_BOUNDS.edges) fail(`over ${GRAPH_BOUNDS.edges} edges`);
  const plain = new Map<string, GraphEdge>();
  (rawEdges as unknown[]).forEach((edge, i) => {
    if (!Array.isArray(edge) || edge.length !== 2 || !edge.every((n) => Number.isSafeInteger(n) && n >= 0 && n < releases.length)) fail(`edge ${i} is not a pair of node indices below ${releases.length}`);
    const [from, to] = edge as [number, number];
    if (from === to) fail(`edge ${i} goes from ${releases[from]!.version} to itself`);
    plain.set(`${from}>${to}`, { from, to });
  });

  const notes: string[] = [];
  const conditional = new Map<string, GraphEdge[]>();
  let count = 0;
  for (const [g, group] of (conditionalGroups as unknown[]).entries()) {
    if (!isRecord(group) || !Array.isArray(group['edges']) || !Array.isArray(group['risks'])) fail(`conditionalEdges[${g}] has no edges and risks arrays`);
    const risks = ((group as Record<string, unknown>)['risks'] as unknown[]).map((risk, r) => graphRisk(risk, `conditionalEdges[${g}].risks[${r}]`, fail));
    if (risks.length === 0 || risks.length > GRAPH_BOUNDS.risksPerEdge) fail(`conditionalEdges[${g}] names ${risks.length} risks (1 to ${GRAPH_BOUNDS.risksPerEdge})`);
    const known = risks.filter((risk) => risk.rules.length > 0);
    for (const [e, edge] of ((group as Record<string, unknown>)['edges'] as unknown[]).entries()) {
      if (++count > GRAPH_BOUNDS.edges) fail(`over ${GRAPH_BOUNDS.edges} edges`);
      if (!isRecord(edge) || typeof edge['from'] !== 'string' || typeof edge['to'] !== 'string') fail(`conditionalEdges[${g}].edges[${e}] has no from and to versions`);
      const { from: fromVersion, to: toVersion } = edge as { from: string; to: string };
      const from = index.get(fromVersion);
      const to = index.get(toVersion);
      // The CVO names such an edge an error for the cluster it concerns; for a path it is no edge.
      if (from === undefined || to === undefined) {
        notes.push(`conditional edge ${short(fromVersion)} -> ${short(toVersion)} names a release the graph does not hold: ignored`);
        continue;
      }
      if (known.length < risks.length) {
        notes.push(`conditional edge ${fromVersion} -> ${toVersion}: a risk has no matching rule the CVO knows (Always, PromQL): the CVO drops the edge, so does prestage`);
        continue;
      }
      const key = `${from}>${to}`;
      conditional.set(key, [...(conditional.get(key) ?? []), { from, to, risks }]);
    }
  }
  const edges: GraphEdge[] = [];
  for (const [key, edge] of plain) if (!conditional.has(key)) edges.push(edge);
  for (const [key, list] of conditional) {
    const [first] = list;
    if (list.length > 1) {
      notes.push(`${list.length} conditional edges ${releases[first!.from]!.version} -> ${releases[first!.to]!.version}: the CVO drops them all, so does prestage`);
      continue;
    }
    if (plain.has(key)) notes.push(`${releases[first!.from]!.version} -> ${releases[first!.to]!.version} is both an edge and a conditional edge: conditional, as the CVO prefers`);
    edges.push(first!);
  }
  edges.sort((a, b) => a.from - b.from || a.to - b.to);
  return { source, ...(channel !== undefined ? { channel } : {}), releases, edges, notes: [...new Set(notes)] };
}

function release(node: unknown, i: number, fail: (what: string) => never): GraphRelease {
  if (!isRecord(node)) fail(`node ${i} is not an object`);
  const { version, payload, metadata } = node as Record<string, unknown>;
  if (typeof version !== 'string' || version.length > 64 || !semver.valid(version)) fail(`node ${i} has no semver version (${short(String(version))})`);
  if (typeof payload !== 'string' || payload.length > 512 || !DIGEST_PULLSPEC.test(payload)) fail(`release ${version as string} has no payload pullspec by digest (${short(String(payload))})`);
  if (metadata !== undefined && !isRecord(metadata)) fail(`release ${version as string} has metadata that is not an object`);
  const meta = (metadata ?? {}) as Record<string, unknown>;
  const channels = typeof meta[CHANNELS_KEY] === 'string' ? (meta[CHANNELS_KEY] as string).split(',').map((c) => c.trim()).filter(Boolean) : [];
  const url = typeof meta['url'] === 'string' && meta['url'].length <= 2048 ? meta['url'] : undefined;
  return { version: version as string, payload: payload as string, channels, ...(url ? { url } : {}) };
}

function graphRisk(risk: unknown, where: string, fail: (what: string) => never): GraphRisk {
  if (!isRecord(risk)) fail(`${where} is not an object`);
  const { name, message, url, matchingRules } = risk as Record<string, unknown>;
  if (typeof name !== 'string' || !name) fail(`${where} has no name`);
  if (typeof message !== 'string') fail(`${where} (${short(name as string)}) has no message`);
  if (!Array.isArray(matchingRules)) fail(`${where} (${short(name as string)}) has no matchingRules array`);
  const rules = (matchingRules as unknown[]).flatMap((rule): string[] => {
    if (!isRecord(rule)) return [];
    if (rule['type'] === 'Always') return ['Always'];
    const promql = isRecord(rule['promql']) ? rule['promql']['promql'] : undefined;
    return rule['type'] === 'PromQL' && typeof promql === 'string' && promql.length > 0 ? [`PromQL: ${oneLine(promql)}`] : [];
  });
  return { name: clip(name as string), message: clip(oneLine(message as string)), ...(typeof url === 'string' && url.length <= 2048 ? { url } : {}), rules };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();
const clip = (text: string) => (text.length > GRAPH_BOUNDS.text ? `${text.slice(0, GRAPH_BOUNDS.text)}…` : text);
/** For an error line: printable, short. */
const short = (text: string) => JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
