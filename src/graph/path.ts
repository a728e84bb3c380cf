/**
 * The path a cluster takes from one release to another over the update graph: a chain of edges
 * the CVO accepts one at a time (FACTS §12: no downgrade, at most one minor per hop, a major only
 * 4 -> 5.0, as its GiantHop precondition says), shortest, over recommended edges unless
 * conditional ones are allowed, and among equally short paths the one through the newest
 * releases (oc-mirror's shortestPath visits each release's targets newest first, which picks
 * the same chain). A Control Plane Only update (formerly EUS-to-EUS) goes from an even minor to
 * the next even one with the worker pools paused: they skip the odd minor's node OS.
 */
import semver from 'semver';
import { BadInputError } from '../errors.js';
import type { GraphEdge, GraphRelease, GraphRisk, UpdateGraph } from './cincinnati.js';

export interface PathHop {
  readonly from: GraphRelease;
  readonly to: GraphRelease;
  /** The risks taken (a conditional edge, --allow-not-recommended); empty: recommended. */
  readonly risks: readonly GraphRisk[];
  /** Why this edge (for -o wide). */
  readonly why: string;
}

/** An edge out of a release on the path that the path could not take, and why. */
export interface RefusedEdge {
  readonly from: string;
  readonly to: string;
  readonly why: string;
}

export interface UpgradePath {
  readonly source: string;
  readonly channel?: string;
  readonly from: string;
  readonly to: string;
  readonly hops: readonly PathHop[];
  /** Control Plane Only: every hop but the last runs with the worker pools paused. */
  readonly controlPlaneOnly: boolean;
  readonly refused: readonly RefusedEdge[];
  /** How many paths were as short (the chosen one among them). */
  readonly equallyShort: number;
  readonly notes: readonly string[];
}

export interface PathOptions {
  readonly from: string;
  readonly to: string;
  readonly allowNotRecommended: boolean;
  readonly controlPlaneOnly: boolean;
}

/** Why the CVO refuses `from -> to` on its own, whatever the graph says; undefined: it accepts it. */
export function cvoRefuses(from: string, to: string): string | undefined {
  const a = semver.parse(from)!;
  const b = semver.parse(to)!;
  if (semver.lte(to, from)) return `${to} is not newer than ${from} (the CVO does not roll back)`;
  if (b.major > a.major) return b.major === 5 && a.major === 4 && b.minor === 0 ? undefined : `a major update other than 4 -> 5.0 (the CVO's GiantHop precondition)`;
  if (b.minor > a.minor + 1) return `${b.minor - a.minor} minors in one hop (the CVO accepts one: its GiantHop precondition)`;
  return undefined;
}

const minorOf = (version: string) => `${semver.major(version)}.${semver.minor(version)}`;

export function choosePath(graph: UpdateGraph, opts: PathOptions): UpgradePath {
  const where = `channel ${graph.channel ?? '(none named)'} of ${graph.source}`;
  const index = new Map(graph.releases.map((r, i) => [r.version, i]));
  const start = index.get(opts.from);
  const end = index.get(opts.to);
  if (start === undefined) throw new BadInputError(`--from ${opts.from}: not a release in ${where}; name the version the cluster runs, or another --channel`);
  if (end === undefined) throw new BadInputError(`--to ${opts.to}: not a release in ${where}; name one of its releases, or another --channel`);
  if (start === end) throw new BadInputError(`--to ${opts.to}: the cluster is there already (--from ${opts.from}); name a newer release`);
  if (opts.controlPlaneOnly) checkControlPlaneOnly(opts.from, opts.to);

  const accepted = new Map<number, GraphEdge[]>();
  const refusedWhy = new Map<GraphEdge, string>();
  for (const edge of graph.edges) {
    const why = cvoRefuses(graph.releases[edge.from]!.version, graph.releases[edge.to]!.version)
      ?? (edge.risks && !opts.allowNotRecommended ? `conditional, not recommended (${edge.risks.map((r) => r.name).join(', ')}; --allow-not-recommended takes it)` : undefined)
      ?? (opts.controlPlaneOnly && !withinControlPlaneOnly(opts.from, opts.to, graph.releases[edge.to]!.version) ? 'leaves the minors of a Control Plane Only update' : undefined);
    if (why) refusedWhy.set(edge, why);
    else accepted.set(edge.from, [...(accepted.get(edge.from) ?? []), edge]);
  }
  // Hops to the target from every release that reaches it, over the edges taken.
  const incoming = new Map<number, GraphEdge[]>();
  for (const list of accepted.values()) for (const edge of list) incoming.set(edge.to, [...(incoming.get(edge.to) ?? []), edge]);
  const toEnd = new Map<number, number>([[end, 0]]);
  const ways = new Map<number, number>([[end, 1]]);
  for (let frontier = [end]; frontier.length > 0;) {
    const next: number[] = [];
    for (const node of frontier) {
      for (const edge of incoming.get(node) ?? []) {
        const d = toEnd.get(node)! + 1;
        if (!toEnd.has(edge.from)) {
          toEnd.set(edge.from, d);
          next.push(edge.from);
        }
        if (toEnd.get(edge.from) === d) ways.set(edge.from, Math.min(1e9, (ways.get(edge.from) ?? 0) + ways.get(node)!));
      }
    }
    frontier = next;
  }
  if (!toEnd.has(start)) throw noPath(graph, opts, where);

  const hops: PathHop[] = [];
  const refused: RefusedEdge[] = [];
  for (let at = start; at !== end;) {
    const d = toEnd.get(at)!;
    const onShortest = (accepted.get(at) ?? []).filter((edge) => toEnd.get(edge.to) === d - 1).sort((a, b) => semver.rcompare(graph.releases[a.to]!.version, graph.releases[b.to]!.version));
    const edge = onShortest[0]!;
    const from = graph.releases[at]!;
    const to = graph.releases[edge.to]!;
    const others = onShortest.length - 1;
    hops.push({
      from,
      to,
      risks: edge.risks ?? [],
      why: `${edge.risks ? `conditional edge, taken with --allow-not-recommended` : 'recommended edge'}; ${d === 1 ? 'reaches the target' : `${d - 1} hop${d - 1 === 1 ? '' : 's'} from the target`}${others > 0 ? `; newest of ${others + 1} releases on a shortest path` : ''}`,
    });
    for (const out of graph.edges.filter((e) => e.from === at && refusedWhy.has(e))) refused.push({ from: from.version, to: graph.releases[out.to]!.version, why: refusedWhy.get(out)! });
    at = edge.to;
  }
  const notes = [...graph.notes];
  if (opts.controlPlaneOnly && graph.channel && !/^(stable|eus)-/.test(graph.channel)) notes.push(`a Control Plane Only update is supported once all its edges are in stable; ${graph.channel} is not a stable or eus channel`);
  return {
    source: graph.source,
    ...(graph.channel !== undefined ? { channel: graph.channel } : {}),
    from: opts.from,
    to: opts.to,
    hops,
    controlPlaneOnly: opts.controlPlaneOnly,
    refused,
    equallyShort: ways.get(start)!,
    notes,
  };
}

/** From an even minor to the next even one of the same major (4.16 -> 4.18), as the docs allow. */
function checkControlPlaneOnly(from: string, to: string): void {
  const a = semver.parse(from)!;
  const b = semver.parse(to)!;
  if (a.major !== b.major || a.minor % 2 !== 0 || b.minor !== a.minor + 2) {
    throw new BadInputError(`--control-plane-only-update: ${minorOf(from)} -> ${minorOf(to)} is not a Control Plane Only update, which goes from an even minor to the next even one (4.16 -> 4.18); drop the flag, or choose --to in ${a.major}.${a.minor + (a.minor % 2 === 0 ? 2 : 1)}`);
  }
}

function withinControlPlaneOnly(from: string, to: string, version: string): boolean {
  return semver.major(version) === semver.major(from) && semver.minor(version) >= semver.minor(from) && semver.minor(version) <= semver.minor(to);
}

function noPath(graph: UpdateGraph, opts: PathOptions, where: string): BadInputError {
  const hint = !opts.allowNotRecommended && graph.edges.some((e) => e.risks) && reaches(graph, opts) ? '; a path over conditional edges exists: --allow-not-recommended takes it (its risks are printed)' : '';
  return new BadInputError(`no update path from ${opts.from} to ${opts.to} in ${where} that the CVO accepts (one minor at most per hop${opts.allowNotRecommended ? '' : ', recommended edges only'})${hint}; choose another --to or --channel`);
}

/** Whether conditional edges would make a path. */
function reaches(graph: UpdateGraph, opts: PathOptions): boolean {
  try {
    choosePath(graph, { ...opts, allowNotRecommended: true });
    return true;
  } catch {
    return false;
  }
}

/** The risks a path takes, one line each, for the warning lines. */
export function pathRiskLines(path: UpgradePath): string[] {
  return path.hops.flatMap((hop) => hop.risks.map((risk) => `${hop.from.version} -> ${hop.to.version} is not recommended: ${risk.name}: ${risk.message}${risk.url ? ` (${risk.url})` : ''}`));
}
