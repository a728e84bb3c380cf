/**
 * Which nodes need each component image: a pure function of the release's manifests and the
 * cluster's profile, feature set, capabilities and platform.
 *
 * 1. Only manifests the CVO applies count (inclusion.ts). An image only they reference, or
 *    that no manifest references, is in no set (`none`, listed as skipped).
 * 2. With a platform, an image that serves only other platforms is in no set (platform.ts).
 * 3. An image is control-plane-only when every applied reference puts it there: a container
 *    of a workload pinned to master/control-plane nodes, or an operand its operator is known
 *    to run there (operands.ts). DaemonSets, unpinned workloads, operands no rule places and
 *    any other reference go to all nodes, as do the node OS images.
 */
import type { ComponentImage } from '../release/image-references.js';
import type { ManifestDocument } from '../release/documents.js';
import { notAppliedBecause, type InclusionOptions } from './inclusion.js';
import { operandPlacement } from './operands.js';
import { isNodeOsImage } from './os-streams.js';
import { platformsInName, platformsOfComponent, type Platform } from './platform.js';
import type { Classification, ComponentRole } from './types.js';

export type { Classification, ComponentRole };

export { DEFAULT_PROFILE } from './inclusion.js';

/** `none`: the cluster never runs it (not applied, or another platform); `worker`: only a live cluster shows that. */

export interface ClassifyOptions extends InclusionOptions {
  /** Undefined: unknown, keep images of every platform. */
  readonly platform?: Platform;
  /** Component names forced control-plane-only / all-nodes by the user. */
  readonly controlPlaneOnly: readonly string[];
  readonly allNodes: readonly string[];
}

const CONTROL_PLANE_LABELS = new Set(['node-role.kubernetes.io/master', 'node-role.kubernetes.io/control-plane']);
const DIGEST_IN_TEXT = /@(sha256:[a-f0-9]{64})/g;
/** `--images=prometheus=<pullspec>` (cluster-monitoring-operator's way of naming operands). */
const IMAGE_ARG = /^-{1,2}images?=([\w.-]+)=\S*@(sha256:[a-f0-9]{64})/;

interface Reference {
  readonly kind: 'container' | 'operand' | 'other';
  /** Where this reference runs the image; `none`: an operand its operator runs only in an opt-in mode. */
  readonly role: ComponentRole;
  /** Platforms the reference's name or manifest ties the image to; empty = none said. */
  readonly platforms: readonly Platform[];
  readonly evidence: string;
}

export function classifyComponents(
  components: readonly ComponentImage[],
  documents: readonly ManifestDocument[],
  opts: ClassifyOptions,
): Map<string, Classification> {
  if (documents.length === 0) {
    // Nothing to judge by: keep everything everywhere rather than guess.
    return new Map(components.map((c) => [c.digest, { role: 'all', evidence: ['the release has no operator manifests: no evidence, kept on all nodes'] }]));
  }
  const known = new Set(components.map((c) => c.digest));
  const applied = new Map<string, Reference[]>();
  const idle = new Map<string, string[]>();
  const notApplied = new Map<string, string[]>();
  for (const { file, doc } of documents) {
    // Decided once per document, and only for one that references a component.
    let decided = false;
    let why: ReturnType<typeof notAppliedBecause>;
    for (const [digest, ref] of referencesIn(doc, file)) {
      if (!known.has(digest)) continue;
      if (!decided) {
        why = notAppliedBecause(doc, opts);
        decided = true;
      }
      if (why !== undefined) {
        push(notApplied, digest, `${file}: [${why.rule}] ${why.why}`);
        continue;
      }
      if (ref.role === 'none') push(idle, digest, ref.evidence);
      else push(applied, digest, ref);
    }
  }
  return new Map(components.map((c) => [c.digest, decide(c, applied.get(c.digest) ?? [], notApplied.get(c.digest) ?? [], idle.get(c.digest) ?? [], opts)]));
}

function push<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

function decide(c: ComponentImage, refs: readonly Reference[], notApplied: readonly string[], idle: readonly string[], opts: ClassifyOptions): Classification {
  const named = (list: readonly string[]) => c.names.some((n) => list.includes(n));
  if (named(opts.allNodes)) return { role: 'all', evidence: ['forced to all nodes by --all-nodes'] };
  if (named(opts.controlPlaneOnly)) return { role: 'control-plane', evidence: ['forced control-plane-only by --control-plane-only'] };
  // Which streams the nodes boot is decided beside (os-streams.ts): no manifest runs an OS image.
  if (isNodeOsImage(c)) return { role: 'all', evidence: ['node OS image: every node is rebased to it in the upgrade'] };
  if (refs.length === 0) {
    if (idle.length > 0) return { role: 'none', evidence: [...new Set(idle)].sort(), reference: 'operand' };
    if (notApplied.length > 0) {
      const shown = [...new Set(notApplied)].sort();
      return { role: 'none', evidence: [`referenced only by manifests the cluster does not apply (${shown.slice(0, 3).join('; ')}${shown.length > 3 ? `; ${shown.length - 3} more` : ''})`] };
    }
    return { role: 'none', evidence: ['no release manifest references it, so the cluster never runs it (installer, CI and client tools)'] };
  }

  const served = platformsServed(c, refs);
  const evidence = [...new Set(refs.map((r) => r.evidence))].sort();
  const reference = refs.some((r) => r.kind === 'container') ? 'container' : 'operand';
  if (served) {
    if (opts.platform && !served.platforms.includes(opts.platform)) {
      return { role: 'none', evidence: [`serves only ${served.platforms.join(', ')} (${served.why}), not --platform ${opts.platform}`], platforms: served.platforms, reference };
    }
    evidence.push(`serves ${served.platforms.join(', ')} (${served.why})`);
  }
  const role: ComponentRole = refs.every((r) => r.role === 'control-plane') ? 'control-plane' : 'all';
  return { role, evidence, reference, ...(served ? { platforms: served.platforms } : {}) };
}

/**
 * The platforms an image serves: what every applied reference says; failing that (some operand
 * reference names none), the component name. A container of an applied workload runs on
 * every platform.
 */
function platformsServed(c: ComponentImage, refs: readonly Reference[]): { platforms: Platform[]; why: string } | undefined {
  if (refs.some((r) => r.kind === 'container')) return undefined;
  if (refs.every((r) => r.platforms.length > 0)) {
    const platforms = [...new Set(refs.flatMap((r) => r.platforms))].sort();
    return { platforms, why: [...new Set(refs.map((r) => r.evidence.split(':')[0]!))].sort().join('; ') };
  }
  const byName = platformsOfComponent(c.names);
  return byName ? { platforms: [...byName.platforms], why: byName.why } : undefined;
}

/** Every component digest a document mentions, and how. */
function* referencesIn(doc: Record<string, unknown>, file: string): Generator<[string, Reference]> {
  const kind = String(doc.kind ?? 'object');
  const meta = (doc.metadata ?? {}) as { name?: unknown; namespace?: unknown };
  const namespace = typeof meta.namespace === 'string' ? meta.namespace : '';
  // Most documents reference nothing: their names and platforms are made only when one does.
  let objectText: string | undefined;
  const object = (): string => (objectText ??= `${kind} ${namespace ? `${namespace}/` : ''}${String(meta.name ?? '?')} (${file})`);
  let platformsOfManifest: Platform[] | undefined;
  const manifestPlatforms = (): Platform[] => (platformsOfManifest ??= platformsInName(`${file} ${String(meta.name ?? '')}`));
  const operand = (key: string, digest: string, label: string): [string, Reference] => {
    const placed = operandPlacement({ key, namespace });
    const own = platformsInName(key);
    return [digest, { kind: 'operand', role: placed.role, platforms: own.length > 0 ? own : manifestPlatforms(), evidence: `${label} of ${object()}: ${placed.why}` }];
  };
  const handled = new Set<unknown>();

  const podSpec = podSpecOf(doc);
  if (podSpec) {
    const pinned = pinnedToControlPlane(podSpec);
    for (const list of ['initContainers', 'containers'] as const) {
      const containers = podSpec[list];
      if (!Array.isArray(containers)) continue;
      for (const ctr of containers as ReadonlyArray<ContainerView | null>) {
        if (typeof ctr?.image === 'string') {
          for (const digest of digestsIn(ctr.image)) {
            // The CVO applies a workload on every platform, whatever its name says.
            yield [digest, { kind: 'container', role: pinned ? 'control-plane' : 'all', platforms: [], evidence: `container of ${object()}${pinned ? ', pinned to control-plane nodes' : ', may run on any node'}` }];
          }
          handled.add(ctr.image);
        }
        for (const e of Array.isArray(ctr?.env) ? (ctr.env as ReadonlyArray<{ name?: unknown; value?: unknown } | null>) : []) {
          if (typeof e?.name !== 'string' || typeof e?.value !== 'string') continue;
          for (const digest of digestsIn(e.value)) yield operand(e.name, digest, `env ${e.name}`);
          handled.add(e.value);
        }
        for (const arg of [...(Array.isArray(ctr?.args) ? ctr.args : []), ...(Array.isArray(ctr?.command) ? ctr.command : [])]) {
          const m = typeof arg === 'string' ? IMAGE_ARG.exec(arg) : null;
          if (!m) continue;
          yield operand(m[1]!, m[2]!, `arg --images=${m[1]}`);
          handled.add(arg);
        }
      }
    }
  }
  if (kind === 'ConfigMap' && doc.data && typeof doc.data === 'object') {
    for (const [dataKey, text] of Object.entries(doc.data as Record<string, unknown>)) {
      if (typeof text !== 'string') continue;
      const json = jsonObject(text);
      if (json) {
        for (const [key, value] of Object.entries(json)) {
          if (typeof value === 'string') for (const digest of digestsIn(value)) yield operand(key, digest, `${dataKey} key ${key}`);
        }
        handled.add(text);
      } else if (digestsIn(text).length > 0) {
        for (const digest of digestsIn(text)) yield operand(dataKey, digest, `data key ${dataKey}`);
        handled.add(text);
      }
    }
  }
  // Anything else (custom resources, annotations): no placement known, so any node.
  const found: Array<[string, string]> = [];
  digestStrings(doc, [], found);
  for (const [path, value] of found) {
    if (handled.has(value)) continue;
    for (const digest of digestsIn(value)) {
      yield [digest, { kind: 'other', role: 'all', platforms: manifestPlatforms(), evidence: `referenced from ${path} of ${object()}, so it may run on any node` }];
    }
  }
}

function jsonObject(text: string): Record<string, unknown> | undefined {
  if (!text.trimStart().startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** What classify reads of a pod spec; from the payload, so any of it may be missing or of another type. */
export interface PodSpecView {
  readonly nodeSelector?: unknown;
  readonly affinity?: { readonly nodeAffinity?: { readonly requiredDuringSchedulingIgnoredDuringExecution?: { readonly nodeSelectorTerms?: unknown } } };
  readonly initContainers?: unknown;
  readonly containers?: unknown;
}

/** What classify reads of a container, as untrusted as the rest. */
interface ContainerView {
  readonly image?: unknown;
  readonly env?: unknown;
  readonly args?: unknown;
  readonly command?: unknown;
}

/** A workload's spec down to its pod template (optional chaining copes with any shape JSON gives). */
interface WorkloadSpecView {
  readonly template?: { readonly spec?: PodSpecView };
  readonly jobTemplate?: { readonly spec?: { readonly template?: { readonly spec?: PodSpecView } } };
}

function podSpecOf(doc: Record<string, unknown>): PodSpecView | undefined {
  const spec = doc.spec as (PodSpecView & WorkloadSpecView) | undefined;
  switch (doc.kind) {
    case 'Pod':
      return spec;
    case 'Deployment':
    case 'DaemonSet':
    case 'StatefulSet':
    case 'ReplicaSet':
    case 'Job':
      return spec?.template?.spec;
    case 'CronJob':
      return spec?.jobTemplate?.spec?.template?.spec;
    default:
      return undefined;
  }
}

/** A nodeSelector or a required node affinity that only admits control-plane nodes. */
export function pinnedToControlPlane(podSpec: PodSpecView): boolean {
  const selector = podSpec.nodeSelector;
  if (selector && typeof selector === 'object' && Object.keys(selector).some((k) => CONTROL_PLANE_LABELS.has(k))) return true;
  const terms = podSpec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (!Array.isArray(terms) || terms.length === 0) return false;
  // Terms are ORed: every term must require a control-plane label.
  return (terms as ReadonlyArray<{ matchExpressions?: unknown } | null>).every((t) =>
    Array.isArray(t?.matchExpressions) &&
    (t.matchExpressions as ReadonlyArray<{ key?: unknown; operator?: unknown } | null>).some((e) => typeof e?.key === 'string' && CONTROL_PLANE_LABELS.has(e.key) && (e.operator === 'Exists' || e.operator === 'In')),
  );
}

/**
 * Every string in `value` that may name a digest, with its path (`a.b[0].c`). Most strings of a
 * manifest name none: their paths are never built (a plan walks thousands of documents).
 */
function digestStrings(value: unknown, path: Array<string | number>, found: Array<[string, string]>): void {
  if (typeof value === 'string') {
    if (value.includes('@sha256:')) found.push([pathText(path), value]);
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      path.push(i);
      digestStrings(value[i], path, found);
      path.pop();
    }
  } else if (value && typeof value === 'object') {
    for (const k of Object.keys(value)) {
      path.push(k);
      digestStrings((value as Record<string, unknown>)[k], path, found);
      path.pop();
    }
  }
}

function pathText(path: ReadonlyArray<string | number>): string {
  let text = '';
  for (const part of path) text = typeof part === 'number' ? `${text}[${part}]` : text ? `${text}.${part}` : part;
  return text;
}

function digestsIn(text: string): string[] {
  return [...text.matchAll(DIGEST_IN_TEXT)].map((m) => m[1]!);
}

/**
 * Whether the profile runs the machine-config operator: an applied manifest runs its image as a
 * container (HyperShift's profile applies MCO's image ConfigMaps but not its Deployment).
 */
export function runsMachineConfigOperator(components: readonly ComponentImage[], classifications: ReadonlyMap<string, Classification>): boolean {
  const mco = machineConfigOperator(components);
  return mco === undefined || classifications.get(mco.digest)?.reference === 'container';
}

/**
 * A profile without the machine-config operator: its own image, named only by its images
 * ConfigMap (`machineConfigOperator`), runs nowhere, since no operator starts the daemon; unless
 * a flag names it (`forced`).
 */
export function withoutMachineConfigOperator(components: readonly ComponentImage[], classifications: Map<string, Classification>, profile: string, forced: (names: readonly string[]) => boolean): void {
  const mco = machineConfigOperator(components);
  const decided = mco && classifications.get(mco.digest);
  if (!mco || !decided || decided.reference !== 'operand' || forced(mco.names)) return;
  classifications.set(mco.digest, { role: 'none', evidence: [`profile ${profile} runs no machine-config operator (its Deployment is not applied), so nothing starts the daemon its images ConfigMap names this image for`], reference: 'operand' });
}

const machineConfigOperator = (components: readonly ComponentImage[]) => components.find((c) => c.names.includes('machine-config-operator'));
