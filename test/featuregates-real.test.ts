/**
 * The payload's real FeatureGate manifests (openshift/api main, Aug 2026, the 5.0 era, as the Go
 * module ships them in payload-manifests/featuregates/) read the way a plan reads a release's
 * manifests: kept whole, found per profile and feature set, and turned into the gates and
 * capabilities a 5.0 CVO decides inclusion with.
 */
import { describe, expect, it } from 'vitest';
import { parseDocuments } from '../src/release/documents.js';
import { cvoInputs } from '../src/plan/cvo-inputs.js';
import { payloadFeatureGates, payloadFeatureSets } from '../src/plan/feature-gates.js';
import { notAppliedBecause } from '../src/plan/inclusion.js';
import { payloadFeatureGateFiles } from './mco/crds.js';

const files = await payloadFeatureGateFiles();
const warnings: string[] = [];
const documents = parseDocuments(new Map([...files].map(([name, text]) => [`0000_05_config-operator_01_${name}`, text])), warnings);
const SMHA = 'self-managed-high-availability';
const HYPERSHIFT = 'ibm-cloud-managed';

describe('the real FeatureGate manifests of the 5.0 era', () => {
  it('are all read, whole, with their status', () => {
    expect(warnings).toEqual([]);
    expect(files.size).toBe(8);
    expect(documents.filter((d) => d.doc.kind === 'FeatureGate')).toHaveLength(8);
    for (const { doc } of documents) expect((doc.status as { featureGates: unknown[] }).featureGates.length).toBeGreaterThan(0);
  });

  it('are found per profile (SelfManagedHA, HyperShift = ibm-cloud-managed) and feature set', () => {
    expect(payloadFeatureSets(documents, SMHA)).toEqual(['Default', 'DevPreviewNoUpgrade', 'OKD', 'TechPreviewNoUpgrade']);
    expect(payloadFeatureSets(documents, HYPERSHIFT)).toEqual(['Default', 'DevPreviewNoUpgrade', 'OKD', 'TechPreviewNoUpgrade']);
    const byDefault = payloadFeatureGates(documents, SMHA, 'Default')!;
    const techPreview = payloadFeatureGates(documents, SMHA, 'TechPreviewNoUpgrade')!;
    expect(byDefault.enabled.has('ClusterAPIMachineManagement')).toBe(false);
    expect(techPreview.enabled.has('ClusterAPIMachineManagement')).toBe(true);
    expect(techPreview.enabled.size).toBeGreaterThan(byDefault.enabled.size);
    expect(byDefault.known).toEqual(techPreview.known);
  });

  it('are never applied by the CVO itself (the config operator owns them)', () => {
    const opts = { profile: SMHA, featureSet: 'Default', capabilities: new Set<string>(), exclude: [], featureGates: new Set<string>(), majorVersion: 5 };
    const rules = documents.map(({ file, doc }) => [file.replace(/^.*featureGate-4-10-/, ''), notAppliedBecause(doc, opts)?.rule]);
    // In the CVO's order: another feature set's manifest fails on its feature set first; Default's on the profile value.
    expect(Object.fromEntries(rules)).toEqual({
      'Hypershift-Default.yaml': 'profile', 'Hypershift-DevPreviewNoUpgrade.yaml': 'feature-set', 'Hypershift-OKD.yaml': 'feature-set', 'Hypershift-TechPreviewNoUpgrade.yaml': 'feature-set',
      'SelfManagedHA-Default.yaml': 'profile', 'SelfManagedHA-DevPreviewNoUpgrade.yaml': 'feature-set', 'SelfManagedHA-OKD.yaml': 'feature-set', 'SelfManagedHA-TechPreviewNoUpgrade.yaml': 'feature-set',
    });
  });

  it('give a 5.0 CVO the gates that make ClusterAPI a capability only under TechPreviewNoUpgrade', () => {
    const inputs = (featureSet: string) => cvoInputs({ version: '5.0.2', documents, profile: SMHA, featureSet, featureGates: [], additionalCapabilities: [], exclude: [] });
    expect(inputs('Default').inclusion.knownCapabilities.has('ClusterAPI')).toBe(false);
    expect(inputs('TechPreviewNoUpgrade').inclusion.capabilities.has('ClusterAPI')).toBe(true);
    expect(inputs('OKD').inclusion.featureSet).toBe('OKD');
    expect(() => cvoInputs({ version: '5.0.2', documents, profile: SMHA, featureGates: ['NoSuchGate'], additionalCapabilities: [], exclude: [] })).toThrow(/^--feature-gates NoSuchGate: NoSuchGate is not a feature gate of this release; it knows /);
  });
});
