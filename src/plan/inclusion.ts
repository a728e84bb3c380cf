/**
 * Which release manifests the cluster-version operator applies, as it decides (library-go
 * `pkg/manifest`): the profile's include annotation, `exclude.release.openshift.io/<X>` only
 * for identifiers the CVO was told to exclude (EXCLUDE_MANIFESTS, normally unset), the feature
 * set list, and every `+`-joined capability enabled.
 */
import { BadInputError } from '../errors.js';

export const DEFAULT_PROFILE = 'self-managed-high-availability';
export const DEFAULT_FEATURE_SET = 'Default';

/** Capabilities a 4.16 cluster knows (openshift/api config/v1 ClusterVersionCapability). */
export const KNOWN_CAPABILITIES = [
  'baremetal', 'marketplace', 'openshift-samples', 'Console', 'Insights', 'Storage', 'CSISnapshot', 'NodeTuning',
  'MachineAPI', 'Build', 'DeploymentConfig', 'ImageRegistry', 'OperatorLifecycleManager', 'CloudCredential',
  'Ingress', 'CloudControllerManager',
] as const;

const V4_11 = ['baremetal', 'marketplace', 'openshift-samples', 'MachineAPI'];
const V4_12 = [...V4_11, 'Console', 'Insights', 'Storage', 'CSISnapshot'];
const V4_13 = [...V4_12, 'NodeTuning'];
const V4_14 = [...V4_13, 'Build', 'DeploymentConfig', 'ImageRegistry'];
const V4_15 = [...V4_14, 'OperatorLifecycleManager', 'CloudCredential'];
const V4_16 = [...V4_15, 'CloudControllerManager', 'Ingress'];

/** install-config `capabilities.baselineCapabilitySet` values. */
export const CAPABILITY_SETS: Readonly<Record<string, readonly string[]>> = {
  None: [],
  'v4.11': V4_11,
  'v4.12': V4_12,
  'v4.13': V4_13,
  'v4.14': V4_14,
  'v4.15': V4_15,
  'v4.16': V4_16,
  vCurrent: KNOWN_CAPABILITIES,
};

export interface InclusionOptions {
  readonly profile: string;
  /** `Default` when the cluster sets none. */
  readonly featureSet: string;
  readonly capabilities: ReadonlySet<string>;
  /** Identifiers X whose `exclude.release.openshift.io/X` annotation excludes a manifest. */
  readonly exclude: readonly string[];
}

/** The enabled capabilities of `--capability-set` plus `--capabilities`. */
export function enabledCapabilities(set: string, additional: readonly string[], known: readonly string[]): Set<string> {
  const baseline = CAPABILITY_SETS[set];
  if (!baseline) throw new BadInputError(`--capability-set ${set} is not a capability set; use one of ${Object.keys(CAPABILITY_SETS).join(', ')}`);
  for (const name of additional) {
    if (!known.includes(name)) throw new BadInputError(`--capabilities ${name} is not a capability; use one of ${known.join(', ')}`);
  }
  return new Set([...baseline, ...additional]);
}

function annotationsOf(doc: Record<string, unknown>): Record<string, unknown> {
  return (doc.metadata as { annotations?: Record<string, unknown> } | undefined)?.annotations ?? {};
}

/** Why the CVO would not apply this manifest, or undefined when it would. */
export function notAppliedBecause(doc: Record<string, unknown>, opts: InclusionOptions): string | undefined {
  const annotations = annotationsOf(doc);
  if (annotations[`include.release.openshift.io/${opts.profile}`] !== 'true') return `not included for profile ${opts.profile}`;
  for (const id of opts.exclude) {
    if (annotations[`exclude.release.openshift.io/${id}`] === 'true') return `excluded by --exclude ${id}`;
  }
  const sets = annotations['release.openshift.io/feature-set'];
  if (typeof sets === 'string' && !featureSetsOf(sets).includes(opts.featureSet)) return `only for feature set ${sets}, not ${opts.featureSet}`;
  const capability = annotations['capability.openshift.io/name'];
  if (typeof capability === 'string' && capability.trim() !== '') {
    const disabled = capability.split('+').map((c) => c.trim()).filter((c) => !opts.capabilities.has(c));
    if (disabled.length > 0) return `capability ${disabled.join('+')} not enabled`;
  }
  return undefined;
}

/** `release.openshift.io/feature-set`: comma-separated; an empty value means Default. */
function featureSetsOf(value: string): string[] {
  const sets = value.split(',').map((s) => s.trim()).filter(Boolean);
  return sets.length > 0 ? sets : [DEFAULT_FEATURE_SET];
}

/** Profiles, feature sets and capabilities the release's manifests name: the values a user may pick. */
export interface ReleaseVocabulary {
  readonly profiles: readonly string[];
  readonly featureSets: readonly string[];
  readonly capabilities: readonly string[];
}

export function vocabularyOf(docs: readonly { readonly doc: Record<string, unknown> }[]): ReleaseVocabulary {
  const profiles = new Set<string>();
  const featureSets = new Set<string>([DEFAULT_FEATURE_SET]);
  const capabilities = new Set<string>(KNOWN_CAPABILITIES);
  for (const { doc } of docs) {
    for (const [key, value] of Object.entries(annotationsOf(doc))) {
      if (key.startsWith('include.release.openshift.io/')) profiles.add(key.slice('include.release.openshift.io/'.length));
      else if (key === 'release.openshift.io/feature-set' && typeof value === 'string') for (const s of featureSetsOf(value)) featureSets.add(s);
      else if (key === 'capability.openshift.io/name' && typeof value === 'string') for (const c of value.split('+')) if (c.trim()) capabilities.add(c.trim());
    }
  }
  return { profiles: [...profiles].sort(), featureSets: [...featureSets].sort(), capabilities: [...capabilities] };
}

/** `--profile` and `--feature-set` must be values the release's annotations use. */
export function checkInclusionOptions(opts: InclusionOptions, vocabulary: ReleaseVocabulary): void {
  if (vocabulary.profiles.length > 0 && !vocabulary.profiles.includes(opts.profile)) {
    throw new BadInputError(`--profile ${opts.profile} is not a profile of this release; its manifests name ${vocabulary.profiles.join(', ')}`);
  }
  if (!vocabulary.featureSets.includes(opts.featureSet)) {
    throw new BadInputError(`--feature-set ${opts.featureSet} is not a feature set of this release; its manifests name ${vocabulary.featureSets.join(', ')}`);
  }
}
