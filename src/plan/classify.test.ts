import { describe, expect, it } from 'vitest';
import type { ComponentImage } from '../release/image-references.js';
import type { ManifestDocument } from '../release/payload.js';
import { classifyComponents, DEFAULT_PROFILE, pinnedToControlPlane, type ClassifyOptions } from './classify.js';

const digest = (n: number) => `sha256:${n.toString(16).padStart(64, '0')}`;
const component = (n: number, name: string): ComponentImage => ({ name, names: [name], pullSpec: `quay.io/o/art@${digest(n)}`, digest: digest(n), annotations: {} });
const included = { 'include.release.openshift.io/self-managed-high-availability': 'true' };
const opts: ClassifyOptions = { profile: DEFAULT_PROFILE, featureSet: 'Default', controlPlaneOnly: [], allNodes: [] };

function workload(kind: string, name: string, podSpec: Record<string, unknown>, annotations: Record<string, string> = included): ManifestDocument {
  return { file: `0000_50_${name}.yaml`, doc: { kind, metadata: { name, namespace: 'ns', annotations }, spec: { template: { spec: podSpec } } } };
}
const master = { 'node-role.kubernetes.io/master': '' };
const img = (n: number) => `quay.io/o/art@${digest(n)}`;

describe('classifyComponents', () => {
  const components = [
    component(1, 'cluster-etcd-operator'), component(2, 'ovn-kubernetes'), component(3, 'coredns'),
    component(4, 'installer'), component(5, 'rhel-coreos'), component(6, 'ibm-only'),
    component(7, 'both'), component(8, 'router'),
  ];
  const docs: ManifestDocument[] = [
    workload('Deployment', 'etcd-operator', { nodeSelector: master, containers: [{ name: 'op', image: img(1), env: [{ name: 'OVN_IMAGE', value: img(2) }] }] }),
    workload('DaemonSet', 'dns', { containers: [{ name: 'dns', image: img(3) }] }),
    workload('Deployment', 'ibm', { nodeSelector: master, containers: [{ name: 'x', image: img(6) }] }, { 'include.release.openshift.io/ibm-cloud-managed': 'true' }),
    workload('Deployment', 'both-d', { nodeSelector: master, containers: [{ name: 'x', image: img(7) }] }),
    workload('DaemonSet', 'both-ds', { containers: [{ name: 'x', image: img(7) }] }),
    workload('Deployment', 'router', { containers: [{ name: 'r', image: img(8) }] }),
    workload('Deployment', 'ignored', { containers: [{ name: 'r', image: img(5) }] }, {}),
  ];
  const result = classifyComponents(components, docs, opts);
  const role = (n: number) => result.get(digest(n))!.role;

  it('keeps an image on control-plane nodes only when every reference is a master-pinned container', () => {
    expect(role(1)).toBe('control-plane');
    expect(result.get(digest(1))!.evidence).toEqual(['container of Deployment ns/etcd-operator (0000_50_etcd-operator.yaml), pinned to control-plane nodes']);
  });
  it('sends env-var operands to all nodes and names the variable', () => {
    expect(role(2)).toBe('all');
    expect(result.get(digest(2))!.evidence[0]).toMatch(/^referenced from env OVN_IMAGE of Deployment ns\/etcd-operator/);
  });
  it('sends DaemonSet and unpinned Deployment images to all nodes', () => {
    expect(role(3)).toBe('all');
    expect(role(8)).toBe('all');
  });
  it('sends unreferenced images to all nodes', () => {
    expect(role(4)).toBe('all');
    expect(result.get(digest(4))!.evidence[0]).toMatch(/no included manifest references it/);
  });
  it('sends node OS images to all nodes', () => {
    expect(role(5)).toBe('all');
    expect(result.get(digest(5))!.evidence).toEqual(['node OS image: every node boots from it']);
  });
  it('ignores manifests not included for the profile', () => {
    expect(role(6)).toBe('all');
    expect(result.get(digest(6))!.evidence[0]).toMatch(/only by manifests not included for profile self-managed-high-availability/);
    const ibm = classifyComponents(components, docs, { ...opts, profile: 'ibm-cloud-managed' });
    expect(ibm.get(digest(6))!.role).toBe('control-plane');
  });
  it('sends an image used by a master Deployment and a DaemonSet to all nodes', () => {
    expect(role(7)).toBe('all');
  });
  it('honours --control-plane-only and --all-nodes overrides', () => {
    const forced = classifyComponents(components, docs, { ...opts, controlPlaneOnly: ['installer'], allNodes: ['cluster-etcd-operator'] });
    expect(forced.get(digest(4))!.role).toBe('control-plane');
    expect(forced.get(digest(1))!.role).toBe('all');
  });
  it('excludes manifests for another feature set', () => {
    const tp = workload('DaemonSet', 'tp', { containers: [{ name: 'x', image: img(1) }] }, { ...included, 'release.openshift.io/feature-set': 'TechPreviewNoUpgrade' });
    expect(classifyComponents(components, [...docs, tp], opts).get(digest(1))!.role).toBe('control-plane');
    expect(classifyComponents(components, [...docs, tp], { ...opts, featureSet: 'TechPreviewNoUpgrade' }).get(digest(1))!.role).toBe('all');
  });
});

describe('pinnedToControlPlane', () => {
  it('accepts a nodeSelector or required affinity on master/control-plane labels', () => {
    expect(pinnedToControlPlane({ nodeSelector: { 'node-role.kubernetes.io/control-plane': '' } })).toBe(true);
    expect(pinnedToControlPlane({
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'node-role.kubernetes.io/master', operator: 'Exists' }] }] } } },
    })).toBe(true);
  });
  it('rejects an affinity where one ORed term admits any node', () => {
    expect(pinnedToControlPlane({
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [
        { matchExpressions: [{ key: 'node-role.kubernetes.io/master', operator: 'Exists' }] },
        { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }] },
      ] } } },
    })).toBe(false);
    expect(pinnedToControlPlane({ nodeSelector: { 'kubernetes.io/os': 'linux' } })).toBe(false);
  });
});
