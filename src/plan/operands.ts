/**
 * Where an operator runs the operands it names in env vars, `images.json` keys and
 * `--images=` args. The manifests do not say; these rules encode what the operators do from
 * their own templates (release-4.16 to their 2026 heads), each with the reason it gives as
 * evidence. An operand no rule matches, an operator's own image included, may run on any node
 * (the safe default): an operator may run its own image in a DaemonSet it creates.
 */
import type { ComponentRole } from './types.js';

/** How a manifest names an operand: the env var, ConfigMap key or arg name, and the namespace of the naming object. */
export interface OperandReference {
  readonly key: string;
  readonly namespace: string;
}

interface OperandRule {
  readonly namespace?: RegExp;
  readonly key: RegExp;
  /** `none`: the operator runs it only in a mode a cluster must opt into. */
  readonly role: ComponentRole;
  readonly why: string;
}

const STORAGE = /^openshift-cluster-storage-operator$/;

const RULES: readonly OperandRule[] = [
  { key: /^infraImage$/, role: 'all', why: 'CRI-O\'s pause image: every pod on every node starts from it' },
  {
    namespace: /^openshift-machine-config-operator$/,
    key: /^machineConfigOperator$/,
    role: 'all',
    why: 'MCO runs its own image as the machine-config-daemon DaemonSet on every node (machine-config-operator manifests/machineconfigdaemon/daemonset.yaml) and the machine-config-server on control-plane nodes',
  },
  { namespace: /^openshift-ingress-operator$/, key: /^CANARY_IMAGE$/, role: 'all', why: 'the ingress operator runs its own image as the ingress-canary DaemonSet on workers (cluster-ingress-operator pkg/manifests/assets/canary/daemonset.yaml)' },
  { key: /^cloudControllerManagerOperator$/, role: 'all', why: 'on Azure the operator runs its own image as the init container of the azure-cloud-node-manager DaemonSet on every node (cluster-cloud-controller-manager-operator azure/assets/cloud-node-manager-daemonset.yaml)' },
  { namespace: /^openshift-machine-config-operator$/, key: /^haproxyImage$/, role: 'control-plane', why: 'MCO runs it only on control-plane nodes (the on-prem API load balancer static pod)' },
  {
    namespace: /^openshift-machine-config-operator$/,
    key: /^dockerRegistryImage$/,
    role: 'none',
    why: 'MCO runs it (the iri-registry unit on control-plane nodes) only on a cluster with an InternalReleaseImage, a no-registry install; --control-plane-only docker-registry pins it there',
  },
  { key: /^cloudControllerManager/, role: 'control-plane', why: 'cloud controller managers run in a Deployment pinned to control-plane nodes' },
  { key: /^cloudNodeManager/, role: 'all', why: 'cloud node managers run in a DaemonSet on every node' },
  { key: /^clusterAPIController/, role: 'control-plane', why: 'Machine API providers run in the machine-api-controllers Deployment on control-plane nodes' },
  { namespace: /^openshift-machine-api$/, key: /^(baremetal|ironic|imageCustomization|machineOS)/, role: 'control-plane', why: 'the bare-metal operator runs metal3 on a control-plane node' },
  { namespace: STORAGE, key: /^(NODE_DRIVER_REGISTRAR|LIVENESS_PROBE)_IMAGE$/, role: 'all', why: 'CSI node sidecars run in the driver\'s node DaemonSet on every node' },
  { namespace: STORAGE, key: /^(PROVISIONER|ATTACHER|RESIZER|SNAPSHOTTER)_IMAGE$/, role: 'control-plane', why: 'CSI controller sidecars run in the driver\'s controller Deployment on control-plane nodes' },
  { namespace: STORAGE, key: /_(OPERATOR|WEBHOOK)_IMAGE$/, role: 'control-plane', why: 'CSI driver operators and webhooks run in Deployments pinned to control-plane nodes' },
  { namespace: STORAGE, key: /_DRIVER_IMAGE$/, role: 'all', why: 'a CSI driver runs in its node DaemonSet on every node' },
  { key: /_(POD|WORKLOAD)_IDENTITY_WEBHOOK_IMAGE$/, role: 'control-plane', why: 'the pod identity webhook runs in a Deployment on control-plane nodes' },
  { namespace: /^openshift-network-operator$/, key: /^(MULTUS_ADMISSION_CONTROLLER|CLOUD_NETWORK_CONFIG_CONTROLLER)_IMAGE$/, role: 'control-plane', why: 'the network operator runs it in a Deployment pinned to control-plane nodes' },
  { namespace: /^openshift-network-operator$/, key: /_IMAGE$/, role: 'all', why: 'the network operator runs its node agents as DaemonSets on every node' },
  {
    namespace: /^openshift-(etcd|kube-apiserver|kube-controller-manager|kube-scheduler)-operator$/,
    key: /IMAGE/,
    role: 'control-plane',
    why: 'the operator runs it as a static pod of the control plane',
  },
  {
    namespace: /^openshift-(apiserver|authentication|controller-manager)-operator$/,
    key: /IMAGE/,
    role: 'control-plane',
    why: 'the operator runs it in a Deployment pinned to control-plane nodes',
  },
];

export interface OperandPlacement {
  readonly role: ComponentRole;
  readonly why: string;
}

export function operandPlacement(ref: OperandReference): OperandPlacement {
  const rule = RULES.find((r) => r.key.test(ref.key) && (!r.namespace || r.namespace.test(ref.namespace)));
  return rule ? { role: rule.role, why: rule.why } : { role: 'all', why: 'its operator may start it on any node' };
}
