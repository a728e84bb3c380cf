import { describe, expect, it } from 'vitest';
import type { ManifestDocument } from '../release/documents.js';
import { cvoInputs, type CvoRequest } from './cvo-inputs.js';
import type { LiveCluster } from './live.js';

function featureGate(profile: string, set: string, enabled: string[], disabled: string[]): ManifestDocument {
  return {
    file: `fg-${profile}-${set}.yaml`,
    doc: { kind: 'FeatureGate', metadata: { name: 'cluster', annotations: { [`include.release.openshift.io/${profile}`]: 'false-except-for-the-config-operator', 'release.openshift.io/feature-set': set } }, status: { featureGates: [{ version: '', enabled: enabled.map((name) => ({ name })), disabled: disabled.map((name) => ({ name })) }] } },
  };
}
const SMHA = 'self-managed-high-availability';
const documents = [
  featureGate(SMHA, 'Default', ['OSStreams'], ['ClusterAPIMachineManagement', 'CRDCompatibilityRequirementOperator']),
  featureGate(SMHA, 'TechPreviewNoUpgrade', ['OSStreams', 'ClusterAPIMachineManagement', 'CRDCompatibilityRequirementOperator'], []),
];
const request = (over: Partial<CvoRequest> = {}): CvoRequest => ({ version: '5.0.2', documents, profile: SMHA, featureGates: [], additionalCapabilities: [], exclude: [], ...over });
const live = (over: Partial<LiveCluster> = {}): LiveCluster => ({ server: 'https://api', release: { pullSpec: 'quay.io/r@sha256:1', version: '4.22.3' }, nodes: [], pods: [], ...over });

describe('cvoInputs', () => {
  it('5.0, Default: gates from the payload\'s manifest; gated capabilities dropped from known and enabled', () => {
    const { inclusion, gatesFrom } = cvoInputs(request());
    expect([...inclusion.featureGates!]).toEqual(['OSStreams']);
    expect(gatesFrom).toMatch(/fg-self-managed-high-availability-Default\.yaml/);
    expect(inclusion.knownCapabilities.has('ClusterAPI')).toBe(false);
    expect(inclusion.capabilities.has('ClusterAPI')).toBe(false);
    expect(inclusion.capabilities.has('OperatorLifecycleManagerV1')).toBe(true);
    expect(inclusion.majorVersion).toBe(5);
  });
  it('5.0, TechPreviewNoUpgrade: the gates turn ClusterAPI and CompatibilityRequirements on', () => {
    const { inclusion } = cvoInputs(request({ featureSet: 'TechPreviewNoUpgrade' }));
    expect(inclusion.capabilities.has('ClusterAPI')).toBe(true);
    expect(inclusion.capabilities.has('CompatibilityRequirements')).toBe(true);
  });
  it('--capabilities ClusterAPI with its gate off is dropped, as the CVO drops it, with a warning', () => {
    const { inclusion, warnings } = cvoInputs(request({ capabilitySet: 'None', additionalCapabilities: ['ClusterAPI'] }));
    expect([...inclusion.capabilities]).toEqual([]);
    expect(warnings[0]).toMatch(/^--capabilities ClusterAPI: the CVO of 5\.0\.2 drops it while none of its feature gates \(ClusterAPIMachineManagement\) is enabled/);
  });
  it('--feature-gates is CustomNoUpgrade over Default\'s gates', () => {
    const { inclusion } = cvoInputs(request({ featureGates: ['ClusterAPIMachineManagement'] }));
    expect(inclusion.featureSet).toBe('CustomNoUpgrade');
    expect(inclusion.featureGates!.has('ClusterAPIMachineManagement')).toBe(true);
    expect(inclusion.capabilities.has('ClusterAPI')).toBe(true);
    expect(() => cvoInputs(request({ featureGates: ['X'], featureSet: 'TechPreviewNoUpgrade' }))).toThrow('--feature-gates sets feature set CustomNoUpgrade, but --feature-set is TechPreviewNoUpgrade; drop one of them');
  });
  it('4.20: the CVO reads no gates, OLM v1 is a capability, v4.18 the newest set', () => {
    const { inclusion, gatesFrom } = cvoInputs(request({ version: '4.20.8' }));
    expect(inclusion.featureGates).toBeUndefined();
    expect(gatesFrom).toBeUndefined();
    expect(cvoInputs(request({ version: '4.20.8', capabilitySet: 'v4.18' })).inclusion.capabilities.has('OperatorLifecycleManagerV1')).toBe(true);
    expect(() => cvoInputs(request({ version: '4.16.3', capabilitySet: 'v4.18' }))).toThrow('--capability-set v4.18 is not a capability set of 4.16.3; use one of None, v4.11, v4.12, v4.13, v4.14, v4.15, v4.16, vCurrent');
    expect(() => cvoInputs(request({ version: '4.16.3', additionalCapabilities: ['OperatorLifecycleManagerV1'] }))).toThrow(/^--capabilities OperatorLifecycleManagerV1 is not a capability of 4\.16\.3; use one of baremetal, /);
    expect(() => cvoInputs(request({ version: '4.20.8', featureSet: 'OKD' }))).toThrow('--feature-set OKD is not a feature set of this release; use one of Default, TechPreviewNoUpgrade, DevPreviewNoUpgrade, CustomNoUpgrade');
  });
  it('live: the cluster\'s feature set and its FeatureGate status for the target version', () => {
    const cluster = live({ featureGate: { featureSet: 'TechPreviewNoUpgrade', status: [{ version: '5.0.2', enabled: ['ClusterAPIMachineManagement'], disabled: ['OSStreams'] }] } });
    const { inclusion, gatesFrom, warnings } = cvoInputs(request({ live: cluster }));
    expect(inclusion.featureSet).toBe('TechPreviewNoUpgrade');
    expect([...inclusion.featureGates!]).toEqual(['ClusterAPIMachineManagement']);
    expect(gatesFrom).toBe('the cluster\'s FeatureGate cluster status for 5.0.2');
    expect(warnings).toEqual([]);
  });
  it('live: no status entry for the target version yet falls back to the payload, with a note', () => {
    const cluster = live({ featureGate: { featureSet: '', status: [{ version: '4.22.3', enabled: ['Old'], disabled: [] }] } });
    const { inclusion, warnings } = cvoInputs(request({ live: cluster }));
    expect([...inclusion.featureGates!]).toEqual(['OSStreams']);
    expect(warnings[0]).toMatch(/^the cluster's FeatureGate has no status entry for 5\.0\.2 yet: its gates come from the release's FeatureGate manifest/);
  });
  it('live: capabilities as the CVO computes them (the target\'s baseline set, additional, already enabled), overrides passed on', () => {
    const overrides = [{ group: 'apps', kind: 'Deployment', namespace: 'ns', name: 'x' }];
    const cluster = live({ capabilitySpec: { baseline: 'v4.11', additional: ['Console'] }, capabilities: ['Ingress'], overrides });
    const { inclusion } = cvoInputs(request({ live: cluster }));
    expect([...inclusion.capabilities].sort()).toEqual(['Console', 'Ingress', 'MachineAPI', 'baremetal', 'marketplace', 'openshift-samples']);
    expect(inclusion.overrides).toEqual(overrides);
    // No spec: vCurrent of the TARGET release, so a capability new in it is enabled.
    expect(cvoInputs(request({ version: '4.18.1', live: live({ capabilities: ['Console'] }) })).inclusion.capabilities.has('OperatorLifecycleManagerV1')).toBe(true);
  });
});
