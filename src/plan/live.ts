/**
 * Live-cluster planning (pure): what each role of a running cluster needs after the upgrade.
 * The images its Pods run name components through the CURRENT release's image-references (and
 * the target's, for Pods an update already rolled); each role gets the TARGET release's digest
 * of every component running on it. A component not running now falls back to the release's
 * rules (classify.ts) when the target is new to it or its manifests run it as a container (the
 * CVO starts it whatever the cluster shows); an operand its operator runs nowhere now is in no
 * set. The pause image goes to every role (no Pod spec names it), the node OS images of the streams
 * the pools boot too (os-streams.ts).
 */
import type { ComponentImage } from '../release/image-references.js';
import type { Classification, ComponentRole } from './classify.js';
import type { UnmanagedOverride } from './inclusion.js';
import type { LiveOperators } from './live-olm.js';
import { isNodeOsImage } from './os-streams.js';
import type { PlanObserved, SetRole } from './types.js';

/** CRI-O's pause image: the release component MCO writes into `pause_image` (its `infraImage`). */
export const PAUSE_COMPONENT = 'pod';

/** A Pod bound to a node: its `namespace/workload` and every digest its specs and statuses name. */
export interface RunningPod {
  readonly workload: string;
  readonly node: string;
  readonly digests: readonly string[];
  /** The CSV whose deployment runs it: OLM's OPERATOR_CONDITION_NAME on its containers. */
  readonly csv?: string;
}

/** What the cluster says about itself (src/cluster/live-cluster.ts reads it). */
export interface LiveCluster {
  readonly server: string;
  /** The release the nodes run now. */
  readonly release: { readonly pullSpec: string; readonly version?: string };
  /** ClusterVersion status.capabilities.enabledCapabilities, sorted; absent when it reports none. */
  readonly capabilities?: readonly string[];
  /** ClusterVersion spec.capabilities: the baseline set and the additional capabilities. */
  readonly capabilitySpec?: { readonly baseline?: string; readonly additional: readonly string[] };
  /** ClusterVersion spec.overrides[] marked unmanaged. */
  readonly overrides?: readonly UnmanagedOverride[];
  /** FeatureGate `cluster`: its feature set (`""` is Default), custom lists and per-version status. */
  readonly featureGate?: {
    readonly featureSet: string;
    readonly custom?: { readonly enabled: readonly string[]; readonly disabled: readonly string[] };
    readonly status: ReadonlyArray<{ readonly version: string; readonly enabled: readonly string[]; readonly disabled: readonly string[] }>;
  };
  /** OS streams (clusters that serve MachineConfigPools): OSImageStream's default, and each pool with its `spec.osImageStream` (none: the default). */
  readonly osStreams?: { readonly defaultStream?: string; readonly pools: ReadonlyArray<{ readonly pool: string; readonly stream?: string }> };
  /** Infrastructure status.platformStatus.type. */
  readonly platform?: string;
  readonly nodes: ReadonlyArray<{ readonly name: string; readonly role: SetRole }>;
  readonly pods: readonly RunningPod[];
  /** Images sets already pin on a node (stage reads them from the backend): held there too. */
  readonly pinned?: ReadonlyArray<{ readonly node: string; readonly images: readonly string[] }>;
  /** Its operators, where it runs OLM (v0 or v1): planned by live-operators.ts. */
  readonly operators?: LiveOperators;
}

export interface LiveInput {
  readonly cluster: LiveCluster;
  readonly current: { readonly version: string; readonly digest: string; readonly components: readonly ComponentImage[] };
  readonly target: { readonly version: string; readonly components: readonly ComponentImage[] };
  /** The release's rules for the target's components, by digest: the fallback. */
  readonly offline: ReadonlyMap<string, Classification>;
  /** Component names `--all-nodes` / `--control-plane-only` force: the flags win. */
  readonly forced: readonly string[];
}

export interface LivePlan {
  readonly classifications: Map<string, Classification>;
  readonly observed: PlanObserved;
  readonly warnings: string[];
}

interface Seen {
  readonly pods: RunningPod[];
  readonly nodes: Set<string>;
}

export function classifyLive(input: LiveInput): LivePlan {
  const { cluster, current, target } = input;
  const roleOf = new Map(cluster.nodes.map((n) => [n.name, n.role]));
  const nodeCount = { 'control-plane': cluster.nodes.filter((n) => n.role === 'control-plane').length, worker: cluster.nodes.filter((n) => n.role === 'worker').length };
  const namesOf = new Map<string, readonly string[]>();
  for (const c of [...current.components, ...target.components]) namesOf.set(c.digest, [...new Set([...(namesOf.get(c.digest) ?? []), ...c.names])]);

  const seen = new Map<string, Seen>();
  let releasePods = 0;
  const bound = cluster.pods.filter((p) => roleOf.has(p.node));
  for (const pod of bound) {
    const names = new Set(pod.digests.flatMap((d) => namesOf.get(d) ?? []));
    if (names.size > 0 || pod.digests.includes(current.digest)) releasePods++;
    for (const name of names) {
      const entry = seen.get(name) ?? { pods: [], nodes: new Set<string>() };
      entry.pods.push(pod);
      entry.nodes.add(pod.node);
      seen.set(name, entry);
    }
  }

  const targetNames = new Set(target.components.flatMap((c) => c.names));
  const currentNames = new Set(current.components.flatMap((c) => c.names));
  const warnings = current.components
    .filter((c) => c.names.some((n) => seen.has(n)) && !c.names.some((n) => targetNames.has(n)))
    .map((c) => `${c.name} runs on the cluster (${current.version}) but is not in ${target.version}: nothing to pin for it`);

  const classifications = new Map<string, Classification>();
  for (const c of target.components) {
    const offline = input.offline.get(c.digest);
    if (!offline) throw new Error(`internal: component ${c.name} was not classified`);
    classifications.set(c.digest, decide(c, offline, observed(c, seen), { input, roleOf, nodeCount, isNew: !c.names.some((n) => currentNames.has(n)) }));
  }
  return {
    classifications,
    observed: {
      server: cluster.server,
      release: cluster.release.pullSpec,
      version: current.version,
      nodes: nodeCount,
      pods: bound.length,
      releasePods,
      ...(cluster.pinned ? { pinnedImages: cluster.pinned.reduce((n, p) => n + p.images.length, 0) } : {}),
    },
    warnings,
  };
}

function observed(c: ComponentImage, seen: ReadonlyMap<string, Seen>): Seen | undefined {
  const all = c.names.map((n) => seen.get(n)).filter((s): s is Seen => s !== undefined);
  if (all.length === 0) return undefined;
  return { pods: [...new Set(all.flatMap((s) => s.pods))], nodes: new Set(all.flatMap((s) => [...s.nodes])) };
}

interface Context {
  readonly input: LiveInput;
  readonly roleOf: ReadonlyMap<string, SetRole>;
  readonly nodeCount: Readonly<Record<SetRole, number>>;
  readonly isNew: boolean;
}

function decide(c: ComponentImage, offline: Classification, running: Seen | undefined, ctx: Context): Classification {
  if (c.names.some((n) => ctx.input.forced.includes(n))) return offline;
  if (c.names.includes(PAUSE_COMPONENT)) {
    return { role: 'all', evidence: ['CRI-O\'s pause image (MCO\'s infraImage): every pod on every node starts from it, though no pod spec names it'] };
  }
  // Which OS streams the nodes boot was decided with the cluster's pools (os-streams.ts).
  if (isNodeOsImage(c)) return offline;
  // What the target's manifests say: applied at all, and run as a container by the CVO.
  const applied = offline.reference !== undefined || offline.role !== 'none';
  if (running) {
    const evidence = runningEvidence(running, ctx);
    if (!applied) return { role: 'none', evidence: [`${evidence}; but no manifest of ${ctx.input.target.version} the cluster applies references it (${offline.evidence.join('; ')})`] };
    const roles = new Set([...running.nodes].map((n) => ctx.roleOf.get(n)!));
    const role: ComponentRole = roles.size === 2 ? 'all' : roles.has('control-plane') ? 'control-plane' : 'worker';
    return { role, evidence: [evidence], ...(offline.platforms ? { platforms: offline.platforms } : {}) };
  }
  if (ctx.isNew) return { ...offline, evidence: offline.evidence.map((e) => `new in ${ctx.input.target.version}: ${e}`) };
  if (offline.reference === 'container') return { ...offline, evidence: offline.evidence.map((e) => `not running now, but ${ctx.input.target.version} runs it: ${e}`) };
  if (offline.role === 'none') return offline;
  return { role: 'none', evidence: [`not running on any node of the cluster, and ${ctx.input.target.version} only names it as an operand its operator runs nowhere now (${offline.evidence.join('; ')})`] };
}

/** `running: 6 pods on 3/3 workers, openshift-dns/dns-default` */
function runningEvidence(running: Seen, ctx: Context): string {
  const on = (role: SetRole, label: string) => {
    const n = [...running.nodes].filter((node) => ctx.roleOf.get(node) === role).length;
    return n > 0 ? [`${n}/${ctx.nodeCount[role]} ${label}`] : [];
  };
  const where = [...on('control-plane', 'control-plane nodes'), ...on('worker', 'workers')].join(' and ');
  const workloads = [...new Set(running.pods.map((p) => p.workload))].sort();
  const shown = workloads.slice(0, 2).join(', ') + (workloads.length > 2 ? `, +${workloads.length - 2} more` : '');
  return `running: ${running.pods.length} pod${running.pods.length === 1 ? '' : 's'} on ${where}, ${shown}`;
}
