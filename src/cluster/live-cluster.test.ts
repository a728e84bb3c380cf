import { describe, expect, it } from 'vitest';
import { ClusterError } from '../errors.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { readLiveCluster } from './live-cluster.js';

const digest = (c: string) => `sha256:${c.repeat(64)}`;

/** A KubeClient that answers from a table of paths; pod lists come in pages of `continue` tokens. */
function fakeClient(objects: Record<string, unknown>, podPages: unknown[][], refuse?: string, expire = 0): { client: KubeClient; continues: Array<string | undefined> } {
  const continues: Array<string | undefined> = [];
  let expired = 0;
  const answer = async (path: string, query: Record<string, unknown> = {}) => {
    if (path === refuse) throw new KubeApiError(403, 'Forbidden', `GET ${path}: forbidden`);
    if (path === '/api/v1/pods') {
      const page = Number(query.continue ?? 0);
      continues.push(query.continue as string | undefined);
      // The first `expire` continued reads find their token expired, as after an etcd compaction.
      if (page > 0 && expired < expire) {
        expired++;
        throw new KubeApiError(410, 'Expired', 'The provided continue parameter is too old to display a consistent list result.');
      }
      return { metadata: { resourceVersion: '1', ...(page + 1 < podPages.length ? { continue: String(page + 1) } : {}) }, items: podPages[page] };
    }
    if (path in objects) return objects[path];
    throw new KubeApiError(404, 'NotFound', `GET ${path}: not found`);
  };
  const client = {
    server: 'https://api.example.com:6443',
    get: answer,
    find: async (path: string) => (path in objects || path === refuse ? answer(path) : undefined),
  } as unknown as KubeClient;
  return { client, continues };
}

const clusterVersion = {
  metadata: { name: 'version' },
  status: {
    desired: { image: `quay.io/ocp/release@${digest('b')}`, version: '4.16.3' },
    history: [
      { state: 'Partial', image: `quay.io/ocp/release@${digest('b')}`, version: '4.16.3' },
      { state: 'Completed', image: `quay.io/ocp/release@${digest('a')}`, version: '4.16.2' },
    ],
    capabilities: { enabledCapabilities: ['Console', 'Build'] },
  },
};
const nodes = {
  metadata: { resourceVersion: '1' },
  items: [
    { metadata: { name: 'm0', labels: { 'node-role.kubernetes.io/control-plane': '' } } },
    { metadata: { name: 'w0', labels: { 'node-role.kubernetes.io/worker': '' } } },
  ],
};
const pods = [
  [
    {
      metadata: { name: 'dns-default-x1', namespace: 'openshift-dns', ownerReferences: [{ kind: 'DaemonSet', name: 'dns-default' }] },
      spec: { nodeName: 'w0', initContainers: [{ image: `quay.io/ocp/art@${digest('c')}` }], containers: [{ image: 'quay.io/ocp/art:dns' }] },
      status: { containerStatuses: [{ imageID: `mirror.example.com/ocp/art@${digest('d')}` }] },
    },
  ],
  [
    { metadata: { name: 'router-default-5d9f8b7c6d-abcde', namespace: 'openshift-ingress', ownerReferences: [{ kind: 'ReplicaSet', name: 'router-default-5d9f8b7c6d' }] }, spec: { nodeName: 'w0', containers: [{ image: `quay.io/ocp/art@${digest('e')}` }] } },
    { metadata: { name: 'pending', namespace: 'shop' }, spec: { containers: [{ image: `quay.io/ocp/art@${digest('f')}` }] } },
  ],
];

describe('reading a live cluster', () => {
  it('takes the newest completed release, capabilities, platform, node roles and every page of bound pods', async () => {
    const { client, continues } = fakeClient({
      '/apis/config.openshift.io/v1/clusterversions/version': clusterVersion,
      '/apis/config.openshift.io/v1/infrastructures/cluster': { metadata: { name: 'cluster' }, status: { platformStatus: { type: 'AWS' } } },
      '/api/v1/nodes': nodes,
    }, pods);
    expect(await readLiveCluster(client)).toEqual({
      server: 'https://api.example.com:6443',
      release: { pullSpec: `quay.io/ocp/release@${digest('a')}`, version: '4.16.2' },
      capabilities: ['Build', 'Console'],
      platform: 'AWS',
      nodes: [{ name: 'm0', role: 'control-plane' }, { name: 'w0', role: 'worker' }],
      pods: [
        { workload: 'openshift-dns/dns-default', node: 'w0', digests: [digest('c'), digest('d')] },
        { workload: 'openshift-ingress/router-default', node: 'w0', digests: [digest('e')] },
      ],
    });
    expect(continues).toEqual([undefined, '1']);
  });

  it('starts the pod list over when its continue token expired (410), never mixing pages; gives up after 3 fresh lists', async () => {
    const objects = { '/apis/config.openshift.io/v1/clusterversions/version': clusterVersion, '/api/v1/nodes': nodes };
    const once = fakeClient(objects, pods, undefined, 1);
    expect((await readLiveCluster(once.client))!.pods.map((p) => p.workload)).toEqual(['openshift-dns/dns-default', 'openshift-ingress/router-default']);
    expect(once.continues).toEqual([undefined, '1', undefined, '1']);
    const always = fakeClient(objects, pods, undefined, 10);
    const error = await readLiveCluster(always.client).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeApiError);
    expect((error as KubeApiError).status).toBe(410);
    expect(always.continues.filter((c) => c === undefined)).toHaveLength(4);
  });

  it('falls back to status.desired, and leaves out what the cluster does not say', async () => {
    const { client } = fakeClient({
      '/apis/config.openshift.io/v1/clusterversions/version': { metadata: { name: 'version' }, status: { desired: { image: `quay.io/ocp/release@${digest('a')}` } } },
      '/api/v1/nodes': nodes,
    }, [[]]);
    expect(await readLiveCluster(client)).toEqual({ server: 'https://api.example.com:6443', release: { pullSpec: `quay.io/ocp/release@${digest('a')}` }, nodes: [{ name: 'm0', role: 'control-plane' }, { name: 'w0', role: 'worker' }], pods: [] });
  });

  it('reads what the CVO decides with: capability spec, unmanaged overrides, the FeatureGate, the pools\' OS streams', async () => {
    const { client } = fakeClient({
      '/apis/config.openshift.io/v1/clusterversions/version': {
        ...clusterVersion,
        spec: {
          capabilities: { baselineCapabilitySet: 'None', additionalEnabledCapabilities: ['Console'] },
          overrides: [
            { kind: 'Deployment', group: 'apps', namespace: 'openshift-monitoring', name: 'cluster-monitoring-operator', unmanaged: true },
            { kind: 'Deployment', group: 'apps', namespace: 'openshift-dns', name: 'dns-operator', unmanaged: false },
          ],
        },
      },
      '/apis/config.openshift.io/v1/featuregates/cluster': {
        metadata: { name: 'cluster' },
        spec: { featureSet: 'TechPreviewNoUpgrade' },
        status: { featureGates: [{ version: '4.22.3', enabled: [{ name: 'OSStreams' }], disabled: [{ name: 'Other' }] }] },
      },
      '/apis/machineconfiguration.openshift.io/v1/osimagestreams/cluster': { metadata: { name: 'cluster' }, spec: { defaultStream: 'rhel-9' }, status: { defaultStream: 'rhel-9' } },
      '/apis/machineconfiguration.openshift.io/v1/machineconfigpools': { metadata: {}, items: [{ metadata: { name: 'worker' }, spec: { osImageStream: { name: 'rhel-10' } } }, { metadata: { name: 'master' }, spec: {} }] },
      '/api/v1/nodes': nodes,
    }, [[]]);
    const live = (await readLiveCluster(client))!;
    expect(live.capabilitySpec).toEqual({ baseline: 'None', additional: ['Console'] });
    expect(live.overrides).toEqual([{ group: 'apps', kind: 'Deployment', namespace: 'openshift-monitoring', name: 'cluster-monitoring-operator' }]);
    expect(live.featureGate).toEqual({ featureSet: 'TechPreviewNoUpgrade', status: [{ version: '4.22.3', enabled: ['OSStreams'], disabled: ['Other'] }] });
    expect(live.osStreams).toEqual({ defaultStream: 'rhel-9', pools: [{ pool: 'master' }, { pool: 'worker', stream: 'rhel-10' }] });
  });

  it('is undefined without a ClusterVersion (not OpenShift)', async () => {
    expect(await readLiveCluster(fakeClient({}, [[]]).client)).toBeUndefined();
  });

  it('names the RBAC it needs when refused', async () => {
    const { client } = fakeClient({ '/apis/config.openshift.io/v1/clusterversions/version': clusterVersion, '/api/v1/nodes': nodes }, [[]], '/api/v1/pods');
    const error = await readLiveCluster(client).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClusterError);
    expect((error as Error).message).toBe('https://api.example.com:6443 refused to list pods in all namespaces (HTTP 403): planning from the live cluster needs get, list on nodes and pods (all namespaces); get on clusterversions, featuregates and infrastructures (config.openshift.io); get on osimagestreams, list on machineconfigpools (machineconfiguration.openshift.io); or plan with --no-cluster');
  });
});
