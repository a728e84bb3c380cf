/**
 * `prestage plan --kubeconfig` of a running cluster's operators: the test bed's real kube-apiserver
 * serving OLM's own CRDs as they ship (operator-framework/api's crds/ for v0, operator-controller's
 * for v1; scripts/build-testbed.sh fetches them), Subscriptions, ClusterServiceVersions and
 * CatalogSources as OLM writes them (status through the status subresource), a ClusterCatalog and a
 * ClusterExtension, and Pods of the current CSVs bound to the test bed's Nodes; the simulated
 * 4.16.2 cluster (fixtures/live-cluster.ts) planned to 4.16.3 over the real registry serving the
 * fixture catalog. Walks come from the fixture catalog's channels (fixtures/catalog.ts), images
 * from its truth.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { simulatedCluster } from '../fixtures/live-cluster.js';
import { KubeClient } from '../src/kube/client.js';
import type { Plan } from '../src/plan/types.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { testbedBinaries } from './cluster/binaries.js';
import { installOpenShiftCrds, OPENSHIFT_4_21 } from './mco/crds.js';
import { runCli } from './support/cli.js';
import { loadSimulatedCluster } from './support/simulated-cluster.js';
import { removeTempDirs, tempDir } from './support/temp-files.js';

const truth = inject('fixtureTruth');
const catalog = inject('catalogTruth');
const RELEASE = `quay.io/openshift-release-dev/ocp-release:${truth.release.tag}`;
const V0 = '/apis/operators.coreos.com/v1alpha1';
const V1 = '/apis/olm.operatorframework.io/v1';
const MARKETPLACE = 'openshift-marketplace';
const MASTER = 'node-role.kubernetes.io/master';
const merge = { contentType: 'application/merge-patch+json' };
const NOW = '2024-07-01T10:00:00Z';
let registry: RegistryHandle;
let cluster: TestCluster;
let client: KubeClient;
let flags: string[];

/** OLM's CRDs as the modules ship them: v0's three the plan reads, v1's two. */
async function installOlmCrds(): Promise<void> {
  const { olmCrds } = await testbedBinaries();
  const files = [
    ...['subscriptions', 'clusterserviceversions', 'catalogsources'].map((p) => join(olmCrds.api, `operators.coreos.com_${p}.yaml`)),
    ...['clusterextensions', 'clustercatalogs'].map((p) => join(olmCrds.operatorController, `olm.operatorframework.io_${p}.yaml`)),
  ];
  const crds = files.map((file) => load(readFileSync(file, 'utf8')) as { spec: { group: string; names: { plural: string }; versions: Array<{ name: string; served: boolean }> } });
  for (const body of crds) await client.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body });
  const wanted = crds.flatMap((d) => d.spec.versions.filter((v) => v.served).map((v) => ({ path: `/apis/${d.spec.group}/${v.name}`, plural: d.spec.names.plural })));
  for (const deadline = Date.now() + 30_000; ;) {
    const served = await Promise.all(wanted.map(async ({ path, plural }) => (await client.find<{ resources: Array<{ name: string }> }>(path))?.resources.some((r) => r.name === plural) ?? false));
    if (served.every(Boolean)) return;
    if (Date.now() > deadline) throw new Error('OLM CRDs were not served within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** An object, then its status through the status subresource, as OLM's controllers write it. */
async function create(path: string, kind: string, object: { metadata: { name: string; [field: string]: unknown } } & Record<string, unknown>, status?: unknown): Promise<void> {
  const apiVersion = path.startsWith('/api/v1/') ? 'v1' : path.split('/').slice(2, 4).join('/');
  await client.request('POST', path, { body: { apiVersion, kind, ...object } });
  if (status !== undefined) await client.request('PATCH', `${path}/${object.metadata.name}/status`, { body: { status }, ...merge });
}

async function namespace(name: string): Promise<void> {
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name } } });
  await client.request('POST', `/api/v1/namespaces/${name}/serviceaccounts`, { body: { metadata: { name: 'default' } } });
}

const bundleTruth = (name: string) => catalog.bundles.find((b) => b.name === name)!;
const byDigest = (image: { reference: string; digest: string }) => `${image.reference.replace(/[:@][^/]*$/, '')}@${image.digest}`;

interface Installed {
  readonly namespace: string;
  readonly pkg: string;
  readonly csv: string;
  readonly version: string;
  readonly channel?: string;
  readonly approval?: 'Manual';
  readonly config?: unknown;
  readonly maxOpenShiftVersion?: string;
  /** Nodes its deployment's Pods run on now. */
  readonly podsOn: readonly string[];
}

/** A Subscription, the CSV it installed (Succeeded), and the Pods OLM's Deployment of it runs. */
async function installed(op: Installed): Promise<void> {
  const deployment = `${op.pkg}-controller-manager`;
  const operator = bundleTruth(op.csv).images[1]!;
  await create(`${V0}/namespaces/${op.namespace}/subscriptions`, 'Subscription', {
    metadata: { name: op.pkg, namespace: op.namespace },
    spec: { name: op.pkg, source: 'community-operators', sourceNamespace: MARKETPLACE, ...(op.channel ? { channel: op.channel } : {}), installPlanApproval: op.approval ?? 'Automatic', ...(op.config ? { config: op.config } : {}) },
  }, { installedCSV: op.csv, currentCSV: op.csv, state: 'AtLatestKnown', lastUpdated: NOW });
  const properties = JSON.stringify({ properties: [{ type: 'olm.package', value: { packageName: op.pkg, version: op.version } }, ...(op.maxOpenShiftVersion ? [{ type: 'olm.maxOpenShiftVersion', value: op.maxOpenShiftVersion }] : [])] });
  await create(`${V0}/namespaces/${op.namespace}/clusterserviceversions`, 'ClusterServiceVersion', {
    metadata: { name: op.csv, namespace: op.namespace, annotations: { 'operatorframework.io/properties': properties, 'olm.operatorGroup': 'global-operators', 'olm.operatorNamespace': op.namespace } },
    spec: {
      displayName: op.pkg,
      version: op.version,
      installModes: [{ type: 'AllNamespaces', supported: true }],
      install: { strategy: 'deployment', spec: { deployments: [{ name: deployment, spec: { selector: { matchLabels: { app: deployment } }, template: { metadata: { labels: { app: deployment } }, spec: { containers: [{ name: 'manager', image: operator.reference }] } } } }] } },
    },
  }, { phase: 'Succeeded', reason: 'InstallSucceeded', message: 'install strategy completed with no errors', lastUpdateTime: NOW, lastTransitionTime: NOW });
  for (const [i, node] of op.podsOn.entries()) {
    const pod = `${deployment}-7d9f8b7c6d-${'abcde'.slice(i)}${i}`;
    await create(`/api/v1/namespaces/${op.namespace}/pods`, 'Pod', {
      metadata: { name: pod, namespace: op.namespace, labels: { app: deployment }, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `${deployment}-7d9f8b7c6d`, uid: `00000000-0000-4000-8000-00000000000${i}` }] },
      // OLM's Deployment sets OPERATOR_CONDITION_NAME to the CSV on every container (install/deployment.go).
      spec: { nodeName: node, automountServiceAccountToken: false, containers: [{ name: 'manager', image: operator.reference, env: [{ name: 'OPERATOR_CONDITION_NAME', value: op.csv }] }] },
    }, { phase: 'Running', containerStatuses: [{ name: 'manager', image: operator.reference, imageID: byDigest(operator), ready: true, restartCount: 0, started: true, state: { running: { startedAt: NOW } } }] });
  }
}

beforeAll(async () => {
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  flags = ['--mirror', `quay.io=${registry.host}`, '--mirror', `registry.redhat.io=${registry.host}/registry.redhat.io`, '--insecure-registry', registry.host];
  cluster = await startCluster({ workers: 2 });
  client = new KubeClient(cluster.kubeConfig);
  await installOpenShiftCrds(client, OPENSHIFT_4_21, 'all');
  await installOlmCrds();
  const simulated = simulatedCluster(truth, cluster.nodes.map((n) => ({ name: n.name, role: n.role })));
  await loadSimulatedCluster(client, simulated);
  for (const ns of [MARKETPLACE, 'datagrid-a', 'datagrid-b', 'csm', 'kv', 'legacy'].filter((n) => !simulated.namespaces.includes(n))) await namespace(ns);
  await create(`${V0}/namespaces/${MARKETPLACE}/catalogsources`, 'CatalogSource', {
    metadata: { name: 'community-operators', namespace: MARKETPLACE },
    spec: { sourceType: 'grpc', image: catalog.reference, displayName: 'Community Operators', publisher: 'Red Hat' },
  }, { connectionState: { address: 'community-operators.openshift-marketplace.svc:50051', lastConnect: NOW, lastObservedState: 'READY' } });
  await create(`${V0}/namespaces/${MARKETPLACE}/catalogsources`, 'CatalogSource', { metadata: { name: 'legacy-grpc', namespace: MARKETPLACE }, spec: { sourceType: 'grpc', address: 'catalog.example.com:50051' } });
  const worker = cluster.nodes.find((n) => n.role === 'worker')!.name;
  const master = cluster.nodes.find((n) => n.role === 'control-plane')!.name;
  await installed({ namespace: 'datagrid-a', pkg: 'datagrid', csv: 'datagrid-operator.v2.4.0', version: '2.4.0', channel: 'stable', podsOn: [worker] });
  await installed({ namespace: 'datagrid-b', pkg: 'datagrid', csv: 'datagrid-operator.v2.3.3', version: '2.3.3', channel: 'stable', approval: 'Manual', podsOn: [] });
  await installed({ namespace: 'csm', pkg: 'csm-storage', csv: 'csm-storage.v1.8.0', version: '1.8.0', maxOpenShiftVersion: '4.16', podsOn: [master] });
  // No Pod of it runs now: where it goes comes from its Subscription's spec.config alone.
  await installed({ namespace: 'kv', pkg: 'kv-store', csv: 'kv-store.v0.9.0', version: '0.9.0', config: { nodeSelector: { [MASTER]: '' }, tolerations: [{ key: MASTER, operator: 'Exists', effect: 'NoSchedule' }] }, podsOn: [] });
  await create(`${V0}/namespaces/legacy/subscriptions`, 'Subscription', { metadata: { name: 'thing', namespace: 'legacy' }, spec: { name: 'thing', source: 'legacy-grpc', sourceNamespace: MARKETPLACE } });
  // OLM v1: catalogd resolved the catalog's tag to its digest; the extension runs datagrid 2.4.1.
  await create(`${V1}/clustercatalogs`, 'ClusterCatalog', { metadata: { name: 'community' }, spec: { source: { type: 'Image', image: { ref: catalog.reference } }, priority: 0 } }, {
    resolvedSource: { type: 'Image', image: { ref: `${catalog.reference.replace(/:[^/]*$/, '')}@${catalog.digest}` } },
    lastUnpacked: NOW,
    conditions: [{ type: 'Serving', status: 'True', reason: 'Available', message: 'Serving desired content from resolved source', lastTransitionTime: NOW, observedGeneration: 1 }],
  });
  await create(`${V1}/clusterextensions`, 'ClusterExtension', {
    metadata: { name: 'datagrid' },
    spec: { namespace: 'datagrid-v1', serviceAccount: { name: 'installer' }, source: { sourceType: 'Catalog', catalog: { packageName: 'datagrid', channels: ['stable'] } } },
  }, { install: { bundle: { name: 'datagrid-operator.v2.4.1', version: '2.4.1' } }, conditions: [{ type: 'Installed', status: 'True', reason: 'Succeeded', message: 'Installed bundle successfully', lastTransitionTime: NOW, observedGeneration: 1 }] });
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  removeTempDirs();
  await cluster?.stop();
  await registry?.stop();
});

const walkOf = (plan: Plan, owner: string) => plan.operators!.bundles.filter((b) => b.why.includes(` for ${owner}:`)).map((b) => b.name);
const imageOf = (plan: Plan, image: { reference: string; digest: string }) => plan.images.find((i) => i.pullSpec === byDigest(image));

describe("plan of a live cluster's operators through its upgrade", () => {
  let plan: Plan;
  beforeAll(async () => {
    const r = await runCli(['plan', RELEASE, ...flags, '--kubeconfig', cluster.kubeconfigPath, '-o', 'json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    plan = JSON.parse(r.stdout) as Plan;
  });

  it('stages each bundle OLM installs on the way to the head of the subscribed channel', () => {
    // 2.4.2's skipRange >=2.3.x <2.4.1 holds 2.4.0 and 2.3.3: OLM, head first, jumps straight there.
    expect(walkOf(plan, 'Subscription datagrid-a/datagrid')).toEqual(['datagrid-operator.v2.4.2']);
    expect(walkOf(plan, 'Subscription datagrid-b/datagrid')).toEqual(['datagrid-operator.v2.4.2']);
    // A plain replaces chain: one hop each.
    expect(walkOf(plan, 'Subscription csm/csm-storage')).toEqual(['csm-storage.v1.8.1', 'csm-storage.v1.9.0']);
    expect(walkOf(plan, 'Subscription kv/kv-store')).toEqual(['kv-store.v1.0.0', 'kv-store.v1.1.0']);
    expect(walkOf(plan, 'ClusterExtension datagrid')).toEqual(['datagrid-operator.v2.4.2']);
    expect(plan.operators!.bundles.find((b) => b.why.includes('csm/csm-storage') && b.name === 'csm-storage.v1.9.0')!.why).toBe('upgrade step 2 of 2 for Subscription csm/csm-storage: replaces csm-storage.v1.8.1');
    expect(plan.operators!.bundles.find((b) => b.why.includes('datagrid-b/'))!.why).toBe('upgrade step 1 of 1 for Subscription datagrid-b/datagrid: its skipRange holds datagrid-operator.v2.3.3 (Manual approval: OLM installs each step once its InstallPlan is approved)');
    expect(plan.operators!.catalogs.map((c) => c.reference).sort()).toEqual([catalog.reference, `${catalog.reference.replace(/:[^/]*$/, '')}@${catalog.digest}`].sort());
  });

  it('stages every image of every walked bundle, by the digest the registry serves', () => {
    for (const name of ['datagrid-operator.v2.4.2', 'csm-storage.v1.8.1', 'csm-storage.v1.9.0', 'kv-store.v1.0.0', 'kv-store.v1.1.0']) {
      for (const image of bundleTruth(name).images) expect(imageOf(plan, image)?.operator?.bundles, `${name}: ${image.reference}`).toContain(name);
    }
    // Installed now, so not pulled again.
    for (const image of bundleTruth('csm-storage.v1.8.0').images.slice(1)) expect(imageOf(plan, image)).toBeUndefined();
  });

  it("puts each operator where its Pods run now, or where its Subscription's spec.config sends it", () => {
    const kv = imageOf(plan, bundleTruth('kv-store.v1.1.0').images[1]!)!;
    expect(kv.role).toBe('control-plane');
    expect(kv.evidence[0]).toMatch(/: deployment kv-store-controller-manager selects control-plane nodes \(nodeSelector node-role\.kubernetes\.io\/master\) \(Subscription kv\/kv-store's spec\.config applied, as OLM does\) \(the CSV in its bundle image\)$/);
    const csm = imageOf(plan, bundleTruth('csm-storage.v1.9.0').images[1]!)!;
    expect(csm.role).toBe('control-plane');
    expect(csm.evidence[0]).toMatch(/: its CSV csm-storage\.v1\.8\.0 runs now as 1 pod on 1\/1 control-plane nodes$/);
    const datagrid = imageOf(plan, bundleTruth('datagrid-operator.v2.4.2').images[1]!)!;
    expect(datagrid.role).toBe('worker');
    expect(datagrid.evidence).toContain('runs in datagrid-operator.v2.4.2 (upgrade step 1 of 1 for Subscription datagrid-a/datagrid: its skipRange holds datagrid-operator.v2.4.0): its CSV datagrid-operator.v2.4.0 runs now as 1 pod on 1/2 workers');
    expect(plan.sets.find((s) => s.role === 'control-plane' && s.operator?.package === 'kv-store')!.images).toContain(kv.pullSpec);
    expect(plan.sets.find((s) => s.role === 'worker' && s.operator?.package === 'kv-store')?.images ?? []).not.toContain(kv.pullSpec);
  });

  it('holds no z-stream update back for the CSV capped at 4.16, and says what it cannot stage', () => {
    expect(plan.operators!.blocked).toBeUndefined();
    expect(plan.warnings.filter((w) => w.includes('Upgradeable=False'))).toEqual([]);
    expect(plan.warnings).toContain(`Subscription legacy/thing: CatalogSource ${MARKETPLACE}/legacy-grpc serves the grpc address catalog.example.com:50051, no image; prestage reads catalogs from images, so its upgrade is not staged`);
  });
});

describe('the RBAC reading operators needs', () => {
  it('names it when a token lacks it (exit 4, one line), and exactly it is enough', async () => {
    const file = join(await tempDir('prestage-plan-live-operators-'), 'planner.kubeconfig');
    writeFileSync(file, cluster.kubeConfigForToken(await cluster.serviceAccountToken('default', 'planner')).exportConfig());
    const grant = async (name: string, rules: unknown[]) => {
      await client.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', { body: { metadata: { name }, rules } });
      await client.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', { body: { metadata: { name }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name }, subjects: [{ kind: 'ServiceAccount', namespace: 'default', name: 'planner' }] } });
    };
    const planned = () => runCli(['plan', RELEASE, ...flags, '--kubeconfig', file, '-o', 'json']);
    // RBAC changes reach the authorizer's cache within a moment.
    const settled = async (until: (r: { code: number; stderr: string }) => boolean) => {
      let r = await planned();
      for (const deadline = Date.now() + 10_000; !until(r) && Date.now() < deadline; r = await planned()) await new Promise((resolve) => setTimeout(resolve, 200));
      return r;
    };
    await grant('planner-cluster', [
      { apiGroups: [''], resources: ['nodes', 'pods'], verbs: ['get', 'list'] },
      { apiGroups: ['config.openshift.io'], resources: ['clusterversions', 'featuregates', 'infrastructures'], verbs: ['get'] },
      { apiGroups: ['machineconfiguration.openshift.io'], resources: ['osimagestreams', 'machineconfigpools'], verbs: ['get', 'list'] },
    ]);
    const refused = await settled((r) => r.stderr.includes('subscriptions'));
    expect(refused).toEqual({
      code: 4,
      stdout: '',
      stderr: `prestage: error: ${cluster.apiServerUrl} refused to list subscriptions (operators.coreos.com) in all namespaces (HTTP 403): planning from the live cluster needs list on subscriptions, catalogsources and clusterserviceversions (operators.coreos.com, all namespaces) and on clusterextensions and clustercatalogs (olm.operatorframework.io) for the operators it runs; or plan with --no-cluster\n`,
    });
    await grant('planner-operators', [
      { apiGroups: ['operators.coreos.com'], resources: ['subscriptions', 'catalogsources', 'clusterserviceversions'], verbs: ['list'] },
      { apiGroups: ['olm.operatorframework.io'], resources: ['clusterextensions', 'clustercatalogs'], verbs: ['list'] },
    ]);
    const allowed = await settled((r) => r.code === 0);
    expect(allowed.code).toBe(0);
    expect(walkOf(JSON.parse(allowed.stdout) as Plan, 'Subscription csm/csm-storage')).toEqual(['csm-storage.v1.8.1', 'csm-storage.v1.9.0']);
  });
});

describe("prune of an operator's sets", () => {
  it('deletes them once every install of the operator runs the newest bundle they hold, and not before', async () => {
    // The sets as plan renders them for MCO, created as apply would.
    const rendered = await runCli(['plan', RELEASE, ...flags, '--kubeconfig', cluster.kubeconfigPath, '-o', 'yaml']);
    expect(rendered.code).toBe(0);
    const sets = rendered.stdout.split(/^---\n/m).filter(Boolean).map((doc) => load(doc) as { apiVersion: string; metadata: { name: string; annotations: Record<string, string> } });
    const datagrid = sets.filter((s) => s.metadata.name.includes('-op-datagrid-'));
    expect(datagrid.map((s) => s.metadata.annotations['prestage.dev/operator-head'])).toEqual(datagrid.map(() => 'datagrid-operator.v2.4.2'));
    for (const body of sets) await client.request('POST', `/apis/${body.apiVersion}/pinnedimagesets`, { body });
    const pruned = async () => {
      const r = await runCli(['prune', '--dry-run=client', '-o', 'json', '--kubeconfig', cluster.kubeconfigPath]);
      expect(r.code).toBe(0);
      return (JSON.parse(r.stdout) as { prune: Array<{ name: string; why: string }> }).prune;
    };
    // datagrid-a and the ClusterExtension are on their way to 2.4.2, datagrid-b too: nothing to prune.
    expect((await pruned()).filter((s) => s.name.includes('-op-datagrid-'))).toEqual([]);
    for (const ns of ['datagrid-a', 'datagrid-b']) await client.request('PATCH', `${V0}/namespaces/${ns}/subscriptions/datagrid/status`, { body: { status: { installedCSV: 'datagrid-operator.v2.4.2', currentCSV: 'datagrid-operator.v2.4.2', state: 'AtLatestKnown' } }, ...merge });
    // One install (the ClusterExtension) still runs 2.4.1: the sets stay.
    expect((await pruned()).filter((s) => s.name.includes('-op-datagrid-'))).toEqual([]);
    await client.request('PATCH', `${V1}/clusterextensions/datagrid/status`, { body: { status: { install: { bundle: { name: 'datagrid-operator.v2.4.2', version: '2.4.2' } } } }, ...merge });
    const gone = (await pruned()).filter((s) => s.name.includes('-op-datagrid-')).map(({ name, why }) => ({ name, why })).sort((a, b) => a.name.localeCompare(b.name));
    expect(gone).toEqual(datagrid.map((s) => s.metadata.name).sort().map((name) => ({ name, why: 'operator datagrid runs datagrid-operator.v2.4.2, the newest bundle the set holds, wherever it is installed' })));
    // The release's own sets and the other operators' stay: the cluster still runs 4.16.2.
    expect((await pruned()).map((s) => s.name).filter((name) => !name.includes('-op-datagrid-'))).toEqual([]);
  });
});
