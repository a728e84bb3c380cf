/**
 * Which nodes need each component image: a pure function of the release's manifests.
 *
 * The rule is conservative, because an image missing on a node during an upgrade is what
 * prestage exists to prevent: an image is control-plane-only when every reference to it in
 * the included manifests is a container image of a workload pinned to master/control-plane
 * nodes. DaemonSets without such a pin, env vars and any other reference (operands the
 * operator starts anywhere), node OS images and images nothing references go to all nodes.
 */
import type { ComponentImage } from '../release/image-references.js';
import type { ManifestDocument } from '../release/payload.js';

export type ComponentRole = 'control-plane' | 'all';

export interface Classification {
  readonly role: ComponentRole;
  readonly evidence: readonly string[];
}

export interface ClassifyOptions {
  /** Cluster profile for `include.release.openshift.io/<profile>`. */
  readonly profile: string;
  /** Feature set for `release.openshift.io/feature-set` (`Default` unless the cluster changed it). */
  readonly featureSet: string;
  /** Component names forced control-plane-only / all-nodes by the user. */
  readonly controlPlaneOnly: readonly string[];
  readonly allNodes: readonly string[];
}

export const DEFAULT_PROFILE = 'self-managed-high-availability';

/** The node OS images: every node boots from them. */
const NODE_OS_IMAGE = /^(machine-os-content|rhel-coreos.*|rhcos.*|centos-stream-coreos.*|fedora-coreos.*)$/;
const CONTROL_PLANE_LABELS = new Set(['node-role.kubernetes.io/master', 'node-role.kubernetes.io/control-plane']);
const DIGEST_IN_TEXT = /@(sha256:[a-f0-9]{64})/g;

type Reference =
  | { kind: 'container'; pinned: boolean; where: string }
  | { kind: 'other'; where: string };

export function isIncluded(doc: Record<string, unknown>, profile: string, featureSet: string): boolean {
  const annotations = (doc.metadata as { annotations?: Record<string, unknown> } | undefined)?.annotations ?? {};
  if (annotations[`include.release.openshift.io/${profile}`] !== 'true') return false;
  if (annotations['exclude.release.openshift.io/internal-openshift-hosted'] === 'true') return false;
  const sets = annotations['release.openshift.io/feature-set'];
  if (typeof sets === 'string' && !sets.split(',').map((s) => s.trim()).includes(featureSet)) return false;
  return true;
}

export function classifyComponents(
  components: readonly ComponentImage[],
  documents: readonly ManifestDocument[],
  opts: ClassifyOptions,
): Map<string, Classification> {
  const byDigest = new Map(components.map((c) => [c.digest, c]));
  const references = new Map<string, Reference[]>();
  const excludedOnly = new Map<string, number>();
  for (const { file, doc } of documents) {
    const included = isIncluded(doc, opts.profile, opts.featureSet);
    for (const [digest, ref] of referencesIn(doc, file)) {
      if (!byDigest.has(digest)) continue;
      if (!included) {
        excludedOnly.set(digest, (excludedOnly.get(digest) ?? 0) + 1);
        continue;
      }
      const list = references.get(digest) ?? [];
      list.push(ref);
      references.set(digest, list);
    }
  }

  const result = new Map<string, Classification>();
  for (const c of components) {
    result.set(c.digest, decide(c, references.get(c.digest) ?? [], excludedOnly.get(c.digest) ?? 0, opts));
  }
  return result;
}

function decide(c: ComponentImage, refs: readonly Reference[], excluded: number, opts: ClassifyOptions): Classification {
  const named = (list: readonly string[]) => c.names.some((n) => list.includes(n));
  if (named(opts.allNodes)) return { role: 'all', evidence: ['forced to all nodes by --all-nodes'] };
  if (named(opts.controlPlaneOnly)) return { role: 'control-plane', evidence: ['forced control-plane-only by --control-plane-only'] };
  if (c.names.some((n) => NODE_OS_IMAGE.test(n))) return { role: 'all', evidence: ['node OS image: every node boots from it'] };
  if (refs.length === 0) {
    const why = excluded > 0
      ? `referenced only by manifests not included for profile ${opts.profile}`
      : 'no included manifest references it';
    return { role: 'all', evidence: [`${why}; kept on all nodes (the default)`] };
  }
  const evidence = [...new Set(refs.map(describe))].sort();
  const controlPlaneOnly = refs.every((r) => r.kind === 'container' && r.pinned);
  return { role: controlPlaneOnly ? 'control-plane' : 'all', evidence };
}

function describe(ref: Reference): string {
  if (ref.kind === 'container') return `container of ${ref.where}${ref.pinned ? ', pinned to control-plane nodes' : ', may run on any node'}`;
  return `referenced from ${ref.where}, so it may run on any node`;
}

/** Every component digest a document mentions, and how. */
function* referencesIn(doc: Record<string, unknown>, file: string): Generator<[string, Reference]> {
  const kind = String(doc.kind ?? 'object');
  const meta = (doc.metadata ?? {}) as { name?: unknown; namespace?: unknown };
  const object = `${kind} ${meta.namespace ? `${String(meta.namespace)}/` : ''}${String(meta.name ?? '?')} (${file})`;
  const podSpec = podSpecOf(doc);
  const containerFields = new Set<unknown>();
  if (podSpec) {
    const pinned = pinnedToControlPlane(podSpec);
    for (const list of ['initContainers', 'containers'] as const) {
      const containers = podSpec[list];
      if (!Array.isArray(containers)) continue;
      for (const ctr of containers as Array<Record<string, unknown>>) {
        if (typeof ctr?.image !== 'string') continue;
        containerFields.add(ctr);
        for (const digest of digestsIn(ctr.image)) yield [digest, { kind: 'container', pinned, where: object }];
      }
    }
  }
  // Everything else: env vars, args, ConfigMaps, custom resources. The operator decides where those run.
  for (const [path, value, parent] of strings(doc, '')) {
    if (containerFields.has(parent) && path.endsWith('.image')) continue;
    for (const digest of digestsIn(value)) yield [digest, { kind: 'other', where: `${envName(path, doc) ?? path} of ${object}` }];
  }
}

function podSpecOf(doc: Record<string, unknown>): Record<string, any> | undefined {
  const spec = doc.spec as Record<string, any> | undefined;
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
export function pinnedToControlPlane(podSpec: Record<string, any>): boolean {
  const selector = podSpec.nodeSelector as Record<string, unknown> | undefined;
  if (selector && Object.keys(selector).some((k) => CONTROL_PLANE_LABELS.has(k))) return true;
  const terms = podSpec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (!Array.isArray(terms) || terms.length === 0) return false;
  // Terms are ORed: every term must require a control-plane label.
  return terms.every((t: any) =>
    Array.isArray(t?.matchExpressions) &&
    t.matchExpressions.some((e: any) => CONTROL_PLANE_LABELS.has(e?.key) && (e.operator === 'Exists' || e.operator === 'In')),
  );
}

function* strings(value: unknown, path: string, parent?: unknown): Generator<[string, string, unknown]> {
  if (typeof value === 'string') {
    yield [path, value, parent];
  } else if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) yield* strings(v, `${path}[${i}]`, value);
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) yield* strings(v, path ? `${path}.${k}` : k, value);
  }
}

function digestsIn(text: string): string[] {
  return [...text.matchAll(DIGEST_IN_TEXT)].map((m) => m[1]!);
}

/** `...env[3].value` → `env OVN_IMAGE` when the env entry has a name. */
function envName(path: string, doc: Record<string, unknown>): string | undefined {
  const m = /^(.*\.env\[\d+\])\.value$/.exec(path);
  if (!m) return undefined;
  const entry = m[1]!.split(/\.|(?=\[)/).reduce<any>((o, key) => (o === undefined ? o : o[key.startsWith('[') ? Number(key.slice(1, -1)) : key]), doc);
  return typeof entry?.name === 'string' ? `env ${entry.name}` : undefined;
}
