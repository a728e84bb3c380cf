/**
 * `prestage install` against the test bed's real API server: everything applies server-side,
 * and the admission policy lets an agent write only its own node's NodePinnedImages, judged by
 * the node name in its pod-bound ServiceAccount token.
 */
import { PassThrough } from 'node:stream';
import { AppsV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION } from '../src/api/prestage.js';
import { KubeAgentCluster } from '../src/agent/kube.js';
import { KubeClient } from '../src/cluster/kube.js';
import { LeasePacer, PULL_SLOT_PREFIX } from '../src/agent/pacing.js';
import { main } from '../src/cli/main.js';
import { AGENT_NAME } from '../src/install/manifests.js';
import { createLogger } from '../src/telemetry/log.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { waitFor } from './cluster/processes.js';

const NAMESPACE = 'prestage';
let cluster: TestCluster;

beforeAll(async () => {
  cluster = await startCluster({ workers: 1 });
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await cluster?.stop();
});

async function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  stdout.on('data', (chunk: Buffer) => out.push(chunk));
  stderr.on('data', (chunk: Buffer) => err.push(chunk));
  const code = await main(argv, { stdout, stderr, scriptName: 'prestage' });
  return { code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

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
      'DaemonSet/prestage-agent',
    ]);
    const daemonSet = documents.at(-1) as unknown as { spec: { template: { spec: { containers: Array<{ image: string; args: string[]; env: unknown[]; volumeMounts: Array<{ mountPath: string; readOnly?: boolean }> }> } } } };
    const container = daemonSet.spec.template.spec.containers[0]!;
    expect(container.image).toBe('registry.example/prestage:1.2.3');
    expect(container.args).toContain('--reserve=32Gi');
    expect(container.env).toEqual([
      { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    ]);
    expect(container.volumeMounts).toContainEqual({ name: 'kubelet-pull-secret', mountPath: '/var/lib/kubelet/config.json', readOnly: true });
    // The agent reads CRI-O's registries.conf (mirrors) to size images exactly, and never writes it.
    expect(container.volumeMounts).toContainEqual({ name: 'containers-config', mountPath: '/etc/containers', readOnly: true });
    expect((daemonSet.spec.template.spec as unknown as { volumes: unknown[] }).volumes).toContainEqual({ name: 'containers-config', hostPath: { path: '/etc/containers', type: 'DirectoryOrCreate' } });
  });

  it('--apply applies everything server-side, and applying again changes nothing', async () => {
    const first = await run(['install', '--apply', '--kubeconfig', cluster.kubeconfigPath]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain('daemonset/prestage-agent serverside-applied');
    const daemonSet = await cluster.kubeConfig.makeApiClient(AppsV1Api).readNamespacedDaemonSet({ namespace: NAMESPACE, name: AGENT_NAME });
    const generation = daemonSet.metadata?.generation;
    const second = await run(['install', '--apply', '--kubeconfig', cluster.kubeconfigPath]);
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

    // The Role lets it take and give back a pull slot Lease in its namespace.
    const pacer = new LeasePacer(new KubeClient(asAgent), { namespace: NAMESPACE, slots: 1, holder: 'worker-0', log });
    const slot = await pacer.acquire();
    const lease = await cluster.kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: NAMESPACE, name: `${PULL_SLOT_PREFIX}0` });
    expect(lease.spec?.holderIdentity).toBe('worker-0');
    await slot.release();
    pacer.stop();
  });

  it('lets an agent read a pull Secret a set names in its own namespace, and no Secret elsewhere', async () => {
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
      "pull secret default/team-pull: forbidden (403); the agent reads Secrets only in its own namespace (--namespace), where prestage install's Role lets it",
    );
    // get by name only: listing the Secrets of its own namespace is denied too.
    await expect(asAgent.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace: NAMESPACE })).rejects.toMatchObject({ code: 403 });
  });
});
