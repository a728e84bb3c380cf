/**
 * What `prestage install` puts in a cluster, as plain objects: the CRDs, a namespace, the
 * agent's ServiceAccount with least-privilege RBAC, the agent DaemonSet, and an admission
 * policy so a node's agent can write only its own node's NodePinnedImages.
 */
import yaml from 'js-yaml';
import { GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS } from '../api/prestage.js';
import type { Manifest } from './apply.js';
import { DEFAULT_PIN_DROP_IN } from '../api/names.js';
import { DEFAULT_REGISTRIES_CONF, DEFAULT_REGISTRIES_CONF_DIR } from '../api/names.js';
import { AGENT_NAME } from '../api/names.js';
import { CRDS } from '../api/prestage-crds.js';

export interface InstallOptions {
  readonly namespace: string;
  /** The prestage image the DaemonSet runs (`prestage agent`). */
  readonly image: string;
  readonly metricsPort?: number;
  /** Extra `prestage agent` flags, e.g. `--reserve=32Gi`. */
  readonly agentArgs?: readonly string[];
  /** CRI-O's storage root (`root` in crio.conf): the agent statfs()s the image filesystem there. */
  readonly imageStore?: string;
  /** OpenShift (security.openshift.io served): a SecurityContextConstraints the agent's ServiceAccount may use. */
  readonly openshift?: boolean;
  /**
   * The ValidatingAdmissionPolicy that keeps each agent to its own node's NodePinnedImages. It
   * needs Kubernetes 1.30 (ValidatingAdmissionPolicy v1) and 1.32 (the node-name claim of pod-bound
   * tokens); without them it is left out, and any agent may write any node's status.
   */
  readonly admissionPolicy?: boolean;
  /**
   * `--cache-mirror=...` for the in-cluster cache (`install --cache`, src/install/cache.ts). A
   * `$(HOST_IP)` in it is each node's own address (the DaemonSet sets HOST_IP from status.hostIP).
   */
  readonly cacheMirrorArg?: string;
}

export const DEFAULT_IMAGE_STORE = '/var/lib/containers/storage';
/** Host files the agent only reads: through the host's root (hostPID), so no hostPath creates them. */
export const HOST_ROOT = '/proc/1/root';

/** The extra a pod-bound ServiceAccount token carries (Kubernetes 1.32+): the pod's node. */
export const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';
/** The first Kubernetes minor whose pod-bound tokens carry NODE_NAME_EXTRA (ValidatingAdmissionPolicy v1: 1.30). */
export const ADMISSION_POLICY_MIN_MINOR = 32;

/** In apply order: CRDs and the namespace before what lives in them. */
export function installManifests(options: InstallOptions): Manifest[] {
  const { namespace } = options;
  const port = options.metricsPort ?? 9464;
  const imageStore = options.imageStore ?? DEFAULT_IMAGE_STORE;
  const labels = { 'app.kubernetes.io/name': AGENT_NAME, 'app.kubernetes.io/part-of': 'prestage' };
  const serviceAccountUser = `system:serviceaccount:${namespace}:${AGENT_NAME}`;
  return [
    ...(CRDS as unknown as Manifest[]),
    {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name: namespace,
        labels: {
          ...labels,
          // hostPID, hostPath and added capabilities are beyond the baseline profile: Pod Security
          // admission must allow the privileged level here (and only here).
          'pod-security.kubernetes.io/enforce': 'privileged',
          'pod-security.kubernetes.io/audit': 'privileged',
          'pod-security.kubernetes.io/warn': 'privileged',
          // OpenShift would otherwise rewrite the labels above from the SCCs its users may use.
          ...(options.openshift ? { 'security.openshift.io/scc.podSecurityLabelSync': 'false' } : {}),
        },
      },
    },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: AGENT_NAME, namespace, labels } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: AGENT_NAME, labels },
      rules: [
        { apiGroups: [GROUP], resources: [PINNED_IMAGE_SETS], verbs: ['get', 'list', 'watch'] },
        // Create its own object once; after that only the status subresource (no spec edits, no deletes).
        { apiGroups: [GROUP], resources: [NODE_PINNED_IMAGES], verbs: ['get', 'create'] },
        { apiGroups: [GROUP], resources: [`${NODE_PINNED_IMAGES}/status`], verbs: ['get', 'update', 'patch'] },
        // Its own Node's labels decide which sets select it.
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: AGENT_NAME, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: AGENT_NAME },
      subjects: [{ kind: 'ServiceAccount', name: AGENT_NAME, namespace }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: AGENT_NAME, namespace, labels },
      rules: [
        // The pull-slot Leases (`--max-pulling-nodes`) live in the agent's namespace; watched, not polled.
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'create', 'update'] },
        // Warning Events about its Node, here rather than cluster-wide.
        { apiGroups: [''], resources: ['events'], verbs: ['create'] },
        // The Secrets sets name in spec.pullSecrets: get by name, here only; no list, no watch.
        { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: AGENT_NAME, namespace, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: AGENT_NAME },
      subjects: [{ kind: 'ServiceAccount', name: AGENT_NAME, namespace }],
    },
    ...(options.openshift ? openshiftSecurity(namespace, labels) : []),
    ...(options.admissionPolicy === false ? [] : ownNodePolicy(serviceAccountUser, labels)),
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: AGENT_NAME, namespace, labels },
      spec: {
        selector: { matchLabels: { 'app.kubernetes.io/name': AGENT_NAME } },
        updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '10%' } },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: AGENT_NAME,
            priorityClassName: 'system-node-critical',
            // Every node, control plane included.
            tolerations: [{ operator: 'Exists' }],
            // The host's processes: CRI-O's pid (the reload is a SIGHUP to it) and the host's root
            // through /proc/1/root (the files the agent only reads).
            hostPID: true,
            containers: [
              {
                name: 'agent',
                image: options.image,
                args: [
                  'agent',
                  `--port=${port}`,
                  `--drop-in=${DEFAULT_PIN_DROP_IN}`,
                  `--pull-secret=${HOST_ROOT}/var/lib/kubelet/config.json`,
                  `--registries-conf=${HOST_ROOT}${DEFAULT_REGISTRIES_CONF}`,
                  `--registries-conf-dir=${HOST_ROOT}${DEFAULT_REGISTRIES_CONF_DIR}`,
                  ...(options.cacheMirrorArg !== undefined ? [options.cacheMirrorArg] : []),
                  ...(options.agentArgs ?? []),
                ],
                env: [
                  // A 1 MiB young generation: about 20 MiB less RSS on every node (97 -> 82 MiB measured on the test bed).
                  { name: 'NODE_OPTIONS', value: '--max-semi-space-size=1' },
                  { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
                  { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                  ...(options.cacheMirrorArg?.includes('$(HOST_IP)') ? [{ name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } }] : []),
                ],
                ports: [{ name: 'metrics', containerPort: port }],
                // /healthz fails only when the loop makes no progress (agent --stall-timeout, 300 s), never during a long pull.
                livenessProbe: { httpGet: { path: '/healthz', port }, periodSeconds: 30, failureThreshold: 3 },
                resources: { requests: { cpu: '10m', memory: '64Mi' }, limits: { memory: '256Mi' } },
                securityContext: {
                  // root: the drop-in directory, the CRI socket and the host files it reads are root's.
                  runAsUser: 0,
                  privileged: false,
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  // SYS_PTRACE, only: /proc/<pid>/root of CRI-O and of the host's init (a process with
                  // more capabilities than ours); signalling CRI-O (same uid) needs no capability.
                  capabilities: { drop: ['ALL'], add: ['SYS_PTRACE'] },
                  // SELinux hosts (RHCOS): container_t may not write /etc/crio nor signal CRI-O.
                  seLinuxOptions: { type: 'spc_t' },
                },
                volumeMounts: [
                  { name: 'crio-socket', mountPath: '/var/run/crio/crio.sock' },
                  // All of /etc/crio: the drop-in is staged in /etc/crio and renamed into crio.conf.d,
                  // which needs both on one mount.
                  { name: 'crio-config', mountPath: '/etc/crio' },
                  // Free space is statfs() of the image filesystem CRI-O reports, at its host path.
                  // HostToContainer: CRI-O's own mounts below it stay visible (and CRI-O insists on it).
                  { name: 'image-store', mountPath: imageStore, readOnly: true, mountPropagation: 'HostToContainer' },
                ],
              },
            ],
            // Only what must exist already: nothing is created on a host.
            volumes: [
              { name: 'crio-socket', hostPath: { path: '/var/run/crio/crio.sock', type: 'Socket' } },
              { name: 'crio-config', hostPath: { path: '/etc/crio', type: 'Directory' } },
              { name: 'image-store', hostPath: { path: imageStore, type: 'Directory' } },
            ],
          },
        },
      },
    },
  ];
}

/** Only the agent of node X may write NodePinnedImages X: the node name in its pod-bound token. */
function ownNodePolicy(serviceAccountUser: string, labels: Record<string, string>): Manifest[] {
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: `${AGENT_NAME}-own-node`, labels },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [
            { apiGroups: [GROUP], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: [NODE_PINNED_IMAGES, `${NODE_PINNED_IMAGES}/status`] },
          ],
        },
        matchConditions: [{ name: 'is-the-agent', expression: `request.userInfo.username == '${serviceAccountUser}'` }],
        validations: [
          {
            // Only a token bound to a pod on node X (its extra names X) may write NodePinnedImages X.
            expression: `has(request.userInfo.extra) && '${NODE_NAME_EXTRA}' in request.userInfo.extra && request.userInfo.extra['${NODE_NAME_EXTRA}'] == [object.metadata.name]`,
            messageExpression: `'${AGENT_NAME} may write only the NodePinnedImages of its own node, not ' + object.metadata.name`,
            reason: 'Forbidden',
          },
        ],
      },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: `${AGENT_NAME}-own-node`, labels },
      spec: { policyName: `${AGENT_NAME}-own-node`, validationActions: ['Deny'] },
    },
  ];
}

/**
 * OpenShift admits pods through SecurityContextConstraints: one that allows exactly what the
 * DaemonSet asks for (hostPID, the three hostPath volumes, root, SYS_PTRACE, spc_t), usable by the
 * agent's ServiceAccount alone.
 */
function openshiftSecurity(namespace: string, labels: Record<string, string>): Manifest[] {
  return [
    {
      apiVersion: 'security.openshift.io/v1',
      kind: 'SecurityContextConstraints',
      metadata: { name: AGENT_NAME, labels },
      priority: null,
      allowHostPID: true,
      allowHostDirVolumePlugin: true,
      allowHostIPC: false,
      allowHostNetwork: false,
      allowHostPorts: false,
      allowPrivilegedContainer: false,
      allowPrivilegeEscalation: false,
      allowedCapabilities: ['SYS_PTRACE'],
      defaultAddCapabilities: null,
      requiredDropCapabilities: null,
      readOnlyRootFilesystem: false,
      runAsUser: { type: 'RunAsAny' },
      seLinuxContext: { type: 'RunAsAny' },
      fsGroup: { type: 'RunAsAny' },
      supplementalGroups: { type: 'RunAsAny' },
      volumes: ['hostPath', 'projected'],
      users: [],
      groups: [],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: `${AGENT_NAME}-scc`, namespace, labels },
      rules: [{ apiGroups: ['security.openshift.io'], resources: ['securitycontextconstraints'], resourceNames: [AGENT_NAME], verbs: ['use'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: `${AGENT_NAME}-scc`, namespace, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${AGENT_NAME}-scc` },
      subjects: [{ kind: 'ServiceAccount', name: AGENT_NAME, namespace }],
    },
  ];
}

export function renderInstallYaml(manifests: readonly Manifest[]): string {
  return manifests.map((manifest) => `---\n${yaml.dump(manifest, { lineWidth: -1, noRefs: true, sortKeys: false })}`).join('');
}
