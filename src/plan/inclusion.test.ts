import { describe, expect, it } from 'vitest';
import { checkInclusionOptions, notAppliedBecause, profilesOf, type InclusionOptions } from './inclusion.js';

const selfManaged = { 'include.release.openshift.io/self-managed-high-availability': 'true' };
const doc = (annotations: Record<string, string>, extra: Record<string, unknown> = {}) => ({ kind: 'Deployment', apiVersion: 'apps/v1', metadata: { name: 'd', namespace: 'ns', annotations }, ...extra });
const base: InclusionOptions = { profile: 'self-managed-high-availability', featureSet: 'Default', capabilities: new Set(['Storage']), exclude: [] };
/** A 4.22+ release: its CVO reads gate and major-version annotations. */
const v422: InclusionOptions = { ...base, featureGates: new Set(['GateOn']), majorVersion: 4, knownFeatureSets: ['Default', 'TechPreviewNoUpgrade', 'DevPreviewNoUpgrade', 'CustomNoUpgrade', 'OKD'] };
const rule = (annotations: Record<string, string>, opts: InclusionOptions = base, extra?: Record<string, unknown>) => notAppliedBecause(doc({ ...selfManaged, ...annotations }, extra), opts)?.rule;

describe('notAppliedBecause: the CVO\'s inclusion, rule by rule', () => {
  it('applies a manifest included for the profile with nothing else to check', () => {
    expect(notAppliedBecause(doc(selfManaged), base)).toBeUndefined();
  });
  it('profile: the include annotation must be "true"', () => {
    expect(notAppliedBecause(doc({}), base)).toEqual({ rule: 'profile', why: 'not included for profile self-managed-high-availability' });
    expect(notAppliedBecause(doc({ 'include.release.openshift.io/self-managed-high-availability': 'false-except-for-the-config-operator' }), base)?.why).toBe(
      'include.release.openshift.io/self-managed-high-availability is "false-except-for-the-config-operator", not "true"',
    );
  });
  it('exclude: only for identifiers the CVO was told to exclude', () => {
    expect(rule({ 'exclude.release.openshift.io/internal-openshift-hosted': 'true' })).toBeUndefined();
    expect(rule({ 'exclude.release.openshift.io/internal-openshift-hosted': 'true' }, { ...base, exclude: ['internal-openshift-hosted'] })).toBe('exclude');
  });
  it('feature-set: known values only; empty or unknown means never applied', () => {
    expect(rule({ 'release.openshift.io/feature-set': 'Default' })).toBeUndefined();
    expect(rule({ 'release.openshift.io/feature-set': 'TechPreviewNoUpgrade' })).toBe('feature-set');
    expect(rule({ 'release.openshift.io/feature-set': 'TechPreviewNoUpgrade' }, { ...base, featureSet: 'TechPreviewNoUpgrade' })).toBeUndefined();
    expect(notAppliedBecause(doc({ ...selfManaged, 'release.openshift.io/feature-set': '' }), base)?.why).toMatch(/holds "", not a feature set the CVO knows/);
    expect(notAppliedBecause(doc({ ...selfManaged, 'release.openshift.io/feature-set': 'Default,Preview' }), base)?.why).toMatch(/holds "Preview"/);
    // OKD is a feature set from 4.22: a 4.16-4.21 CVO never applies a manifest that names it.
    expect(rule({ 'release.openshift.io/feature-set': 'Default,OKD' }, { ...base, knownFeatureSets: ['Default', 'TechPreviewNoUpgrade', 'DevPreviewNoUpgrade', 'CustomNoUpgrade'] })).toBe('feature-set');
    expect(rule({ 'release.openshift.io/feature-set': 'Default,OKD' }, v422)).toBeUndefined();
  });
  it('feature-gate (4.22+): listed gates enabled, -gates disabled; ignored by older CVOs', () => {
    expect(rule({ 'release.openshift.io/feature-gate': 'GateOn' }, v422)).toBeUndefined();
    expect(notAppliedBecause(doc({ ...selfManaged, 'release.openshift.io/feature-gate': 'GateOn,GateOff' }), v422)).toEqual({ rule: 'feature-gate', why: 'feature gate GateOff is not enabled (feature-gate GateOn,GateOff)' });
    expect(rule({ 'release.openshift.io/feature-gate': '-GateOff' }, v422)).toBeUndefined();
    expect(notAppliedBecause(doc({ ...selfManaged, 'release.openshift.io/feature-gate': '-GateOn' }), v422)?.why).toMatch(/feature gate GateOn is enabled, and the manifest needs it disabled/);
    expect(rule({ 'release.openshift.io/feature-gate': 'GateOff' }, base)).toBeUndefined();
  });
  it('feature-set+gate (4.22+): a manifest with both annotations is never applied', () => {
    expect(rule({ 'release.openshift.io/feature-gate': 'GateOn', 'release.openshift.io/feature-set': 'Default' }, v422)).toBe('feature-set+gate');
    expect(rule({ 'release.openshift.io/feature-gate': 'GateOn', 'release.openshift.io/feature-set': 'Default' }, base)).toBeUndefined();
  });
  it('major-version (4.22+): include and exclude lists, only on FeatureGates and CRDs', () => {
    const fg = (value: string, major: number) => notAppliedBecause({ kind: 'FeatureGate', metadata: { annotations: { ...selfManaged, 'release.openshift.io/major-version': value } } }, { ...v422, majorVersion: major })?.rule;
    expect(fg('4,5,6', 4)).toBeUndefined();
    expect(fg('5', 4)).toBe('major-version');
    expect(fg('-5', 5)).toBe('major-version');
    expect(fg('-5', 4)).toBeUndefined();
    expect(fg('4,-4', 4)).toBe('major-version');
    expect(rule({ 'release.openshift.io/major-version': '4' }, v422)).toBe('major-version');
  });
  it('capability: every +-joined name known and enabled', () => {
    expect(rule({ 'capability.openshift.io/name': 'Storage' })).toBeUndefined();
    expect(notAppliedBecause(doc({ ...selfManaged, 'capability.openshift.io/name': 'Storage+CloudCredential' }), base)?.why).toBe('capability CloudCredential not enabled');
    const known: InclusionOptions = { ...base, knownCapabilities: new Set(['Storage', 'CloudCredential']) };
    expect(notAppliedBecause(doc({ ...selfManaged, 'capability.openshift.io/name': 'ClusterAPI' }), known)?.why).toMatch(/^unrecognized capability ClusterAPI/);
  });
  it('override: an object ClusterVersion marks unmanaged is not applied', () => {
    const overrides = [{ group: 'apps', kind: 'Deployment', namespace: 'ns', name: 'd' }];
    expect(rule({}, { ...base, overrides })).toBe('override');
    expect(rule({}, { ...base, overrides: [{ ...overrides[0]!, namespace: 'other' }] })).toBeUndefined();
  });
  it('delete: an object the release marks for deletion runs nothing', () => {
    expect(rule({ 'release.openshift.io/delete': 'true' })).toBe('delete');
  });
});

describe('checkInclusionOptions', () => {
  const profiles = profilesOf([
    { doc: { metadata: { annotations: { 'include.release.openshift.io/self-managed-high-availability': 'true' } } } },
    { doc: { metadata: { annotations: { 'include.release.openshift.io/ibm-cloud-managed': 'true' } } } },
  ]);
  it('accepts the profiles the release names and the feature sets its CVO knows', () => {
    expect(profiles).toEqual(['ibm-cloud-managed', 'self-managed-high-availability']);
    expect(() => checkInclusionOptions({ profile: 'ibm-cloud-managed', featureSet: 'TechPreviewNoUpgrade' }, profiles)).not.toThrow();
  });
  it('refuses others, listing what the release offers', () => {
    expect(() => checkInclusionOptions({ profile: 'hypershift', featureSet: 'Default' }, profiles)).toThrow('--profile hypershift is not a profile of this release; its manifests name ibm-cloud-managed, self-managed-high-availability');
    expect(() => checkInclusionOptions({ profile: 'ibm-cloud-managed', featureSet: 'OKD', knownFeatureSets: ['Default', 'CustomNoUpgrade'] }, profiles)).toThrow('--feature-set OKD is not a feature set of this release; use one of Default, CustomNoUpgrade');
  });
});
