/**
 * The inputs the planned release's CVO decides inclusion with (pure): profile, feature set,
 * enabled feature gates, known and enabled capabilities, overrides. From the flags, the live
 * cluster (FeatureGate `cluster`, ClusterVersion spec and status) and the release itself (its
 * FeatureGate manifests, its version's capability facts in release-api.ts).
 */
import { BadInputError } from '../errors.js';
import type { ManifestDocument } from '../release/documents.js';
import { payloadFeatureGates, payloadFeatureSets, withGateOverrides, type FeatureGates } from './feature-gates.js';
import { checkInclusionOptions, DEFAULT_FEATURE_SET, profilesOf, type InclusionOptions } from './inclusion.js';
import type { LiveCluster } from './live.js';
import { gateAllows, knownCapabilities, majorMinor, releaseApi, type ReleaseApi } from './release-api.js';

export interface CvoRequest {
  readonly version: string;
  readonly documents: readonly ManifestDocument[];
  readonly profile: string;
  /** `--feature-set`; undefined: the live cluster's, else Default. */
  readonly featureSet?: string;
  /** `--feature-gates A,-B`. */
  readonly featureGates: readonly string[];
  /** `--capability-set`; undefined: the live cluster's, else vCurrent. */
  readonly capabilitySet?: string;
  readonly additionalCapabilities: readonly string[];
  readonly exclude: readonly string[];
  readonly live?: LiveCluster;
}

export interface CvoInputs {
  readonly inclusion: InclusionOptions & { readonly knownCapabilities: ReadonlySet<string> };
  readonly release: ReleaseApi;
  /** Where the enabled gates came from; undefined when this release's CVO reads none. */
  readonly gatesFrom?: string;
  readonly warnings: readonly string[];
}

export function cvoInputs(req: CvoRequest): CvoInputs {
  const release = releaseApi(req.version);
  const warnings: string[] = [];
  const liveGate = req.live?.featureGate;
  let featureSet = req.featureSet ?? (liveGate ? liveGate.featureSet || DEFAULT_FEATURE_SET : DEFAULT_FEATURE_SET);
  if (req.featureGates.length > 0) {
    if (featureSet !== DEFAULT_FEATURE_SET && featureSet !== 'CustomNoUpgrade') {
      throw new BadInputError(`--feature-gates sets feature set CustomNoUpgrade, but --feature-set is ${featureSet}; drop one of them`);
    }
    featureSet = 'CustomNoUpgrade';
  }
  checkInclusionOptions({ profile: req.profile, featureSet, knownFeatureSets: release.featureSets }, profilesOf(req.documents));

  const gates = enabledGates(req, release, featureSet, warnings);
  const known = new Set(knownCapabilities(release, gates?.enabled));
  const enabled = enabledCapabilities(req, release, known, gates?.enabled, warnings);
  const major = majorMinor(req.version)?.[0];
  return {
    inclusion: {
      profile: req.profile,
      featureSet,
      capabilities: enabled,
      knownCapabilities: known,
      exclude: req.exclude,
      knownFeatureSets: release.featureSets,
      ...(release.readsGateAnnotations ? { featureGates: gates?.enabled ?? new Set<string>(), ...(major !== undefined ? { majorVersion: major } : {}) } : {}),
      ...(req.live?.overrides ? { overrides: req.live.overrides } : {}),
    },
    release,
    ...(release.readsGateAnnotations ? { gatesFrom: gates?.from ?? 'none: the release carries no FeatureGate manifest for this profile and feature set' } : {}),
    warnings,
  };
}

/**
 * The enabled gates: live, the cluster's FeatureGate status entry for the target version (else
 * the payload's manifest for its feature set, with a note); offline, the payload's manifest.
 * CustomNoUpgrade is Default's gates with the custom lists applied.
 */
function enabledGates(req: CvoRequest, release: ReleaseApi, featureSet: string, warnings: string[]): FeatureGates | undefined {
  const fromPayload = (set: string) => payloadFeatureGates(req.documents, req.profile, set);
  const liveGate = req.live?.featureGate;
  let gates: FeatureGates | undefined;
  if (liveGate && req.featureSet === undefined && req.featureGates.length === 0) {
    const entry = liveGate.status.find((s) => s.version === req.version);
    if (entry) gates = { enabled: new Set(entry.enabled), known: new Set([...entry.enabled, ...entry.disabled]), from: `the cluster's FeatureGate cluster status for ${req.version}` };
    else {
      const base = fromPayload(featureSet === 'CustomNoUpgrade' ? DEFAULT_FEATURE_SET : featureSet);
      gates = base && featureSet === 'CustomNoUpgrade' && liveGate.custom ? customGates(base, liveGate.custom) : base;
      if (gates) warnings.push(`the cluster's FeatureGate has no status entry for ${req.version} yet: its gates come from ${gates.from}`);
    }
  } else if (featureSet === 'CustomNoUpgrade') {
    const base = fromPayload(DEFAULT_FEATURE_SET);
    if (!base && req.featureGates.length > 0) {
      throw new BadInputError(`--feature-gates ${req.featureGates.join(',')}: the release carries no FeatureGate manifest for profile ${req.profile}, so it names no gates to set; drop --feature-gates`);
    }
    if (base) gates = req.featureGates.length > 0 ? withGateOverrides(base, req.featureGates) : base;
    if (req.featureGates.length > 0 && !release.readsGateAnnotations) {
      warnings.push(`--feature-gates: the CVO of ${req.version} decides no inclusion by feature gates (from 4.22 it does), so they change nothing in this plan`);
    }
  } else {
    gates = fromPayload(featureSet);
  }
  if (!gates && release.readsGateAnnotations) {
    const sets = payloadFeatureSets(req.documents, req.profile);
    warnings.push(`the release carries no FeatureGate manifest for profile ${req.profile} and feature set ${featureSet}${sets.length > 0 ? ` (it has ${sets.join(', ')})` : ''}: manifests that need a feature gate count as not applied`);
  }
  return gates;
}

function customGates(base: FeatureGates, custom: { enabled: readonly string[]; disabled: readonly string[] }): FeatureGates {
  const enabled = new Set([...base.enabled, ...custom.enabled].filter((g) => !custom.disabled.includes(g)));
  return { enabled, known: new Set([...base.known, ...custom.enabled, ...custom.disabled]), from: `${base.from} with the cluster's customNoUpgrade lists` };
}

/**
 * The enabled capabilities, as the CVO computes them for the release: the baseline set (the
 * live cluster's `spec.capabilities.baselineCapabilitySet`, `--capability-set`, else vCurrent)
 * of THIS release, the additional ones, and (live) every capability the cluster has enabled
 * already (implicitly enabled ones stay); gated capabilities whose gates are off are dropped.
 */
function enabledCapabilities(req: CvoRequest, release: ReleaseApi, known: ReadonlySet<string>, gates: ReadonlySet<string> | undefined, warnings: string[]): Set<string> {
  const spec = req.live?.capabilitySpec;
  const setName = req.capabilitySet ?? (req.live ? spec?.baseline ?? 'vCurrent' : 'vCurrent');
  const baseline = release.capabilitySets[setName];
  if (!baseline) {
    throw new BadInputError(`${req.capabilitySet !== undefined ? '--capability-set' : 'the cluster\'s baselineCapabilitySet'} ${setName} is not a capability set of ${req.version}; use one of ${Object.keys(release.capabilitySets).join(', ')}`);
  }
  for (const name of req.additionalCapabilities) {
    if (!release.capabilities.includes(name)) throw new BadInputError(`--capabilities ${name} is not a capability of ${req.version}; use one of ${release.capabilities.join(', ')}`);
  }
  const wanted = new Set([
    ...baseline,
    ...(req.capabilitySet === undefined && req.live ? [...(spec?.additional ?? []), ...(req.live.capabilities ?? [])] : []),
    ...req.additionalCapabilities,
  ]);
  const enabled = new Set<string>();
  for (const name of wanted) {
    if (known.has(name)) enabled.add(name);
    else if (release.capabilities.includes(name) && !gateAllows(release, name, gates) && req.additionalCapabilities.includes(name)) {
      warnings.push(`--capabilities ${name}: the CVO of ${req.version} drops it while none of its feature gates (${release.gatedCapabilities[name]!.join(', ')}) is enabled; enable one (--feature-set TechPreviewNoUpgrade or --feature-gates ${release.gatedCapabilities[name]![0]})`);
    }
  }
  return enabled;
}
