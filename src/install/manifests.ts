/**
 * What `prestage install` puts in a cluster, as plain objects: the CRDs, a namespace, the
 * agent's ServiceAccount with least-privilege RBAC, the agent DaemonSet, and an admission
 * policy so a node's agent can write only its own node's NodePinnedImages.
 */
import yaml from 'js-yaml';
import { CRDS, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS } from '../api/prestage.js';
import { DEFAULT_PIN_DROP_IN } from '../agent/crio.js';
import type { Manifest } from './apply.js';

export interface InstallOptions {
  readonly namespace: string;
  /** The prestage image the DaemonSet runs (`prestage agent`). */
  readonly image: string;
  readonly metricsPort?: number;
  /** Extra `prestage agent` flags, e.g. `--reserve=32Gi`. */
  readonly agentArgs?: readonly string[];
  /** CRI-O's storage root (`root` in crio.conf): the agent statfs()s the image filesystem there. */
  readonly imageStore?: string;
}

export const DEFAULT_IMAGE_STORE = '/var/lib/containers/storage';

export const AGENT_NAME = 'prestage-agent';
/** The extra a pod-bound ServiceAccount token carries (Kubernetes 1.32+): the pod's node. */
export const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';

/** In apply order: CRDs and the namespace before what lives in them. */
export function installManifests(options: InstallOptions): Manifest[] {
  const { namespace } = options;
  const port = options.metricsPort ?? 9464;
  const imageStore = options.imageStore ?? DEFAULT_IMAGE_STORE;
  const labels = { 'app.kubernetes.io/name': AGENT_NAME, 'app.kubernetes.io/part-of': 'prestage' };
  const serviceAccountUser = `system:serviceaccount:${namespace}:${AGENT_NAME}`;
  return [
    ...(CRDS as unknown as Manifest[]),
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace, labels } },
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
            // The default reload signals CRI-O's host pid, found in the host's /proc.
            hostPID: true,
            containers: [
              {
                name: 'agent',
                image: options.image,
                args: ['agent', `--port=${port}`, `--drop-in=${DEFAULT_PIN_DROP_IN}`, ...(options.agentArgs ?? [])],
                env: [
                  // A 1 MiB young generation: about 20 MiB less RSS on every node (97 -> 82 MiB measured on the test bed).
                  { name: 'NODE_OPTIONS', value: '--max-semi-space-size=1' },
                  { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
                  { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                ],
                ports: [{ name: 'metrics', containerPort: port }],
                livenessProbe: { httpGet: { path: '/healthz', port }, periodSeconds: 30, failureThreshold: 3 },
                resources: { requests: { cpu: '10m', memory: '64Mi' }, limits: { memory: '256Mi' } },
                // Writes /etc/crio and signals CRI-O: root on the host, by nature.
                securityContext: { privileged: true, runAsUser: 0 },
                volumeMounts: [
                  { name: 'crio-socket', mountPath: '/var/run/crio/crio.sock' },
                  // All of /etc/crio: the drop-in is staged in /etc/crio and renamed into crio.conf.d,
                  // which needs both on one mount.
                  { name: 'crio-config', mountPath: '/etc/crio' },
                  { name: 'kubelet-pull-secret', mountPath: '/var/lib/kubelet/config.json', readOnly: true },
                  // registries.conf and its drop-ins: image sizes are read from CRI-O's mirrors.
                  { name: 'containers-config', mountPath: '/etc/containers', readOnly: true },
                  // Free space is statfs() of the image filesystem CRI-O reports, at its host path.
                  // HostToContainer: CRI-O's own mounts below it stay visible (and CRI-O insists on it).
                  { name: 'image-store', mountPath: imageStore, readOnly: true, mountPropagation: 'HostToContainer' },
                ],
              },
            ],
            volumes: [
              { name: 'crio-socket', hostPath: { path: '/var/run/crio/crio.sock', type: 'Socket' } },
              { name: 'crio-config', hostPath: { path: '/etc/crio', type: 'Directory' } },
              { name: 'kubelet-pull-secret', hostPath: { path: '/var/lib/kubelet/config.json', type: 'FileOrCreate' } },
              { name: 'containers-config', hostPath: { path: '/etc/containers', type: 'DirectoryOrCreate' } },
              { name: 'image-store', hostPath: { path: imageStore, type: 'Directory' } },
            ],
          },
        },
      },
    },
  ];
}

export function renderInstallYaml(manifests: readonly Manifest[]): string {
  return manifests.map((manifest) => `---\n${yaml.dump(manifest, { lineWidth: -1, noRefs: true, sortKeys: false })}`).join('');
}
