/**
 * What the cluster-version operator of each OpenShift minor knows (pure data and lookups): its
 * capabilities and capability sets, the capabilities that exist only while a feature gate is on,
 * its feature sets, and whether it reads the feature-gate and major-version annotations.
 *
 * Sources, per release branch: openshift/api `config/v1/types_cluster_version.go`
 * (`KnownClusterVersionCapabilities`, `ClusterVersionCapabilitySets`, the FeatureGateAwareEnum
 * markers) and `features/features.go` (feature sets); cluster-version-operator
 * `lib/capability/capability.go` (`featureGatedCapabilities`) and the library-go
 * `pkg/manifest` it vendors (`Include` with gates and major version from release-4.22).
 * Branches checked: release-4.16 ... release-4.23, release-5.0, master (2026-08).
 */

export interface ReleaseApi {
  /** `4.16`, ..., the minor whose facts these are. */
  readonly minor: string;
  readonly capabilities: readonly string[];
  /** install-config `baselineCapabilitySet` values and what each enables. */
  readonly capabilitySets: Readonly<Record<string, readonly string[]>>;
  /** Capabilities the CVO drops from known and enabled unless ANY of these gates is enabled. */
  readonly gatedCapabilities: Readonly<Record<string, readonly string[]>>;
  readonly featureSets: readonly string[];
  /** The CVO reads `release.openshift.io/feature-gate` and `major-version` (library-go from release-4.22). */
  readonly readsGateAnnotations: boolean;
}

const CAPS_4_11 = ['baremetal', 'marketplace', 'openshift-samples', 'MachineAPI'];
const CAPS_4_12 = [...CAPS_4_11, 'Console', 'Insights', 'Storage', 'CSISnapshot'];
const CAPS_4_13 = [...CAPS_4_12, 'NodeTuning'];
const CAPS_4_14 = [...CAPS_4_13, 'Build', 'DeploymentConfig', 'ImageRegistry'];
const CAPS_4_15 = [...CAPS_4_14, 'OperatorLifecycleManager', 'CloudCredential'];
const CAPS_4_16 = [...CAPS_4_15, 'Ingress', 'CloudControllerManager'];
/** v4.17 enables what v4.16 does; v4.18 adds OLM v1. No set was added after v4.18 (master, 2026-08). */
const CAPS_4_18 = [...CAPS_4_16, 'OperatorLifecycleManagerV1'];
/** Known from release-4.23 / release-5.0, each behind its gates. */
const CAPS_5_0 = [...CAPS_4_18, 'CompatibilityRequirements', 'ClusterAPI'];

const SETS_4_16 = { None: [], 'v4.11': CAPS_4_11, 'v4.12': CAPS_4_12, 'v4.13': CAPS_4_13, 'v4.14': CAPS_4_14, 'v4.15': CAPS_4_15, 'v4.16': CAPS_4_16 };
const SETS_4_17 = { ...SETS_4_16, 'v4.17': CAPS_4_16 };
const SETS_4_18 = { ...SETS_4_17, 'v4.18': CAPS_4_18 };

const FEATURE_SETS_4_16 = ['Default', 'TechPreviewNoUpgrade', 'DevPreviewNoUpgrade', 'CustomNoUpgrade'];
/** OKD joined `features.AllFeatureSets()` in release-4.22. */
const FEATURE_SETS_4_22 = [...FEATURE_SETS_4_16, 'OKD'];

const api = (minor: string, capabilities: readonly string[], sets: Record<string, readonly string[]>, extra: Partial<ReleaseApi> = {}): ReleaseApi => ({
  minor,
  capabilities,
  capabilitySets: { ...sets, vCurrent: capabilities },
  gatedCapabilities: {},
  featureSets: FEATURE_SETS_4_16,
  readsGateAnnotations: false,
  ...extra,
});

/** Oldest first; a release takes the newest entry not newer than itself. */
const BY_MINOR: readonly ReleaseApi[] = [
  api('4.16', CAPS_4_16, SETS_4_16),
  api('4.17', CAPS_4_16, SETS_4_17),
  api('4.18', CAPS_4_18, SETS_4_18),
  api('4.22', CAPS_4_18, SETS_4_18, { featureSets: FEATURE_SETS_4_22, readsGateAnnotations: true }),
  api('4.23', CAPS_5_0, SETS_4_18, {
    featureSets: FEATURE_SETS_4_22,
    readsGateAnnotations: true,
    gatedCapabilities: { CompatibilityRequirements: ['CRDCompatibilityRequirementOperator', 'ClusterAPIMachineManagement'], ClusterAPI: ['ClusterAPIMachineManagement'] },
  }),
];

/** `4.16.3` → [4, 16]; undefined when the version is not `major.minor...`. */
export function majorMinor(version: string): [number, number] | undefined {
  const m = /^v?(\d+)\.(\d+)/.exec(version);
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

const order = ([major, minor]: readonly [number, number]): number => major * 1000 + minor;

/**
 * The facts for a release version: 5.0 has what 4.23 has (their branches are one API), a minor
 * newer than the table the newest entry; one older than 4.16, or no version, the 4.16 entry.
 */
export function releaseApi(version: string): ReleaseApi {
  const parsed = majorMinor(version);
  if (!parsed) return BY_MINOR[0]!;
  const at = order(parsed[0] >= 5 ? [4, 23] : parsed);
  let found = BY_MINOR[0]!;
  for (const entry of BY_MINOR) if (order(majorMinor(entry.minor)!) <= at) found = entry;
  return found;
}

/** The capabilities a cluster knows with these gates enabled (the CVO drops gated ones). */
export function knownCapabilities(release: ReleaseApi, gates: ReadonlySet<string> | undefined): string[] {
  return release.capabilities.filter((c) => gateAllows(release, c, gates));
}

export function gateAllows(release: ReleaseApi, capability: string, gates: ReadonlySet<string> | undefined): boolean {
  const needs = release.gatedCapabilities[capability];
  return needs === undefined || (gates !== undefined && needs.some((g) => gates.has(g)));
}
