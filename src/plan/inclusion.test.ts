import { describe, expect, it } from 'vitest';
import { checkInclusionOptions, enabledCapabilities, KNOWN_CAPABILITIES, vocabularyOf } from './inclusion.js';

describe('enabledCapabilities', () => {
  it('is the baseline set plus the additional capabilities', () => {
    expect([...enabledCapabilities('None', [], KNOWN_CAPABILITIES)]).toEqual([]);
    expect([...enabledCapabilities('None', ['Ingress'], KNOWN_CAPABILITIES)]).toEqual(['Ingress']);
    expect(enabledCapabilities('v4.11', [], KNOWN_CAPABILITIES)).toEqual(new Set(['baremetal', 'marketplace', 'openshift-samples', 'MachineAPI']));
    expect(enabledCapabilities('vCurrent', [], KNOWN_CAPABILITIES).size).toBe(KNOWN_CAPABILITIES.length);
  });
  it('refuses unknown sets and capabilities, listing the known ones', () => {
    expect(() => enabledCapabilities('v9', [], KNOWN_CAPABILITIES)).toThrow(/--capability-set v9 is not a capability set; use one of None, v4.11, .*vCurrent/);
    expect(() => enabledCapabilities('None', ['Storag'], KNOWN_CAPABILITIES)).toThrow(/--capabilities Storag is not a capability; use one of baremetal, /);
  });
});

describe('checkInclusionOptions', () => {
  const vocabulary = vocabularyOf([
    { doc: { metadata: { annotations: { 'include.release.openshift.io/self-managed-high-availability': 'true', 'release.openshift.io/feature-set': 'TechPreviewNoUpgrade,DevPreviewNoUpgrade' } } } },
    { doc: { metadata: { annotations: { 'include.release.openshift.io/ibm-cloud-managed': 'true' } } } },
  ]);
  const base = { profile: 'self-managed-high-availability', featureSet: 'Default', capabilities: new Set<string>(), exclude: [] };
  it('accepts the profiles and feature sets the release names', () => {
    expect(vocabulary.profiles).toEqual(['ibm-cloud-managed', 'self-managed-high-availability']);
    expect(vocabulary.featureSets).toEqual(['Default', 'DevPreviewNoUpgrade', 'TechPreviewNoUpgrade']);
    expect(() => checkInclusionOptions({ ...base, featureSet: 'TechPreviewNoUpgrade' }, vocabulary)).not.toThrow();
  });
  it('refuses others, listing the release\'s values', () => {
    expect(() => checkInclusionOptions({ ...base, profile: 'hypershift' }, vocabulary)).toThrow('--profile hypershift is not a profile of this release; its manifests name ibm-cloud-managed, self-managed-high-availability');
    expect(() => checkInclusionOptions({ ...base, featureSet: 'Tech' }, vocabulary)).toThrow('--feature-set Tech is not a feature set of this release; its manifests name Default, DevPreviewNoUpgrade, TechPreviewNoUpgrade');
  });
});
