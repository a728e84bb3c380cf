/**
 * Which release manifests the cluster-version operator applies, decided as the CVO of the
 * planned release decides it (library-go `pkg/manifest` `Include`, vendored in the CVO; FACTS
 * §1, §1b). One pure function, `notAppliedBecause`, checks in the CVO's order and names the rule
 * that decided:
 *
 * - `exclude`: `exclude.release.openshift.io/<X>: "true"` only for X the CVO was told to exclude
 *   (EXCLUDE_MANIFESTS, normally unset; `--exclude X`);
 * - `feature-set+gate` (4.22+): a manifest with both annotations is never applied;
 * - `feature-set`: a comma list (no spaces) of KNOWN feature sets; an empty or unknown value
 *   means never applied; the cluster's set (`""` is `Default`) must be listed;
 * - `feature-gate` (4.22+): `A,B,-C`, every listed gate enabled and every `-`gate disabled;
 * - `major-version` (4.22+): `4,-5` include/exclude lists, only on FeatureGates and CRDs;
 * - `profile`: `include.release.openshift.io/<profile>` must be `"true"`;
 * - `capability`: every `+`-joined capability known to the release (else "unrecognized") and
 *   enabled;
 * - `override` (live cluster): ClusterVersion `spec.overrides[]` with `unmanaged: true`;
 * - `delete`: `release.openshift.io/delete: "true"`, an object the CVO deletes (a retired
 *   workload the release still lists): it runs nothing.
 */
import { BadInputError } from '../errors.js';

export const DEFAULT_PROFILE = 'self-managed-high-availability';
export const DEFAULT_FEATURE_SET = 'Default';

export type InclusionRule = 'exclude' | 'feature-set+gate' | 'feature-set' | 'feature-gate' | 'major-version' | 'profile' | 'capability' | 'override' | 'delete';

export interface NotApplied {
  readonly rule: InclusionRule;
  readonly why: string;
}

/** ClusterVersion `spec.overrides[]` entry with `unmanaged: true`: the CVO leaves that object alone. */
export interface UnmanagedOverride {
  readonly group: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
}

export interface InclusionOptions {
  readonly profile: string;
  /** `Default` when the cluster sets none. */
  readonly featureSet: string;
  /** Enabled capabilities. */
  readonly capabilities: ReadonlySet<string>;
  /** Capabilities the release knows; absent: every name a manifest uses counts as known. */
  readonly knownCapabilities?: ReadonlySet<string>;
  /** Identifiers X whose `exclude.release.openshift.io/X` annotation excludes a manifest. */
  readonly exclude: readonly string[];
  /** Feature-set values the release's CVO knows; absent: the values of every era. */
  readonly knownFeatureSets?: readonly string[];
  /** Enabled feature gates, when the release's CVO reads gate annotations (4.22+); absent: it ignores them. */
  readonly featureGates?: ReadonlySet<string>;
  /** The release's major version, checked against `release.openshift.io/major-version` (4.22+). */
  readonly majorVersion?: number;
  /** Live cluster: objects the CVO does not manage. */
  readonly overrides?: readonly UnmanagedOverride[];
}

/** Every feature set the CVO has known (openshift/api `features.AllFeatureSets()` plus CustomNoUpgrade). */
export const FEATURE_SETS = ['Default', 'TechPreviewNoUpgrade', 'DevPreviewNoUpgrade', 'CustomNoUpgrade', 'OKD'] as const;

const ANNOTATION = {
  featureSet: 'release.openshift.io/feature-set',
  featureGate: 'release.openshift.io/feature-gate',
  majorVersion: 'release.openshift.io/major-version',
  capability: 'capability.openshift.io/name',
} as const;

export function annotationsOf(doc: Record<string, unknown>): Record<string, unknown> {
  return (doc.metadata as { annotations?: Record<string, unknown> } | undefined)?.annotations ?? {};
}

/** Why the CVO would not apply this manifest (the rule and its reason), or undefined when it would. */
export function notAppliedBecause(doc: Record<string, unknown>, opts: InclusionOptions): NotApplied | undefined {
  const annotations = annotationsOf(doc);
  for (const id of opts.exclude) {
    if (annotations[`exclude.release.openshift.io/${id}`] === 'true') return { rule: 'exclude', why: `excluded by --exclude ${id}` };
  }
  const sets = annotations[ANNOTATION.featureSet];
  const gates = annotations[ANNOTATION.featureGate];
  if (opts.featureGates && sets !== undefined && gates !== undefined) {
    return { rule: 'feature-set+gate', why: 'carries both a feature-set and a feature-gate annotation, which the CVO never applies' };
  }
  if (sets !== undefined) {
    const why = featureSetMismatch(String(sets), opts);
    if (why) return { rule: 'feature-set', why };
  }
  if (opts.featureGates && typeof gates === 'string') {
    const why = featureGateMismatch(gates, opts.featureGates);
    if (why) return { rule: 'feature-gate', why };
  }
  const major = annotations[ANNOTATION.majorVersion];
  if (opts.majorVersion !== undefined && typeof major === 'string') {
    const why = majorVersionMismatch(major, opts.majorVersion, String(doc.kind ?? ''));
    if (why) return { rule: 'major-version', why };
  }
  const profile = annotations[`include.release.openshift.io/${opts.profile}`];
  if (profile !== 'true') return { rule: 'profile', why: profile === undefined ? `not included for profile ${opts.profile}` : `include.release.openshift.io/${opts.profile} is ${JSON.stringify(profile)}, not "true"` };
  const capability = annotations[ANNOTATION.capability];
  if (typeof capability === 'string' && capability !== '') {
    const why = capabilityMismatch(capability, opts);
    if (why) return { rule: 'capability', why };
  }
  const override = opts.overrides?.find((o) => overrides(o, doc));
  if (override) return { rule: 'override', why: `ClusterVersion spec.overrides marks ${override.kind} ${override.namespace ? `${override.namespace}/` : ''}${override.name} unmanaged` };
  if (annotations['release.openshift.io/delete'] === 'true') return { rule: 'delete', why: 'release.openshift.io/delete: the CVO deletes this object' };
  return undefined;
}

/** `release.openshift.io/feature-set`, split on commas as the CVO splits it (no trimming). */
function featureSetMismatch(value: string, opts: InclusionOptions): string | undefined {
  const known: readonly string[] = opts.knownFeatureSets ?? FEATURE_SETS;
  const listed = value.split(',');
  const unknown = listed.filter((s) => !known.includes(s));
  if (unknown.length > 0) return `feature-set ${JSON.stringify(value)} holds ${unknown.map((s) => JSON.stringify(s)).join(', ')}, not a feature set the CVO knows, so it is never applied`;
  if (!listed.includes(opts.featureSet)) return `only for feature set ${value}, not ${opts.featureSet}`;
  return undefined;
}

function featureGateMismatch(value: string, enabled: ReadonlySet<string>): string | undefined {
  for (const raw of value.split(',')) {
    const req = raw.trim();
    if (req === '') continue;
    if (req.startsWith('-')) {
      if (enabled.has(req.slice(1))) return `feature gate ${req.slice(1)} is enabled, and the manifest needs it disabled (feature-gate ${value})`;
    } else if (!enabled.has(req)) {
      return `feature gate ${req} is not enabled (feature-gate ${value})`;
    }
  }
  return undefined;
}

function majorVersionMismatch(value: string, major: number, kind: string): string | undefined {
  if (kind !== 'FeatureGate' && kind !== 'CustomResourceDefinition') return `major-version ${value} on a ${kind || 'document'}: the CVO filters only FeatureGates and CRDs by it and applies no other kind that carries it`;
  const include = new Set<number>();
  const exclude = new Set<number>();
  for (const raw of value.split(',')) {
    const req = raw.trim();
    if (req === '') continue;
    const n = Number(req.startsWith('-') ? req.slice(1) : req);
    if (!Number.isInteger(n) || n < 0) return `major-version ${value} holds ${JSON.stringify(req)}, not a version`;
    (req.startsWith('-') ? exclude : include).add(n);
  }
  if ([...include].some((n) => exclude.has(n))) return `major-version ${value} both includes and excludes a version`;
  if (include.has(major)) return undefined;
  if (exclude.has(major)) return `major-version ${value} excludes major version ${major}`;
  if (include.size > 0) return `major-version ${value} does not include major version ${major}`;
  return undefined;
}

function capabilityMismatch(value: string, opts: InclusionOptions): string | undefined {
  const names = value.split('+');
  const unknown = opts.knownCapabilities ? names.filter((c) => !opts.knownCapabilities!.has(c)) : [];
  if (unknown.length > 0) return `unrecognized capability ${unknown.join(', ')}: not a capability this release knows (or its feature gate is off)`;
  const disabled = names.filter((c) => !opts.capabilities.has(c));
  if (disabled.length > 0) return `capability ${disabled.join('+')} not enabled`;
  return undefined;
}

function overrides(o: UnmanagedOverride, doc: Record<string, unknown>): boolean {
  const meta = (doc.metadata ?? {}) as { name?: unknown; namespace?: unknown };
  const group = String(doc.apiVersion ?? '').includes('/') ? String(doc.apiVersion).split('/')[0]! : '';
  const namespace = typeof meta.namespace === 'string' ? meta.namespace : '';
  return o.kind === doc.kind && o.name === meta.name && o.group === group && (namespace === '' || o.namespace === namespace);
}

/** Profiles the release's manifests name: the values `--profile` may take. */
export function profilesOf(docs: readonly { readonly doc: Record<string, unknown> }[]): string[] {
  const profiles = new Set<string>();
  for (const { doc } of docs) {
    for (const key of Object.keys(annotationsOf(doc))) {
      if (key.startsWith('include.release.openshift.io/')) profiles.add(key.slice('include.release.openshift.io/'.length));
    }
  }
  return [...profiles].sort();
}

/** `--profile` must be a profile the release's annotations use; `--feature-set` one its CVO knows. */
export function checkInclusionOptions(opts: Pick<InclusionOptions, 'profile' | 'featureSet' | 'knownFeatureSets'>, profiles: readonly string[]): void {
  if (profiles.length > 0 && !profiles.includes(opts.profile)) {
    throw new BadInputError(`--profile ${opts.profile} is not a profile of this release; its manifests name ${profiles.join(', ')}`);
  }
  const known: readonly string[] = opts.knownFeatureSets ?? FEATURE_SETS;
  if (!known.includes(opts.featureSet)) {
    throw new BadInputError(`--feature-set ${opts.featureSet} is not a feature set of this release; use one of ${known.join(', ')}`);
  }
}
