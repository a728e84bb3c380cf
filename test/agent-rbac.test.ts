/**
 * The agent's grants, attacked on the test bed's real API server: `prestage install --apply`
 * (RBAC and admission policies as shipped), then requests made with the agent ServiceAccount's
 * pod-bound tokens (one per node, as the kubelet mounts them), each of which an agent on a
 * compromised node could send. What the agent needs goes through; the rest is refused, by RBAC
 * (403 from the authorizer) or by the admission policy (403 with its message).
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, VERSION } from '../src/api/prestage.js';
import { AGENT_NAME, CACHE_NAME, LINK_LEASE, PULL_SLOT_PREFIX } from '../src/api/names.js';
import { KubeAgentCluster } from '../src/agent/kube.js';
import { LeaseLinkLedger } from '../src/agent/link-share.js';
import { LeasePacer } from '../src/agent/pacing.js';
import { KubeApiError, KubeClient } from '../src/kube/client.js';
import { createLogger } from '../src/telemetry/log.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { waitFor } from './cluster/processes.js';
import { runCli } from './support/cli.js';

const NAMESPACE = 'prestage';
const LEASES = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`;
const log = createLogger('silent');

let cluster: TestCluster;
let admin: KubeClient;
/** The agent ServiceAccount with a token bound to a pod on worker-0, and one on master-0. */
let worker: KubeClient;
let master: KubeClient;

/** A pod-bound token for the agent ServiceAccount, as the kubelet would mount it on `nodeName`. */
async function agentOn(nodeName: string): Promise<KubeClient> {
  const pod = await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespacedPod({
    namespace: NAMESPACE,
    body: {
      metadata: { generateName: `${AGENT_NAME}-` },
      spec: { nodeName, serviceAccountName: AGENT_NAME, automountServiceAccountToken: false, containers: [{ name: 'agent', image: 'quay.io/prestage/prestage:test' }] },
    },
  });
  return new KubeClient(cluster.kubeConfigForToken(await cluster.serviceAccountToken(NAMESPACE, AGENT_NAME, { boundPod: { name: pod.metadata!.name!, uid: pod.metadata!.uid! } })));
}

/** The HTTP status and message a request ends with (0 and '' when it succeeds). */
async function refusal(request: Promise<unknown>): Promise<{ status: number; message: string }> {
  try {
    await request;
    return { status: 0, message: '' };
  } catch (error) {
    if (!(error instanceof KubeApiError)) throw error;
    return { status: error.status, message: error.message };
  }
}

const lease = (name: string, holderIdentity?: string, annotations?: Record<string, string>) => ({
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  metadata: { name, namespace: NAMESPACE, ...(annotations ? { annotations } : {}) },
  spec: { ...(holderIdentity ? { holderIdentity } : {}), leaseDurationSeconds: 60 },
});

beforeAll(async () => {
  cluster = await startCluster({ workers: 1 });
  admin = new KubeClient(cluster.kubeConfig);
  const installed = await runCli(['install', '--image', 'quay.io/prestage/prestage:test', '--max-pulling-nodes', '2', '--pull-secret-name', 'team-pull', '--apply', '--kubeconfig', cluster.kubeconfigPath]);
  expect(installed.code, installed.stderr).toBe(0);
  const dockerConfig = (user: string) => Buffer.from(JSON.stringify({ auths: { 'registry.example': { auth: Buffer.from(`${user}:pw`).toString('base64') } } })).toString('base64');
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'team-pull' }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': dockerConfig('robot') } } });
  // Where `install --cache` keeps the cache's upstream credentials: beside the agent, for the cache pod alone.
  await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: CACHE_NAME }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': dockerConfig('upstream') } } });
  worker = await agentOn('worker-0');
  master = await agentOn('master-0');
  // The API server enforces a policy once its informer has seen it: wait for the Lease policy to refuse a
  // stranger (a dry run: admitted or not, nothing is stored).
  await waitFor('the Lease policy to be in force', async () => ((await refusal(worker.request('POST', LEASES, { query: { dryRun: 'All' }, body: lease('policy-probe', 'worker-0') }))).message.includes('may write only its own Leases') ? true : undefined), 30_000, 500);
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await cluster?.stop();
});

describe("the agent's Secrets", () => {
  it('gets the pull Secret named at install, and neither the cache\'s upstream credentials nor any other, nor a list', async () => {
    const own = await new KubeAgentCluster(worker, 'worker-0', log, () => undefined, NAMESPACE).readPullSecret('team-pull');
    expect(own.entries.get('registry.example')).toEqual({ username: 'robot', password: 'pw' });
    expect(await refusal(worker.get(`/api/v1/namespaces/${NAMESPACE}/secrets/${CACHE_NAME}`))).toMatchObject({ status: 403 });
    expect(await refusal(worker.get(`/api/v1/namespaces/${NAMESPACE}/secrets`))).toMatchObject({ status: 403 });
    // A set naming a Secret not granted: the one line its status carries names the grant to add.
    await expect(new KubeAgentCluster(worker, 'worker-0', log, () => undefined, NAMESPACE).readPullSecret(CACHE_NAME)).rejects.toThrow(
      `pull secret ${NAMESPACE}/${CACHE_NAME}: forbidden (403): the agent's Role grants get on no Secret named ${CACHE_NAME} in ${NAMESPACE}; grant it with prestage install --pull-secret-name ${CACHE_NAME} --apply`,
    );
  });
});

describe("the agent's NodePinnedImages", () => {
  it("writes its own node's status and not another node's", async () => {
    await admin.request('POST', `/apis/${GROUP}/${VERSION}/${NODE_PINNED_IMAGES}`, { body: { apiVersion: API_VERSION, kind: 'NodePinnedImages', metadata: { name: 'master-0' }, spec: { nodeName: 'master-0' } } });
    const status = { pinnedImageSets: [] };
    await expect(new KubeAgentCluster(worker, 'master-0', log, () => undefined).writeStatus(status)).rejects.toThrow(/403 Forbidden: .*prestage-agent may write only the NodePinnedImages of its own node, not master-0/);
    await new KubeAgentCluster(worker, 'worker-0', log, () => undefined).writeStatus(status);
    expect((await admin.get<{ status?: unknown }>(`/apis/${GROUP}/${VERSION}/${NODE_PINNED_IMAGES}/worker-0`)).status).toMatchObject({ pinnedImageSets: [] });
  });
});

describe("the agent's Leases", () => {
  it('takes and frees its own pull slot and charges the link ledger', async () => {
    const pacer = new LeasePacer(worker, { namespace: NAMESPACE, slots: 2, holder: 'worker-0', log, contentionJitterMs: 0 });
    const slot = await pacer.acquire();
    try {
      const name = (await admin.get<{ items: Array<{ metadata: { name: string }; spec: { holderIdentity?: string } }> }>(LEASES)).items.find((item) => item.spec.holderIdentity === 'worker-0')?.metadata.name;
      expect(name).toMatch(new RegExp(`^${PULL_SLOT_PREFIX}[01]$`));
      await slot.release();
      expect((await admin.get<{ spec: { holderIdentity?: string } }>(`${LEASES}/${name}`)).spec.holderIdentity).toBeUndefined();
    } finally {
      await slot.release();
      pacer.stop();
    }
    await new LeaseLinkLedger(worker, { namespace: NAMESPACE, holder: 'worker-0', log }).start(1_000, 1_000_000);
    expect((await admin.get<{ spec: { holderIdentity?: string } }>(`${LEASES}/${LINK_LEASE}`)).spec.holderIdentity).toBe('worker-0');
  });

  it('may not create or update a Lease by any other name', async () => {
    const created = await refusal(worker.request('POST', LEASES, { body: lease('kube-scheduler', 'worker-0') }));
    expect(created.status).toBe(403);
    expect(created.message).toContain(`prestage-agent may write only its own Leases (${PULL_SLOT_PREFIX}0, ${PULL_SLOT_PREFIX}1, ${LINK_LEASE}, prestage-cache-warm-0, prestage-set-status-0), not kube-scheduler`);
    // A third slot --max-pulling-nodes 2 never makes.
    expect(await refusal(worker.request('POST', LEASES, { body: lease(`${PULL_SLOT_PREFIX}2`, 'worker-0') }))).toMatchObject({ status: 403 });
    // An existing Lease of someone else's: RBAC's resourceNames refuse the update itself.
    const other = await admin.request<{ metadata: { resourceVersion: string } }>('POST', LEASES, { body: lease('someone-elses', 'controller') });
    const updated = await refusal(worker.request('PUT', `${LEASES}/someone-elses`, { body: { ...lease('someone-elses', 'worker-0'), metadata: { name: 'someone-elses', namespace: NAMESPACE, resourceVersion: other.metadata.resourceVersion } } }));
    expect(updated.status).toBe(403);
    expect(updated.message).toMatch(/cannot update resource "leases"/);
    expect(await refusal(worker.request('DELETE', `${LEASES}/${LINK_LEASE}`))).toMatchObject({ status: 403 });
  });

  it("may not free, renew for, or write the record of a slot another node holds, nor name another node as holder", async () => {
    // Short Leases: the holder renews every 2 s, so it sees a takeover soon.
    const pacer = new LeasePacer(master, { namespace: NAMESPACE, slots: 1, holder: 'master-0', log, contentionJitterMs: 0, leaseDurationSeconds: 6 });
    const held = await pacer.acquire();
    try {
      const path = `${LEASES}/${PULL_SLOT_PREFIX}0`;
      const current = await admin.get<{ metadata: Record<string, unknown>; spec: Record<string, unknown> }>(path);
      expect(current.spec.holderIdentity).toBe('master-0');
      const { holderIdentity: _, ...freed } = current.spec;
      const free = await refusal(worker.request('PUT', path, { body: { ...current, spec: freed } }));
      expect(free.message).toContain('the prestage-agent of node worker-0 may not free Lease prestage-pull-slot-0, held by master-0');
      // Renewing it for master-0, or forging the record its release would write: the holder is not worker-0.
      const forged = await refusal(worker.request('PUT', path, { body: { ...current, metadata: { ...current.metadata, annotations: { 'prestage.dev/cache-warmed': 'forged' } } } }));
      expect(forged.message).toContain('the prestage-agent of node worker-0 may not name master-0 as the holder of Lease prestage-pull-slot-0');
      const named = await refusal(worker.request('POST', LEASES, { body: lease(`${PULL_SLOT_PREFIX}1`, 'master-0') }));
      expect(named.message).toContain('may not name master-0 as the holder of Lease prestage-pull-slot-1');
      // What the policy cannot say (no clock in admission): taking a held slot before it expires.
      // The holder sees it at its next renewal (409, then "taken by worker-0") and stops new pulls.
      expect(await refusal(worker.request('PUT', path, { body: { ...current, spec: { ...current.spec, holderIdentity: 'worker-0' } } }))).toEqual({ status: 0, message: '' });
      await waitFor('master-0 to see its slot lost', async () => (held.held() ? undefined : true), 30_000, 500);
    } finally {
      await held.release();
      pacer.stop();
    }
  }, 60_000);

  it('writes no Lease with a token bound to no pod on a node', async () => {
    const unbound = new KubeClient(cluster.kubeConfigForToken(await cluster.serviceAccountToken(NAMESPACE, AGENT_NAME)));
    const written = await refusal(unbound.request('POST', LEASES, { body: lease(`${PULL_SLOT_PREFIX}1`, 'worker-0') }));
    expect(written.status).toBe(403);
    expect(written.message).toContain('prestage-agent writes Leases only with a pod-bound token (one that names its node)');
  });
});

describe('SelfSubjectAccessReview, as kubectl auth can-i asks', () => {
  it('answers yes for the grants the agent needs and no for the rest', async () => {
    const can = async (verb: string, resource: string, name?: string, group = '') =>
      (await worker.request<{ status: { allowed: boolean } }>('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
        body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: { namespace: NAMESPACE, verb, group, resource, ...(name ? { name } : {}) } } },
      })).status.allowed;
    expect({
      'get secrets/team-pull': await can('get', 'secrets', 'team-pull'),
      [`get secrets/${CACHE_NAME}`]: await can('get', 'secrets', CACHE_NAME),
      'list secrets': await can('list', 'secrets'),
      [`update leases/${LINK_LEASE}`]: await can('update', 'leases', LINK_LEASE, 'coordination.k8s.io'),
      'update leases/kube-scheduler': await can('update', 'leases', 'kube-scheduler', 'coordination.k8s.io'),
      [`delete leases/${LINK_LEASE}`]: await can('delete', 'leases', LINK_LEASE, 'coordination.k8s.io'),
      'patch leases/prestage-cache-warm-0': await can('patch', 'leases', 'prestage-cache-warm-0', 'coordination.k8s.io'),
    }).toEqual({
      'get secrets/team-pull': true,
      [`get secrets/${CACHE_NAME}`]: false,
      'list secrets': false,
      [`update leases/${LINK_LEASE}`]: true,
      'update leases/kube-scheduler': false,
      [`delete leases/${LINK_LEASE}`]: false,
      'patch leases/prestage-cache-warm-0': false,
    });
  });
});
