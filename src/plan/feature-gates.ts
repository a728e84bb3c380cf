/**
 * The feature gates a cluster enables, as the CVO reads them when it decides inclusion (4.22+):
 * offline from the release's own FeatureGate manifest for the cluster profile and feature set
 * (openshift/api `payload-manifests/featuregates/featureGate-4-10-<Profile>-<FeatureSet>.yaml`,
 * `status.featureGates[].enabled`), live from the cluster's FeatureGate `cluster` status entry for
 * the target version. `--feature-gates A,-B` is CustomNoUpgrade: Default's gates plus A, less B.
 */
import { BadInputError } from '../errors.js';
import { annotationsOf } from './inclusion.js';
import type { ManifestDocument } from '../release/documents.js';

export interface FeatureGates {
  readonly enabled: ReadonlySet<string>;
  /** Every gate the source names, enabled or disabled: the names `--feature-gates` accepts. */
  readonly known: ReadonlySet<string>;
  /** Where they came from, for the plan's evidence. */
  readonly from: string;
}

/** A FeatureGate `status.featureGates[]` entry. */
interface GateEntry {
  readonly version?: unknown;
  readonly enabled?: unknown;
  readonly disabled?: unknown;
}

/** The names of a FeatureGate status list (`[{name}]`), whatever else it holds. */
export const gateNames = (list: unknown): string[] =>
  Array.isArray(list) ? list.map((g) => (g && typeof g === 'object' ? (g as { name?: unknown }).name : undefined)).filter((n): n is string => typeof n === 'string') : [];

/** The gates of a FeatureGate object's status for `version` (an entry without version, as the payload's, also serves). */
export function gatesOfStatus(featureGate: Record<string, unknown>, version: string | undefined, from: string): FeatureGates | undefined {
  const entries = ((featureGate.status as { featureGates?: unknown } | undefined)?.featureGates ?? []) as GateEntry[];
  if (!Array.isArray(entries)) return undefined;
  const entry = entries.find((e) => version !== undefined && e.version === version) ?? entries.find((e) => e.version === '' || e.version === undefined);
  if (!entry) return undefined;
  const enabled = gateNames(entry.enabled);
  return { enabled: new Set(enabled), known: new Set([...enabled, ...gateNames(entry.disabled)]), from };
}

/**
 * The payload's FeatureGate manifest for a profile and feature set: the document of kind
 * FeatureGate that names the profile in an include annotation (whatever its value: the CVO
 * leaves these to the config operator) and the feature set in its feature-set annotation.
 */
export function payloadFeatureGates(documents: readonly ManifestDocument[], profile: string, featureSet: string): FeatureGates | undefined {
  for (const { file, doc } of documents) {
    if (doc.kind !== 'FeatureGate') continue;
    const annotations = annotationsOf(doc);
    if (!(`include.release.openshift.io/${profile}` in annotations)) continue;
    if (annotations['release.openshift.io/feature-set'] !== featureSet) continue;
    return gatesOfStatus(doc, undefined, `the release's FeatureGate manifest ${file} (${profile}, ${featureSet})`);
  }
  return undefined;
}

/** The feature sets the payload carries FeatureGate manifests for, for a profile. */
export function payloadFeatureSets(documents: readonly ManifestDocument[], profile: string): string[] {
  const sets = new Set<string>();
  for (const { doc } of documents) {
    if (doc.kind !== 'FeatureGate') continue;
    const annotations = annotationsOf(doc);
    const set = annotations['release.openshift.io/feature-set'];
    if (`include.release.openshift.io/${profile}` in annotations && typeof set === 'string') sets.add(set);
  }
  return [...sets].sort();
}

/** `--feature-gates A,-B`: enable A, disable B, over `base`; every name must be a gate of the release. */
export function withGateOverrides(base: FeatureGates, overrides: readonly string[]): FeatureGates {
  const enabled = new Set(base.enabled);
  for (const raw of overrides) {
    const off = raw.startsWith('-');
    const name = off ? raw.slice(1) : raw;
    if (!base.known.has(name)) {
      throw new BadInputError(`--feature-gates ${raw}: ${name} is not a feature gate of this release; it knows ${[...base.known].sort().join(', ')}`);
    }
    if (off) enabled.delete(name);
    else enabled.add(name);
  }
  return { enabled, known: base.known, from: `${base.from} with --feature-gates ${overrides.join(',')}` };
}
