import { describe, expect, it } from 'vitest';
import { ClusterError } from '../errors.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { readLiveOperators } from './live-operators.js';
import { LiveClusterRefused } from './live-reads.js';

const V0 = '/apis/operators.coreos.com/v1alpha1';
const V1 = '/apis/olm.operatorframework.io/v1';

/** A KubeClient answering lists from a table, and discovery with the resources the table has; `asked` records each list's query. */
function fakeClient(lists: Record<string, unknown[]>, refuse?: string): { client: KubeClient; asked: Array<{ path: string; query: Record<string, unknown> }> } {
  const asked: Array<{ path: string; query: Record<string, unknown> }> = [];
  const get = async (path: string, query: Record<string, unknown> = {}) => {
    asked.push({ path, query });
    if (path === refuse) throw new KubeApiError(403, 'Forbidden', `GET ${path}: forbidden`);
    if (!(path in lists)) throw new KubeApiError(404, 'NotFound', `GET ${path}: the server could not find the requested resource`);
    return { metadata: { resourceVersion: '1' }, items: lists[path] };
  };
  // Discovery lists what the table has, whoever asks (the system:discovery role).
  const find = async (groupVersion: string) => {
    const resources = Object.keys(lists).filter((path) => path.startsWith(`${groupVersion}/`)).map((path) => ({ name: path.slice(groupVersion.length + 1) }));
    return resources.length > 0 ? { resources } : undefined;
  };
  return { client: { server: 'https://api.example.com:6443', get, find } as unknown as KubeClient, asked };
}

const properties = (...props: unknown[]) => JSON.stringify({ properties: props });
const csv = (namespace: string, name: string, extra: { annotation?: string; labels?: Record<string, string>; reason?: string } = {}) => ({
  metadata: { namespace, name, ...(extra.labels ? { labels: extra.labels } : {}), ...(extra.annotation !== undefined ? { annotations: { 'operatorframework.io/properties': extra.annotation } } : {}) },
  spec: { version: '1.8.0', displayName: name },
  status: { phase: 'Succeeded', ...(extra.reason ? { reason: extra.reason } : {}) },
});

describe('reading what OLM shows of a cluster', () => {
  it('finds no operators on a cluster that serves neither OLM v0 nor v1', async () => {
    expect(await readLiveOperators(fakeClient({}).client)).toBeUndefined();
  });

  it('reads Subscriptions, CatalogSources and the CSVs that are not copies, maxOpenShiftVersion as OLM reads it', async () => {
    const { client, asked } = fakeClient({
      [`${V0}/subscriptions`]: [
        {
          metadata: { namespace: 'csm', name: 'csm' },
          spec: { name: 'csm-storage', source: 'community', sourceNamespace: 'openshift-marketplace', channel: 'stable', installPlanApproval: 'Manual', config: { nodeSelector: { 'node-role.kubernetes.io/master': '' }, tolerations: [{ key: 'node-role.kubernetes.io/master', operator: 'Exists', effect: 'NoSchedule', tolerationSeconds: 5 }] } },
          status: { installedCSV: 'csm-storage.v1.8.0', currentCSV: 'csm-storage.v1.8.1', state: 'UpgradePending', lastUpdated: '2024-07-01T10:00:00Z' },
        },
        { metadata: { namespace: 'x', name: 'hostile' }, spec: { name: 42, source: 'community', sourceNamespace: 'openshift-marketplace' } },
      ],
      [`${V0}/catalogsources`]: [
        { metadata: { namespace: 'openshift-marketplace', name: 'community' }, spec: { sourceType: 'grpc', image: 'registry.redhat.io/redhat/community-operator-index:v4.16' }, status: { connectionState: { lastObservedState: 'READY' } } },
        { metadata: { namespace: 'openshift-marketplace', name: 'flaky' }, spec: { sourceType: 'grpc', address: 'catalog.example.com:50051' }, status: { connectionState: { lastObservedState: 'TRANSIENT_FAILURE' } } },
      ],
      [`${V0}/clusterserviceversions`]: [
        csv('csm', 'csm-storage.v1.8.0', { annotation: properties({ type: 'olm.gvk', value: {} }, { type: 'olm.maxOpenShiftVersion', value: '4.16' }) }),
        csv('a', 'number.v1', { annotation: properties({ type: 'olm.maxOpenShiftVersion', value: 4.16 }) }),
        csv('b', 'twice.v1', { annotation: properties({ type: 'olm.maxOpenShiftVersion', value: '4.16' }, { type: 'olm.maxOpenShiftVersion', value: '4.17' }) }),
        csv('c', 'garbled.v1', { annotation: '{"properties": [' }),
        csv('d', 'copied.v1', { reason: 'Copied' }),
        csv('e', 'labelled-copy.v1', { labels: { 'olm.copiedFrom': 'csm' } }),
      ],
    });
    const ops = (await readLiveOperators(client))!;
    expect(ops.subscriptions).toEqual([{
      namespace: 'csm', name: 'csm', package: 'csm-storage', source: 'community', sourceNamespace: 'openshift-marketplace', channel: 'stable', approval: 'Manual',
      config: { nodeSelector: { 'node-role.kubernetes.io/master': '' }, tolerations: [{ key: 'node-role.kubernetes.io/master', operator: 'Exists', effect: 'NoSchedule' }] },
      installedCSV: 'csm-storage.v1.8.0', currentCSV: 'csm-storage.v1.8.1', state: 'UpgradePending',
    }]);
    expect(ops.catalogSources).toEqual([
      { namespace: 'openshift-marketplace', name: 'community', sourceType: 'grpc', image: 'registry.redhat.io/redhat/community-operator-index:v4.16', connectionState: 'READY' },
      { namespace: 'openshift-marketplace', name: 'flaky', sourceType: 'grpc', address: 'catalog.example.com:50051', connectionState: 'TRANSIENT_FAILURE' },
    ]);
    expect(ops.csvs).toEqual([
      { namespace: 'csm', name: 'csm-storage.v1.8.0', version: '1.8.0', phase: 'Succeeded', maxOpenShiftVersion: '"4.16"' },
      { namespace: 'a', name: 'number.v1', version: '1.8.0', phase: 'Succeeded', maxOpenShiftVersion: '4.16' },
      { namespace: 'b', name: 'twice.v1', version: '1.8.0', phase: 'Succeeded', propertiesError: 'defining more than one "olm.maxOpenShiftVersion" property is not allowed' },
      { namespace: 'c', name: 'garbled.v1', version: '1.8.0', phase: 'Succeeded', propertiesError: expect.stringMatching(/^failed to unmarshal properties annotation: /) as string },
    ]);
    expect(ops.warnings).toEqual([
      'Subscription x/hostile names no package, CatalogSource or CatalogSource namespace (spec.name, spec.source, spec.sourceNamespace): left out',
      "CatalogSource openshift-marketplace/flaky is TRANSIENT_FAILURE: OLM cannot resolve from it now; its Subscriptions' upgrades are planned from its image all the same",
    ]);
    // CSVs are listed as OLM's openshift controller lists them, in small pages.
    expect(asked.find((a) => a.path === `${V0}/clusterserviceversions`)!.query).toMatchObject({ labelSelector: '!olm.copiedFrom', limit: 50 });
  });

  it('gives each ClusterExtension the available ClusterCatalogs its selector admits, at the image catalogd resolved', async () => {
    const { client } = fakeClient({
      [`${V1}/clustercatalogs`]: [
        { metadata: { name: 'community', labels: { tier: 'community' } }, spec: { source: { type: 'Image', image: { ref: 'registry.example.com/community:v4.16' } }, priority: 10 }, status: { resolvedSource: { type: 'Image', image: { ref: `registry.example.com/community@sha256:${'a'.repeat(64)}` } } } },
        { metadata: { name: 'off', labels: { tier: 'community' } }, spec: { source: { type: 'Image', image: { ref: 'registry.example.com/off:1' } }, availabilityMode: 'Unavailable' } },
        { metadata: { name: 'certified', labels: { tier: 'certified' } }, spec: { source: { type: 'Image', image: { ref: 'registry.example.com/certified:v4.16' } } } },
      ],
      [`${V1}/clusterextensions`]: [
        {
          metadata: { name: 'kv' },
          spec: { namespace: 'kv', serviceAccount: { name: 'kv' }, source: { sourceType: 'Catalog', catalog: { packageName: 'kv-store', channels: ['alpha'], version: '>=1.0.0, <2.0.0', upgradeConstraintPolicy: 'SelfCertified', selector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['community'] }] } } } },
          status: { install: { bundle: { name: 'kv-store.v1.0.0', version: '1.0.0' } } },
        },
        { metadata: { name: 'all' }, spec: { source: { sourceType: 'Catalog', catalog: { packageName: 'app' } } } },
        { metadata: { name: 'bad-selector' }, spec: { source: { sourceType: 'Catalog', catalog: { packageName: 'app', selector: { matchExpressions: [{ key: 'tier', operator: 'Near' }] } } } } },
      ],
    });
    const ops = (await readLiveOperators(client))!;
    expect(ops.subscriptions).toEqual([]);
    expect(ops.clusterCatalogs).toEqual([
      { name: 'community', image: `registry.example.com/community@sha256:${'a'.repeat(64)}`, priority: 10 },
      { name: 'off', image: 'registry.example.com/off:1', priority: 0 },
      { name: 'certified', image: 'registry.example.com/certified:v4.16', priority: 0 },
    ]);
    expect(ops.extensions).toEqual([
      { name: 'kv', packageName: 'kv-store', channels: ['alpha'], version: '>=1.0.0, <2.0.0', upgradeConstraintPolicy: 'SelfCertified', catalogs: ['community'], installed: { name: 'kv-store.v1.0.0', version: '1.0.0' } },
      { name: 'all', packageName: 'app', channels: [], catalogs: ['community', 'certified'] },
    ]);
    expect(ops.warnings).toEqual(['ClusterExtension bad-selector has no catalog source with a package, its channels and selector (spec.source.catalog): left out']);
  });

  it('names the RBAC it needs when a list is refused', async () => {
    const error = await readLiveOperators(fakeClient({ [`${V0}/subscriptions`]: [] }, `${V0}/subscriptions`).client).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LiveClusterRefused);
    expect((error as Error).message).toBe('https://api.example.com:6443 refused to list subscriptions (operators.coreos.com) in all namespaces (HTTP 403): planning from the live cluster needs list on subscriptions, catalogsources and clusterserviceversions (operators.coreos.com, all namespaces) and on clusterextensions and clustercatalogs (olm.operatorframework.io) for the operators it runs; or plan with --no-cluster');
  });

  it('refuses a cluster with more Subscriptions than a plan reads (exit 4)', async () => {
    const many = Array.from({ length: 2001 }, (_, i) => ({ metadata: { namespace: 'n', name: `s${i}` }, spec: { name: 'p', source: 'c', sourceNamespace: 'm' } }));
    const error = await readLiveOperators(fakeClient({ [`${V0}/subscriptions`]: many }).client).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClusterError);
    expect((error as Error).message).toBe('https://api.example.com:6443 has more than 2000 subscriptions, more than a plan reads; plan with --no-cluster');
  });
});
