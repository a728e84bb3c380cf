/**
 * What `prestage install` puts in a cluster, as plain objects: the CRDs, a namespace, the
 * agent's ServiceAccount with least-privilege RBAC and admission policies (agent-access.ts), the
 * agent DaemonSet with the host paths it uses and nothing else mounted, and on OpenShift the SCC
 * that allows exactly that DaemonSet. Every grant's reason: docs/node-agent.md.
 */
import yaml from 'js-yaml';
import type { Manifest } from './apply.js';
import { AGENT_NAME, DEFAULT_PIN_DROP_IN, NODE_PATHS } from '../api/names.js';
import { CRDS } from '../api/prestage-crds.js';
import { agentAccess } from './agent-access.js';

/**
 * Node for the agent, on every node (npm run bench:agent): a 1 MiB young generation (about 20 MiB
 * less RSS, 97 -> 82 MiB on the test bed) and V8 without its compilers (bytecode only: 3.7 MiB less
 * at peak, 69.6 -> 65.9, at the same CPU). --jitless turns WebAssembly off, which nothing of
 * prestage uses; V8 says so in one line on stderr at start. `--expose-gc` lets the agent collect
 * once its passes go quiet (src/agent/quiet-collector.ts: 62.9 -> 58.1 MiB idle at 1000 images).
 */
export const AGENT_NODE_OPTIONS = '--max-semi-space-size=1 --jitless --expose-gc';

export { NODE_NAME_EXTRA } from './agent-access.js';

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
   * The ValidatingAdmissionPolicies that keep each agent to its own node's NodePinnedImages and to
   * its own Leases. They need Kubernetes 1.30 (ValidatingAdmissionPolicy v1) and 1.32 (the
   * node-name claim of pod-bound tokens); without them they are left out, and any agent may write
   * any node's status and take any of the agents' Leases.
   */
  readonly admissionPolicy?: boolean;
  /**
   * `--cache-mirror=...` for the in-cluster cache (`install --cache`, src/install/cache.ts). A
   * `$(HOST_IP)` in it is each node's own address (the DaemonSet sets HOST_IP from status.hostIP).
   */
  readonly cacheMirrorArg?: string;
  /** The Secrets sets may name in `spec.pullSecrets` (`install --pull-secret-name`): the only ones the agent may get. */
  readonly pullSecretNames?: readonly string[];
}

export const DEFAULT_IMAGE_STORE = '/var/lib/containers/storage';

/** The agent's link relay, on its pod IP: CRI-O's first mirror under a cap (agent --link-relay). */
export const LINK_RELAY_PORT = 5055;

/** The first Kubernetes minor whose pod-bound tokens carry NODE_NAME_EXTRA (ValidatingAdmissionPolicy v1: 1.30). */
export const ADMISSION_POLICY_MIN_MINOR = 32;

/** The agents' `--max-pulling-nodes` (the last one given): how many pull-slot Leases they write. */
export function pullSlotsOf(options: Pick<InstallOptions, 'agentArgs'>): number {
  let slots = 0;
  const args = options.agentArgs ?? [];
  args.forEach((arg, index) => {
    const value = arg === '--max-pulling-nodes' ? args[index + 1] : /^--max-pulling-nodes=(.*)$/.exec(arg)?.[1];
    if (value !== undefined && /^\d+$/.test(value)) slots = Number(value);
  });
  return slots;
}

/** The agents' `--cache-leaf` flags: one warm Lease each. */
export function cacheLeavesOf(options: Pick<InstallOptions, 'agentArgs'>): number {
  const args = options.agentArgs ?? [];
  return args.filter((arg, index) => /^--cache-leaf=/.test(arg) || (arg === '--cache-leaf' && args[index + 1] !== undefined)).length;
}

/** In apply order: CRDs and the namespace before what lives in them. */
export function installManifests(options: InstallOptions): Manifest[] {
  const { namespace } = options;
  const port = options.metricsPort ?? 9464;
  const imageStore = options.imageStore ?? DEFAULT_IMAGE_STORE;
  const labels = { 'app.kubernetes.io/name': AGENT_NAME, 'app.kubernetes.io/part-of': 'prestage' };
  const writesRegistries = options.cacheMirrorArg !== undefined || (options.agentArgs ?? []).some((arg) => arg.startsWith('--cache-mirror'));
  return [
    ...(CRDS as unknown as Manifest[]),
    {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name: namespace,
        labels: {
          ...labels,
          // hostPID, hostPath volumes and SELinux type spc_t are beyond the baseline profile: Pod Security
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
    ...agentAccess({ namespace, labels, pullSecretNames: options.pullSecretNames ?? [], pullSlots: pullSlotsOf(options), cacheLeaves: cacheLeavesOf(options), admissionPolicy: options.admissionPolicy !== false }),
    ...(options.openshift ? openshiftSecurity(namespace, labels) : []),
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
            // The host's processes: CRI-O's pid, from /proc/<pid>/comm and cmdline (the reload is a SIGHUP to it).
            hostPID: true,
            containers: [
              {
                name: 'agent',
                image: options.image,
                args: [
                  'agent',
                  `--port=${port}`,
                  `--cri-socket=${NODE_PATHS.crioSocket}`,
                  `--drop-in=${DEFAULT_PIN_DROP_IN}`,
                  `--pull-secret=${NODE_PATHS.kubeletPullSecret}`,
                  `--registries-conf=${NODE_PATHS.registriesConf}`,
                  `--registries-conf-dir=${NODE_PATHS.registriesConfDir}`,
                  ...(options.cacheMirrorArg !== undefined ? [options.cacheMirrorArg] : []),
                  // Under a cap CRI-O pulls through the agent at its pod IP (the host reaches pods' IPs, as the kubelet's probes do).
                  `--link-relay=0.0.0.0:${LINK_RELAY_PORT}`,
                  ...(options.agentArgs ?? []),
                ],
                env: [
                  { name: 'NODE_OPTIONS', value: AGENT_NODE_OPTIONS },
                  { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
                  { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                  { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
                  ...(options.cacheMirrorArg?.includes('$(HOST_IP)') ? [{ name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } }] : []),
                ],
                ports: [{ name: 'metrics', containerPort: port }, { name: 'link-relay', containerPort: LINK_RELAY_PORT }],
                // /healthz fails only when the loop makes no progress (agent --stall-timeout, 300 s), never during a long pull.
                livenessProbe: { httpGet: { path: '/healthz', port }, periodSeconds: 30, failureThreshold: 3 },
                resources: { requests: { cpu: '10m', memory: '64Mi' }, limits: { memory: '256Mi' } },
                securityContext: {
                  // uid 0, without any capability: the drop-in directory, CRI-O's socket (0660) and the
                  // kubelet's pull secret (0600) are root's, and a signal from uid 0 to CRI-O (uid 0)
                  // needs no CAP_KILL.
                  runAsUser: 0,
                  privileged: false,
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ['ALL'] },
                  // SELinux hosts (RHCOS): container_t may not write CRI-O's drop-in directory, connect to
                  // its socket nor signal it.
                  seLinuxOptions: { type: 'spc_t' },
                },
                // Each at its host path: CRI-O's --config-dir names the drop-in directory as the host does.
                volumeMounts: [
                  { name: 'crio-socket', mountPath: NODE_PATHS.crioSocket },
                  // Read-only: crio.conf, whose pins the drop-in carries (a directory: CRI-O's packages may ship none).
                  { name: 'crio-config', mountPath: NODE_PATHS.crioConfigDir, readOnly: true },
                  // The one directory written: the drop-in, staged beside it under a dot name (a rename
                  // across mounts fails).
                  { name: 'crio-drop-ins', mountPath: NODE_PATHS.crioDropInDir },
                  { name: 'kubelet-pull-secret', mountPath: NODE_PATHS.kubeletPullSecret, readOnly: true },
                  { name: 'registries-conf', mountPath: NODE_PATHS.registriesConf, readOnly: true },
                  // Written only with --cache-mirror (its 99-prestage-cache.conf drop-in).
                  // Written: the drop-in that puts the cache (--cache-mirror) or, under a cap, the link relay first; the agent's only file there.
                  { name: 'registries-conf-d', mountPath: NODE_PATHS.registriesConfDir },
                  // Free space is statfs() of the image filesystem CRI-O reports, at its host path.
                  // HostToContainer: CRI-O's own mounts below it stay visible (and CRI-O insists on it).
                  { name: 'image-store', mountPath: imageStore, readOnly: true, mountPropagation: 'HostToContainer' },
                ],
              },
            ],
            volumes: [
              { name: 'crio-socket', hostPath: { path: NODE_PATHS.crioSocket, type: 'Socket' } },
              { name: 'crio-config', hostPath: { path: NODE_PATHS.crioConfigDir, type: 'Directory' } },
              { name: 'crio-drop-ins', hostPath: { path: NODE_PATHS.crioDropInDir, type: 'DirectoryOrCreate' } },
              // Absent on nodes whose kubelet has no pull secret: an empty file reads as none (agent and kubelet alike).
              { name: 'kubelet-pull-secret', hostPath: { path: NODE_PATHS.kubeletPullSecret, type: 'FileOrCreate' } },
              { name: 'registries-conf', hostPath: { path: NODE_PATHS.registriesConf, type: 'File' } },
              { name: 'registries-conf-d', hostPath: { path: NODE_PATHS.registriesConfDir, type: writesRegistries ? 'DirectoryOrCreate' : 'Directory' } },
              { name: 'image-store', hostPath: { path: imageStore, type: 'Directory' } },
            ],
          },
        },
      },
    },
  ];
}

/**
 * OpenShift admits pods through SecurityContextConstraints: one that allows exactly what the
 * DaemonSet asks for (hostPID, hostPath volumes, uid 0, no capability, a read-only root, spc_t),
 * usable by the agent's ServiceAccount alone.
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
      allowedCapabilities: null,
      defaultAddCapabilities: null,
      requiredDropCapabilities: ['ALL'],
      readOnlyRootFilesystem: true,
      runAsUser: { type: 'MustRunAs', uid: 0 },
      // RunAsAny: MustRunAs would also fix the MCS level (from the namespace), which spc_t does not use.
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
