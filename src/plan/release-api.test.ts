import { describe, expect, it } from 'vitest';
import { gateAllows, knownCapabilities, releaseApi } from './release-api.js';

describe('releaseApi: what each minor\'s CVO knows (openshift/api, cluster-version-operator release branches)', () => {
  it('4.16 and 4.17: sixteen capabilities, sets up to their own minor', () => {
    for (const v of ['4.16.3', '4.17.0']) {
      const api = releaseApi(v);
      expect(api.capabilities).toHaveLength(16);
      expect(api.capabilities).not.toContain('OperatorLifecycleManagerV1');
      expect(api.capabilitySets['vCurrent']).toEqual(api.capabilities);
    }
    expect(Object.keys(releaseApi('4.16.3').capabilitySets)).toEqual(['None', 'v4.11', 'v4.12', 'v4.13', 'v4.14', 'v4.15', 'v4.16', 'vCurrent']);
    expect(releaseApi('4.17.5').capabilitySets['v4.17']).toEqual(releaseApi('4.17.5').capabilitySets['v4.16']);
  });
  it('4.18 to 4.22: OLM v1 joins, v4.18 is the newest set', () => {
    for (const v of ['4.18.1', '4.19.9', '4.20.8', '4.21.2', '4.22.0']) {
      const api = releaseApi(v);
      expect(api.capabilities).toContain('OperatorLifecycleManagerV1');
      expect(api.capabilities).toHaveLength(17);
      expect(Object.keys(api.capabilitySets).at(-2)).toBe('v4.18');
      expect(api.gatedCapabilities).toEqual({});
    }
    expect(releaseApi('4.18.1').capabilitySets['v4.18']).toContain('OperatorLifecycleManagerV1');
    expect(releaseApi('4.18.1').capabilitySets['v4.17']).not.toContain('OperatorLifecycleManagerV1');
  });
  it('the CVO reads gate annotations and knows OKD from 4.22', () => {
    expect(releaseApi('4.21.9').readsGateAnnotations).toBe(false);
    expect(releaseApi('4.21.9').featureSets).not.toContain('OKD');
    expect(releaseApi('4.22.0').readsGateAnnotations).toBe(true);
    expect(releaseApi('4.22.0').featureSets).toContain('OKD');
  });
  it('4.23 and 5.0: ClusterAPI and CompatibilityRequirements, known only while their gates are on', () => {
    for (const v of ['4.23.0', '5.0.2', '5.1.0']) {
      const api = releaseApi(v);
      expect(api.capabilities).toHaveLength(19);
      expect(knownCapabilities(api, new Set())).toHaveLength(17);
      expect(knownCapabilities(api, new Set(['ClusterAPIMachineManagement']))).toHaveLength(19);
      expect(knownCapabilities(api, new Set(['CRDCompatibilityRequirementOperator']))).toEqual([...knownCapabilities(api, new Set()), 'CompatibilityRequirements']);
      expect(gateAllows(api, 'ClusterAPI', undefined)).toBe(false);
      expect(gateAllows(api, 'Console', undefined)).toBe(true);
    }
  });
  it('a version before 4.16 or none at all falls back to 4.16', () => {
    expect(releaseApi('4.14.12').minor).toBe('4.16');
    expect(releaseApi('not-a-version').minor).toBe('4.16');
  });
});
