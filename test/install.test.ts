/**
 * `prestage install` against the test bed's real API server: everything applies server-side,
 * and the admission policy lets an agent write only its own node's NodePinnedImages, judged by
 * the node name in its pod-bound ServiceAccount token.
 */
import { AppsV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION } from '../src/api/prestage.js';
import { KubeAgentCluster } from '../src/agent/kube.js';
import { KubeClient } from '../src/kube/client.js';
import { LeasePacer, PULL_SLOT_PREFIX } from '../src/agent/pacing.js';
import { applyServerSide, waitForCrdsEstablished, type Manifest } from '../src/install/apply.js';
import { createLogger } from '../src/telemetry/log.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { waitFor } from './cluster/processes.js';
import { runCli as run } from './support/cli.js';
import { AGENT_NAME } from '../src/api/names.js';

const NAMESPACE = 'prestage';
/** What the agents below need granted: one pull slot, and the Secret the pull-secret test names. */
const GRANTS = ['--max-pulling-nodes', '1', '--pull-secret-name', 'team-pull'];
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startCluster({ workers: 1 });
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await cluster?.stop();
});


/** A pod-bound token for the agent ServiceAccount, as the kubelet would mount it on `nodeName`. */
async function agentTokenOn(nodeName: string): Promise<string> {
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  // Only the Pod object: no kubelet runs it, but the API server binds tokens to it and its node.
  const pod = await core.createNamespacedPod({
    namespace: NAMESPACE,
    body: {
      metadata: { generateName: `${AGENT_NAME}-` },
      spec: { nodeName, serviceAccountName: AGENT_NAME, containers: [{ name: 'agent', image: 'quay.io/prestage/prestage:test' }] },
    },
  });
  return cluster.serviceAccountToken(NAMESPACE, AGENT_NAME, { boundPod: { name: pod.metadata!.name!, uid: pod.metadata!.uid! } });
}

describe('prestage install', () => {
  it('renders the CRDs, namespace, RBAC, admission policy and DaemonSet as YAML', async () => {
    const { code, stdout } = await run(['install', '--image', 'registry.example/prestage:1.2.3', '--agent-arg=--reserve=32Gi']);
    expect(code).toBe(0);
    const documents = yaml.loadAll(stdout) as Array<{ kind: string; metadata: { name: string } }>;
    expect(documents.map((doc) => `${doc.kind}/${doc.metadata.name}`)).toEqual([
      'CustomResourceDefinition/pinnedimagesets.prestage.dev',
      'CustomResourceDefinition/nodepinnedimages.prestage.dev',
      'Namespace/prestage',
      'ServiceAccount/prestage-agent',
      'ClusterRole/prestage-agent',
      'ClusterRoleBinding/prestage-agent',
      'Role/prestage-agent',
      'RoleBinding/prestage-agent',
      'ValidatingAdmissionPolicy/prestage-agent-own-node',
      'ValidatingAdmissionPolicyBinding/prestage-agent-own-node',
      'ValidatingAdmissionPolicy/prestage-agent-own-leases',
      'ValidatingAdmissionPolicyBinding/prestage-agent-own-leases',
      'DaemonSet/prestage-agent',
    ]);
    const daemonSet = documents.at(-1) as unknown as { spec: { template: { spec: { hostPID: boolean; volumes: Array<{ name: string; hostPath: { path: string; type: string } }>; containers: Array<{ image: string; args: string[]; env: unknown[]; securityContext: unknown; volumeMounts: Array<{ mountPath: string; readOnly?: boolean }> }> } } } };
    const pod = daemonSet.spec.template.spec;
    const container = pod.containers[0]!;
    expect(container.image).toBe('registry.example/prestage:1.2.3');
    expect(container.args).toContain('--reserve=32Gi');
    // The default reload (SIGHUP to CRI-O found in /proc by its command line): no --reload, hostPID.
    expect(container.args.some((arg) => arg.startsWith('--reload'))).toBe(false);
    expect(pod.hostPID).toBe(true);
    expect(container.env).toEqual([
      { name: 'NODE_OPTIONS', value: '--max-semi-space-size=1 --jitless --expose-gc' },
      { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      // Where CRI-O reaches the agent's link relay.
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    ]);
    // Host files at their own paths, each its own hostPath volume: nothing reaches the whole host filesystem.
    expect(container.args).toEqual(expect.arrayContaining(['--pull-secret=/var/lib/kubelet/config.json', '--registries-conf=/etc/containers/registries.conf', '--registries-conf-dir=/etc/containers/registries.conf.d']));
    expect(stdout).not.toContain('/proc/1');
    expect(pod.volumes.map((volume) => [volume.name, volume.hostPath.type])).toEqual([
      ['crio-socket', 'Socket'], ['crio-config', 'Directory'], ['crio-drop-ins', 'DirectoryOrCreate'], ['kubelet-pull-secret', 'FileOrCreate'],
      ['registries-conf', 'File'], ['registries-conf-d', 'Directory'], ['image-store', 'Directory'],
    ]);
    // Not privileged: root without any capability, spc_t for SELinux hosts.
    expect(container.securityContext).toEqual({
      runAsUser: 0, privileged: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] }, seLinuxOptions: { type: 'spc_t' },
    });
    const namespace = documents.find((doc) => doc.kind === 'Namespace') as unknown as { metadata: { labels: Record<string, string> } };
    expect(namespace.metadata.labels).toMatchObject({ 'pod-security.kubernetes.io/enforce': 'privileged' });
    expect(namespace.metadata.labels).not.toHaveProperty('security.openshift.io/scc.podSecurityLabelSync');
  });

  it('renders an SCC the agent ServiceAccount alone may use with --openshift', async () => {
    const { code, stdout } = await run(['install', '--image', 'registry.example/prestage:1.2.3', '--openshift']);
    expect(code).toBe(0);
    const documents = yaml.loadAll(stdout) as Array<{ kind: string; metadata: { name: string; labels?: Record<string, string> }; rules?: unknown[]; allowHostPID?: boolean; allowPrivilegedContainer?: boolean; allowedCapabilities?: string[] }>;
    const scc = documents.find((doc) => doc.kind === 'SecurityContextConstraints');
    expect(scc).toMatchObject({ metadata: { name: AGENT_NAME }, allowHostPID: true, allowPrivilegedContainer: false, allowedCapabilities: null, requiredDropCapabilities: ['ALL'] });
    expect(documents.find((doc) => doc.kind === 'Role' && doc.metadata.name === `${AGENT_NAME}-scc`)?.rules).toEqual([{ apiGroups: ['security.openshift.io'], resources: ['securitycontextconstraints'], resourceNames: [AGENT_NAME], verbs: ['use'] }]);
    expect(documents.find((doc) => doc.kind === 'Namespace')?.metadata.labels).toMatchObject({ 'security.openshift.io/scc.podSecurityLabelSync': 'false' });
  });

  it('rejects a missing or bad --image, a bad --namespace and an unknown --context with exit 2 and one line', async () => {
    const cases: Array<[string[], string]> = [
      [['install'], 'prestage: error: --image is required: the agent image, e.g. REGISTRY/prestage:VERSION (build and push it with `prestage image push REGISTRY/prestage:VERSION`)\n'],
      [['install', '--image', 'registry.example/prestage'], 'prestage: error: --image registry.example/prestage names no tag or digest: pin the version the nodes run, e.g. registry.example/prestage:0.1.0\n'],
      [['install', '--image', 'Registry.example/Prestage:1'], expect.stringMatching(/^prestage: error: --image: invalid image reference "Registry.example\/Prestage:1": .*\n$/) as unknown as string],
      [['install', '--image', 'registry.example/prestage:1', '--namespace', 'Prestage_NS'], "prestage: error: --namespace Prestage_NS is not a namespace name (lower-case letters, digits and '-', at most 63)\n"],
      [['install', '--image', 'registry.example/prestage:1', '--apply', '--kubeconfig', cluster.kubeconfigPath, '--context', 'nowhere'], 'prestage: error: kubeconfig has no context nowhere\n'],
      [['install', '--image', 'registry.example/prestage:1', '--pull-secret-name', 'Team_Pull'], "prestage: error: --pull-secret-name Team_Pull is not a Secret name (lower-case letters, digits, '-' and '.', at most 253)\n"],
      [['install', '--image', 'registry.example/prestage:1', '--pull-secret-name', 'prestage-cache'], "prestage: error: --pull-secret-name prestage-cache: that Secret holds the cache's upstream credentials, which only the cache reads; name another Secret\n"],
    ];
    for (const [argv, message] of cases) {
      const result = await run(argv);
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stderr).toEqual(message);
    }
  });

  it('--apply applies everything server-side, and applying again changes nothing', async () => {
    const first = await run(['install', '--image', 'registry.example/prestage:1.2.3', ...GRANTS, '--apply', '--kubeconfig', cluster.kubeconfigPath]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain('daemonset/prestage-agent serverside-applied');
    const daemonSet = await cluster.kubeConfig.makeApiClient(AppsV1Api).readNamespacedDaemonSet({ namespace: NAMESPACE, name: AGENT_NAME });
    const generation = daemonSet.metadata?.generation;
    const second = await run(['install', '--image', 'registry.example/prestage:1.2.3', ...GRANTS, '--apply', '--kubeconfig', cluster.kubeconfigPath]);
    expect(second.code, second.stderr).toBe(0);
    expect((await cluster.kubeConfig.makeApiClient(AppsV1Api).readNamespacedDaemonSet({ namespace: NAMESPACE, name: AGENT_NAME })).metadata?.generation).toBe(generation);
    const role = await cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api).readClusterRole({ name: AGENT_NAME });
    expect(role.rules?.find((rule) => rule.resources?.includes(`${NODE_PINNED_IMAGES}/status`))?.verbs).toEqual(['get', 'update', 'patch']);
  });

  it("lets an agent write its own node's NodePinnedImages status and denies another node's", async () => {
    const asAdmin = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    // The admin creates master-0's object, so the agent on worker-0 would only need to update it.
    await asAdmin.createClusterCustomObject({
      group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES,
      body: { apiVersion: API_VERSION, kind: 'NodePinnedImages', metadata: { name: 'master-0' }, spec: { nodeName: 'master-0' } },
    });
    const asAgent = cluster.kubeConfigForToken(await agentTokenOn('worker-0'));
    const log = createLogger('silent');
    const status = { pinnedImageSets: [] };

    // The API server enforces the policy once its informer has seen it.
    const denied = await waitFor('the policy to deny master-0 to the worker-0 agent', async () => {
      try {
        await new KubeAgentCluster(new KubeClient(asAgent), 'master-0', log, () => undefined).writeStatus(status);
        return undefined;
      } catch (error) {
        return error as Error;
      }
    }, 30_000, 500);
    expect(denied.message).toMatch(/^cannot write the status of nodepinnedimages\/master-0: PUT \S+: 403 Forbidden: .*prestage-agent may write only the NodePinnedImages of its own node, not master-0/);

    await new KubeAgentCluster(new KubeClient(asAgent), 'worker-0', log, () => undefined).writeStatus(status);
    const own = (await asAdmin.getClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: 'worker-0' })) as { status?: unknown };
    expect(own.status).toEqual({ pinnedImageSets: [], observedGeneration: 1 });

    // RBAC: the agent reads sets but cannot change them, nor delete its own status object.
    const agentObjects = asAgent.makeApiClient(CustomObjectsApi);
    // A re-applied CRD's storage may answer 429 "storage is (re)initializing" for a moment.
    await waitFor('the agent to list sets', () => agentObjects.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS }).catch(() => undefined), 30_000, 250);
    await expect(
      agentObjects.createClusterCustomObject({ group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS, body: { apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name: 'x' }, spec: { pinnedImages: [{ name: `quay.io/a@sha256:${'0'.repeat(64)}` }] } } }),
    ).rejects.toMatchObject({ code: 403 });
    await expect(agentObjects.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: 'worker-0' })).rejects.toMatchObject({ code: 403 });

    // The Role lets it take and give back a pull slot Lease in its namespace (one, as --max-pulling-nodes 1 makes).
    const pacer = new LeasePacer(new KubeClient(asAgent), { namespace: NAMESPACE, slots: 1, holder: 'worker-0', log });
    const slot = await pacer.acquire();
    const lease = await cluster.kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: NAMESPACE, name: `${PULL_SLOT_PREFIX}0` });
    expect(lease.spec?.holderIdentity).toBe('worker-0');
    await slot.release();
    pacer.stop();
  });

  it('lets an agent read the pull Secret named at install in its own namespace, and no Secret elsewhere', async () => {
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const dockerConfig = Buffer.from(JSON.stringify({ auths: { 'registry.example': { auth: Buffer.from('robot:pw').toString('base64') } } })).toString('base64');
    for (const namespace of [NAMESPACE, 'default']) {
      await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'team-pull' }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': dockerConfig } } });
    }
    const asAgent = cluster.kubeConfigForToken(await agentTokenOn('worker-0'));
    const log = createLogger('silent');
    const own = await new KubeAgentCluster(new KubeClient(asAgent), 'worker-0', log, () => undefined, NAMESPACE).readPullSecret('team-pull');
    expect(own.entries.get('registry.example')).toEqual({ username: 'robot', password: 'pw' });
    await expect(new KubeAgentCluster(new KubeClient(asAgent), 'worker-0', log, () => undefined, 'default').readPullSecret('team-pull')).rejects.toThrow(
      "pull secret default/team-pull: forbidden (403): the agent's Role grants get on no Secret named team-pull in default; grant it with prestage install --pull-secret-name team-pull --apply",
    );
    // get by name only: listing the Secrets of its own namespace is denied too.
    await expect(asAgent.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace: NAMESPACE })).rejects.toMatchObject({ code: 403 });
  });
  it('--apply detects OpenShift (security.openshift.io served) and applies the SCC and its use grant', async () => {
    // The group as OpenShift serves it; its schema here is a stand-in (the test bed has no OpenShift API server).
    await applyServerSide(cluster.kubeConfig, [{
      apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'securitycontextconstraints.security.openshift.io' },
      spec: {
        group: 'security.openshift.io', scope: 'Cluster',
        names: { plural: 'securitycontextconstraints', singular: 'securitycontextconstraints', kind: 'SecurityContextConstraints', listKind: 'SecurityContextConstraintsList' },
        versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }],
      },
    } as Manifest]);
    await waitForCrdsEstablished(cluster.kubeConfig, ['securitycontextconstraints.security.openshift.io']);
    const result = await waitFor('install --apply to see security.openshift.io', async () => {
      const attempt = await run(['install', '--image', 'registry.example/prestage:1.2.3', ...GRANTS, '--apply', '--kubeconfig', cluster.kubeconfigPath]);
      return attempt.stdout.includes('securitycontextconstraints/prestage-agent serverside-applied') ? attempt : undefined;
    }, 30_000, 1_000);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`rolebinding/${AGENT_NAME}-scc serverside-applied`);
    const client = new KubeClient(cluster.kubeConfig);
    expect(await client.get(`/apis/security.openshift.io/v1/securitycontextconstraints/${AGENT_NAME}`)).toMatchObject({ allowHostPID: true, requiredDropCapabilities: ['ALL'], runAsUser: { type: 'MustRunAs', uid: 0 } });
    expect((await client.get<{ metadata: { labels: Record<string, string> } }>(`/api/v1/namespaces/${NAMESPACE}`)).metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'privileged',
      'security.openshift.io/scc.podSecurityLabelSync': 'false',
    });
  });
});
