import { describe, expect, it } from 'vitest';
import type { ManifestDocument } from '../release/documents.js';
import { gatesOfStatus, payloadFeatureGates, payloadFeatureSets, withGateOverrides } from './feature-gates.js';

/** The shape of openshift/api payload-manifests/featuregates/featureGate-4-10-<Profile>-<Set>.yaml. */
function featureGate(profile: string, set: string, enabled: string[], disabled: string[]): ManifestDocument {
  return {
    file: `0000_05_config-operator_01_featuregate-${profile}-${set}.yaml`,
    doc: {
      apiVersion: 'config.openshift.io/v1',
      kind: 'FeatureGate',
      metadata: { name: 'cluster', annotations: { [`include.release.openshift.io/${profile}`]: 'false-except-for-the-config-operator', 'release.openshift.io/feature-set': set, 'release.openshift.io/major-version': '4,5,6,7,8,9,10' } },
      spec: {},
      status: { featureGates: [{ version: '', enabled: enabled.map((name) => ({ name })), disabled: disabled.map((name) => ({ name })) }] },
    },
  };
}
const docs = [
  featureGate('self-managed-high-availability', 'Default', ['OSStreams'], ['ClusterAPIMachineManagement']),
  featureGate('self-managed-high-availability', 'TechPreviewNoUpgrade', ['OSStreams', 'ClusterAPIMachineManagement'], []),
  featureGate('ibm-cloud-managed', 'Default', [], ['OSStreams', 'ClusterAPIMachineManagement']),
];

describe('feature gates', () => {
  it('reads the payload\'s manifest for the profile and feature set', () => {
    const gates = payloadFeatureGates(docs, 'self-managed-high-availability', 'TechPreviewNoUpgrade')!;
    expect([...gates.enabled]).toEqual(['OSStreams', 'ClusterAPIMachineManagement']);
    expect(gates.from).toMatch(/featuregate-self-managed-high-availability-TechPreviewNoUpgrade\.yaml/);
    expect([...payloadFeatureGates(docs, 'ibm-cloud-managed', 'Default')!.enabled]).toEqual([]);
    expect(payloadFeatureGates(docs, 'ibm-cloud-managed', 'TechPreviewNoUpgrade')).toBeUndefined();
    expect(payloadFeatureSets(docs, 'self-managed-high-availability')).toEqual(['Default', 'TechPreviewNoUpgrade']);
  });
  it('takes a live FeatureGate\'s entry for the version, else one without version', () => {
    const live = { status: { featureGates: [{ version: '4.21.3', enabled: [{ name: 'Old' }] }, { version: '5.0.2', enabled: [{ name: 'New' }], disabled: [{ name: 'Off' }] }] } };
    expect([...gatesOfStatus(live, '5.0.2', 'live')!.enabled]).toEqual(['New']);
    expect([...gatesOfStatus(live, '5.0.2', 'live')!.known].sort()).toEqual(['New', 'Off']);
    expect(gatesOfStatus(live, '5.1.0', 'live')).toBeUndefined();
  });
  it('--feature-gates enables and disables over the base, and refuses names the release does not know', () => {
    const base = payloadFeatureGates(docs, 'self-managed-high-availability', 'Default')!;
    const custom = withGateOverrides(base, ['ClusterAPIMachineManagement', '-OSStreams']);
    expect([...custom.enabled]).toEqual(['ClusterAPIMachineManagement']);
    expect(() => withGateOverrides(base, ['ClusterAPI'])).toThrow('--feature-gates ClusterAPI: ClusterAPI is not a feature gate of this release; it knows ClusterAPIMachineManagement, OSStreams');
  });
});
