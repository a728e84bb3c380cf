import { describe, expect, it } from 'vitest';
import type { ComponentImage } from '../release/image-references.js';
import type { ManifestDocument } from '../release/documents.js';
import { classifyComponents, DEFAULT_PROFILE, pinnedToControlPlane, type ClassifyOptions } from './classify.js';

const digest = (n: number) => `sha256:${n.toString(16).padStart(64, '0')}`;
const component = (n: number, name: string): ComponentImage => ({ name, names: [name], pullSpec: `quay.io/o/art@${digest(n)}`, digest: digest(n), annotations: {} });
const included = { 'include.release.openshift.io/self-managed-high-availability': 'true' };
const opts: ClassifyOptions = { profile: DEFAULT_PROFILE, featureSet: 'Default', capabilities: new Set(), exclude: [], controlPlaneOnly: [], allNodes: [] };

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
    expect(result.get(digest(2))!.evidence[0]).toMatch(/^env OVN_IMAGE of Deployment ns\/etcd-operator .*: its operator may start it on any node$/);
  });
  it('sends DaemonSet and unpinned Deployment images to all nodes', () => {
    expect(role(3)).toBe('all');
    expect(role(8)).toBe('all');
  });
  it('puts images no manifest references in no set', () => {
    expect(role(4)).toBe('none');
    expect(result.get(digest(4))!.evidence[0]).toMatch(/no release manifest references it/);
  });
  it('sends node OS images to all nodes', () => {
    expect(role(5)).toBe('all');
    expect(result.get(digest(5))!.evidence).toEqual(['node OS image: every node is rebased to it in the upgrade']);
  });
  it('ignores manifests not included for the profile', () => {
    expect(role(6)).toBe('none');
    expect(result.get(digest(6))!.evidence[0]).toBe('referenced only by manifests the cluster does not apply (0000_50_ibm.yaml: [profile] not included for profile self-managed-high-availability)');
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

describe('classifyComponents: inclusion as the CVO decides it', () => {
  const c = [component(1, 'x')];
  const ds = (annotations: Record<string, string>) => [workload('DaemonSet', 'x', { containers: [{ name: 'x', image: img(1) }] }, { ...included, ...annotations })];
  const roleWith = (annotations: Record<string, string>, o: Partial<ClassifyOptions> = {}) => classifyComponents(c, ds(annotations), { ...opts, ...o }).get(digest(1))!;

  it('applies exclude.release.openshift.io/X manifests unless --exclude X', () => {
    const hosted = { 'exclude.release.openshift.io/internal-openshift-hosted': 'true' };
    expect(roleWith(hosted).role).toBe('all');
    expect(roleWith(hosted, { exclude: ['internal-openshift-hosted'] }).evidence[0]).toMatch(/excluded by --exclude internal-openshift-hosted/);
  });
  it('reads the feature-set annotation as a comma list, as the CVO splits it', () => {
    const both = { 'release.openshift.io/feature-set': 'Default,TechPreviewNoUpgrade' };
    expect(roleWith(both).role).toBe('all');
    expect(roleWith(both, { featureSet: 'TechPreviewNoUpgrade' }).role).toBe('all');
    expect(roleWith(both, { featureSet: 'CustomNoUpgrade' }).evidence[0]).toMatch(/\[feature-set\] only for feature set Default,TechPreviewNoUpgrade, not CustomNoUpgrade/);
    // library-go does not trim: " TechPreviewNoUpgrade" is no feature set, so the manifest is never applied.
    expect(roleWith({ 'release.openshift.io/feature-set': 'Default, TechPreviewNoUpgrade' }).evidence[0]).toMatch(/\[feature-set\] .*" TechPreviewNoUpgrade", not a feature set the CVO knows/);
  });
  it('needs every +-joined capability enabled', () => {
    const gated = { 'capability.openshift.io/name': 'Storage+CloudCredential' };
    expect(roleWith(gated, { capabilities: new Set(['Storage']) }).evidence[0]).toMatch(/capability CloudCredential not enabled/);
    expect(roleWith(gated, { capabilities: new Set(['Storage', 'CloudCredential']) }).role).toBe('all');
  });
});

describe('classifyComponents: operands and platforms', () => {
  const ns = (namespace: string, d: ManifestDocument): ManifestDocument => ({ ...d, doc: { ...d.doc, metadata: { ...(d.doc.metadata as object), namespace } } });
  const components = [
    component(1, 'aws-ebs-csi-driver'), component(2, 'aws-ebs-csi-driver-operator'), component(3, 'ovn-kubernetes'),
    component(4, 'aws-cloud-controller-manager'), component(5, 'azure-cloud-node-manager'), component(6, 'prometheus'),
    component(7, 'keepalived-ipfailover'), component(8, 'cluster-cloud-controller-manager-operator'), component(9, 'multus-admission-controller'),
  ];
  const images = { cloudControllerManagerOperator: img(8), cloudControllerManagerAWS: img(4), cloudNodeManagerAzure: img(5) };
  const docs: ManifestDocument[] = [
    ns('openshift-cluster-storage-operator', workload('Deployment', 'cluster-storage-operator', { nodeSelector: master, containers: [{ name: 'op', image: img(99), env: [
      { name: 'AWS_EBS_DRIVER_IMAGE', value: img(1) }, { name: 'AWS_EBS_DRIVER_OPERATOR_IMAGE', value: img(2) },
    ] }] })),
    ns('openshift-network-operator', workload('Deployment', 'network-operator', { nodeSelector: master, containers: [{ name: 'op', image: img(98), env: [
      { name: 'OVN_IMAGE', value: img(3) }, { name: 'MULTUS_ADMISSION_CONTROLLER_IMAGE', value: img(9) },
    ] }] })),
    ns('openshift-cloud-controller-manager-operator', workload('Deployment', 'cluster-cloud-controller-manager-operator', { nodeSelector: master, containers: [{ name: 'op', image: img(8) }] })),
    { file: '0000_26_ccm_images.yaml', doc: { kind: 'ConfigMap', metadata: { name: 'cloud-controller-manager-images', namespace: 'openshift-cloud-controller-manager-operator', annotations: included }, data: { 'images.json': JSON.stringify(images) } } },
    ns('openshift-monitoring', workload('Deployment', 'cluster-monitoring-operator', { nodeSelector: master, containers: [{ name: 'op', image: img(97), args: [`-images=prometheus=${img(6)}`] }] })),
    { file: '0000_80_mco_images.yaml', doc: { kind: 'ConfigMap', metadata: { name: 'mco-images', namespace: 'openshift-machine-config-operator', annotations: included }, data: { 'images.json': JSON.stringify({ keepalivedImage: img(7) }) } } },
  ];
  const on = (platform?: ClassifyOptions['platform']) => classifyComponents(components, docs, { ...opts, ...(platform ? { platform } : {}) });
  const unknown = on();

  it('places CSI drivers on every node and their operators on control-plane nodes, naming the env var', () => {
    expect(unknown.get(digest(1))!.role).toBe('all');
    expect(unknown.get(digest(1))!.evidence[0]).toMatch(/^env AWS_EBS_DRIVER_IMAGE of Deployment openshift-cluster-storage-operator\/cluster-storage-operator .*: a CSI driver runs in its node DaemonSet on every node$/);
    expect(unknown.get(digest(2))!.role).toBe('control-plane');
  });
  it('places network node agents on every node and the multus admission controller on control-plane nodes', () => {
    expect(unknown.get(digest(3))!.role).toBe('all');
    expect(unknown.get(digest(9))!.role).toBe('control-plane');
  });
  it('reads images.json keys: cloud controller managers on control-plane nodes, node managers everywhere', () => {
    expect(unknown.get(digest(4))!.role).toBe('control-plane');
    expect(unknown.get(digest(4))!.evidence[0]).toMatch(/^images\.json key cloudControllerManagerAWS of ConfigMap/);
    expect(unknown.get(digest(5))!.role).toBe('all');
  });
  it('reads --images=NAME= args as operands that may run anywhere', () => {
    expect(unknown.get(digest(6))!.role).toBe('all');
    expect(unknown.get(digest(6))!.evidence[0]).toMatch(/^arg --images=prometheus of Deployment/);
  });
  it('with an unknown platform keeps every platform\'s images and records which platforms they serve', () => {
    expect(unknown.get(digest(1))!.platforms).toEqual(['AWS']);
    expect(unknown.get(digest(5))!.platforms).toEqual(['Azure']);
    expect(unknown.get(digest(8))!.platforms).toBeUndefined();
  });
  it('leaves out images of other platforms, with the evidence the release gives', () => {
    const aws = on('AWS');
    expect(aws.get(digest(1))!.role).toBe('all');
    expect(aws.get(digest(5))!.role).toBe('none');
    expect(aws.get(digest(5))!.evidence[0]).toMatch(/^serves only Azure \(images\.json key cloudNodeManagerAzure of ConfigMap .*\), not --platform AWS$/);
    expect(aws.get(digest(4))!.role).toBe('control-plane');
    const gcp = on('GCP');
    expect(gcp.get(digest(4))!.role).toBe('none');
    // The operator's own image: on Azure it is the init container of the node manager DaemonSet, so any node.
    expect(gcp.get(digest(8))!.role).toBe('all');
    expect(gcp.get(digest(8))!.evidence.join('; ')).toMatch(/images\.json key cloudControllerManagerOperator .*: on Azure the operator runs its own image as the init container of the azure-cloud-node-manager DaemonSet/);
  });
  it('falls back to the component name only when no reference names a platform', () => {
    expect(unknown.get(digest(7))!.platforms).toEqual(['BareMetal', 'Nutanix', 'OpenStack', 'VSphere', 'oVirt']);
    expect(on('AWS').get(digest(7))!.evidence[0]).toMatch(/component keepalived-ipfailover: keepalived holds the API and ingress VIPs/);
    expect(on('VSphere').get(digest(7))!.role).toBe('all');
  });
  it('lets --all-nodes override a platform decision', () => {
    const forced = classifyComponents(components, docs, { ...opts, platform: 'AWS', allNodes: ['azure-cloud-node-manager'] });
    expect(forced.get(digest(5))!.role).toBe('all');
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
