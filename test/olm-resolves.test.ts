/**
 * What prestage stages is what OLM installs, asked of OLM itself: OLM v0's real catalog operator
 * (operator-lifecycle-manager's cmd/catalog, built by scripts/build-testbed.sh from the Go module)
 * runs against the test bed's kube-apiserver serving OLM's CRDs as they ship, and resolves
 * Subscriptions against a CatalogSource that serves the filtered catalog `bundle push` put in an
 * empty registry: the catalog's filesystem extracted from the mirror and served by operator-registry's
 * real `opm serve`, the grpc address-only CatalogSource OLM dials directly (no registry pod). Bundles
 * that carry only `olm.csv.metadata` are unpacked by a Job OLM creates; no kubelet runs it, so the
 * test plays it as `opm alpha bundle extract` would: the bundle image's manifests, pulled from the
 * mirror, into the Job's ConfigMap, and the Job marked Complete. OLM then writes its InstallPlan
 * (Manual approval, so nothing is installed): the bundles it names are compared with `prestage plan
 * --catalog --package` (what `bundle create` stages) and with `prestage plan --kubeconfig` of the same
 * API server once the CatalogSources name the pushed catalog image, as `bundle push` writes them.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubeClient } from '../src/kube/client.js';
import type { Plan } from '../src/plan/types.js';
import { COLD_BUILD_TIMEOUT_MS, testbedBinaries, type TestbedBinaries } from './cluster/binaries.js';
import { startControlPlane, type ControlPlane } from './cluster/control-plane.js';
import { Daemon } from './cluster/processes.js';
import { freePort, startRegistry, type RegistryHandle } from './harness/index.js';
import { installOpenShiftCrds, OPENSHIFT_4_21 } from './mco/crds.js';
import { simulatedCluster } from '../fixtures/live-cluster.js';
import { runCli } from './support/cli.js';
import { extractImage, startOpmServe } from './support/image-checks.js';
import { removeTempDirs, tempDir } from './support/temp-files.js';

const truth = inject('fixtureTruth');
const catalog = inject('catalogTruth');
const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
const CATALOG_REPOSITORY = 'redhat/community-operator-index';
const V0 = '/apis/operators.coreos.com/v1alpha1';
const merge = { contentType: 'application/merge-patch+json' };
/** OLM's global catalog namespace (`--namespace`); the Subscriptions' namespaces are their own. */
const GLOBAL = 'olm';
const NOW = '2024-07-01T10:00:00Z';

let source: RegistryHandle;
let site: RegistryHandle;
let work: string;
let mirrorFlags: string[];
let served: ReturnType<typeof startOpmServe> | undefined;
let api: ControlPlane | undefined;
let olm: Daemon | undefined;
let client: KubeClient;
let catalogPort: number;
let olmLog: string;
/** What OLM proposed, per namespace: the InstallPlan's bundles (identifier and path). */
const resolved = new Map<string, Array<[string, string]>>();

const bundleTruth = (name: string) => catalog.bundles.find((b) => b.name === name)!;
const repositoryOf = (reference: string) => reference.replace(/^[^/]+\//, '').replace(/[:@].*$/, '');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until it gives a value, for at most `ms`; the catalog operator's log on a timeout. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 90_000): Promise<T> {
  for (const deadline = Date.now() + ms; ;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (!olm?.alive) throw new Error(`the catalog operator exited while waiting for ${what}; its log:\n${(await readFile(olmLog, 'utf8')).slice(-4000)}`);
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s; the catalog operator's log:\n${(await readFile(olmLog, 'utf8')).slice(-4000)}`);
    await sleep(250);
  }
}

async function create(path: string, kind: string, object: { metadata: { name: string; [field: string]: unknown } } & Record<string, unknown>, status?: unknown): Promise<void> {
  const apiVersion = path.startsWith('/api/v1/') ? 'v1' : path.split('/').slice(2, 4).join('/');
  await client.request('POST', path, { body: { apiVersion, kind, ...object } });
  if (status !== undefined) await client.request('PATCH', `${path}/${object.metadata.name}/status`, { body: { status }, ...merge });
}

async function installOlmCrds(binaries: TestbedBinaries): Promise<void> {
  const files = (await readdir(binaries.olmCrds.api)).filter((f) => f.startsWith('operators.coreos.com_')).sort();
  const crds = await Promise.all(files.map(async (f) => load(await readFile(join(binaries.olmCrds.api, f), 'utf8')) as { spec: { group: string; names: { plural: string }; versions: Array<{ name: string; served: boolean }> } }));
  for (const body of crds) await client.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body });
  const wanted = crds.flatMap((d) => d.spec.versions.filter((v) => v.served).map((v) => ({ path: `/apis/${d.spec.group}/${v.name}`, plural: d.spec.names.plural })));
  for (const deadline = Date.now() + 30_000; ;) {
    const ok = await Promise.all(wanted.map(async ({ path, plural }) => (await client.find<{ resources: Array<{ name: string }> }>(path))?.resources.some((r) => r.name === plural) ?? false));
    if (ok.every(Boolean)) return;
    if (Date.now() > deadline) throw new Error('OLM CRDs were not served within 30 s');
    await sleep(100);
  }
}

/** A namespace with its default ServiceAccount, one OperatorGroup, and the CatalogSource serving prestage's catalog. */
async function subscriberNamespace(name: string): Promise<void> {
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name } } });
  await client.request('POST', `/api/v1/namespaces/${name}/serviceaccounts`, { body: { metadata: { name: 'default' } } });
  await create(`/apis/operators.coreos.com/v1/namespaces/${name}/operatorgroups`, 'OperatorGroup', { metadata: { name: 'global-operators', namespace: name }, spec: {} });
  await create(`${V0}/namespaces/${name}/catalogsources`, 'CatalogSource', {
    metadata: { name: 'prestage', namespace: name },
    spec: { sourceType: 'grpc', address: `127.0.0.1:${catalogPort}`, displayName: 'prestage filtered catalog' },
  });
}

interface Job { metadata: { name: string }; spec: { template: { spec: { initContainers: Array<{ name: string; image: string }> } } }; status?: { conditions?: Array<{ type: string; status: string }> } }

/** The bundle images OLM's unpack Jobs in `namespace` pull (their `pull` init container), by Job name. */
async function unpackJobs(namespace: string): Promise<Map<string, string>> {
  const jobs = await client.get<{ items: Job[] }>(`/apis/batch/v1/namespaces/${namespace}/jobs`);
  return new Map(jobs.items.map((j) => [j.metadata.name, j.spec.template.spec.initContainers.find((c) => c.name === 'pull')!.image]));
}

/**
 * What an unpack Job does, done by the test: the bundle image (from the mirror, by the digest the
 * catalog's fixture truth gives) extracted, its manifests/ into the Job's ConfigMap, then the Job
 * Complete through the status subresource, as the Job controller writes it.
 */
async function playUnpackJob(namespace: string, job: string, bundleImage: string): Promise<void> {
  const bundle = catalog.bundles.find((b) => b.image === bundleImage);
  if (!bundle) throw new Error(`OLM unpacks ${bundleImage}, which no bundle of the catalog names`);
  const root = join(work, 'unpacked', job);
  await extractImage(site, repositoryOf(bundleImage), bundle.images[0]!.digest, root);
  const data: Record<string, string> = {};
  for (const file of await readdir(join(root, 'manifests'))) data[file] = await readFile(join(root, 'manifests', file), 'utf8');
  await client.request('PATCH', `/api/v1/namespaces/${namespace}/configmaps/${job}`, { body: { data }, ...merge });
  const condition = (type: string) => ({ type, status: 'True', reason: 'CompletionsReached', message: 'Reached expected number of succeeded pods', lastProbeTime: new Date().toISOString(), lastTransitionTime: new Date().toISOString() });
  const now = new Date().toISOString();
  await client.request('PATCH', `/apis/batch/v1/namespaces/${namespace}/jobs/${job}/status`, {
    body: { status: { startTime: now, completionTime: now, active: 0, ready: 0, succeeded: 1, conditions: [condition('SuccessCriteriaMet'), condition('Complete')] } },
    ...merge,
  });
}

interface InstallPlan {
  metadata: { name: string };
  spec: { clusterServiceVersionNames: string[]; approval: string; approved: boolean };
  status?: {
    phase?: string;
    plan?: Array<{ resolving: string; resource: { kind: string; name: string } }>;
    bundleLookups?: Array<{ identifier: string; path: string; replaces: string }>;
  };
}

/** Waits for OLM's unpack Jobs in `namespace` (exactly `count`), plays them, and waits for OLM's InstallPlan. */
async function resolve(namespace: string, count: number): Promise<{ jobs: Map<string, string>; plan: InstallPlan }> {
  const jobs = await until(`${count} unpack Jobs in ${namespace}`, async () => {
    const found = await unpackJobs(namespace);
    return found.size >= count ? found : undefined;
  });
  // No more appear once OLM has resolved: give it a moment to prove that.
  await sleep(2_000);
  expect([...(await unpackJobs(namespace)).keys()].sort()).toEqual([...jobs.keys()].sort());
  for (const [job, image] of jobs) await playUnpackJob(namespace, job, image);
  const plan = await until(`an InstallPlan in ${namespace}`, async () => {
    const plans = await client.get<{ items: InstallPlan[] }>(`${V0}/namespaces/${namespace}/installplans`);
    const found = plans.items.find((p) => (p.status?.plan?.length ?? 0) > 0);
    return found;
  });
  return { jobs, plan };
}

async function prestagePlan(packages: readonly string[]): Promise<Plan> {
  const r = await runCli(['plan', RELEASE, ...mirrorFlags, '-o', 'json', '--catalog', catalog.reference, ...packages.flatMap((p) => ['--package', p])]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as Plan;
}

beforeAll(async () => {
  const binaries = await testbedBinaries();
  const opm = (binaries as TestbedBinaries & { readonly opm: string }).opm;
  source = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  site = await startRegistry();
  work = await tempDir('prestage-olm-resolves-');
  mirrorFlags = ['--mirror', `quay.io=${source.host}`, '--mirror', `registry.redhat.io=${source.host}/registry.redhat.io`, '--insecure-registry', source.host];
  const bundle = join(work, 'bundle');
  const created = await runCli(['bundle', 'create', RELEASE, '--catalog', catalog.reference, '--package', 'app-operator', '--package', 'datagrid/stable@2.4.1..2.4.2', '--output-dir', bundle, ...mirrorFlags, '--allow-unsigned', '--remove-signatures']);
  expect(created.code, created.stderr).toBe(0);
  const pushed = await runCli(['bundle', 'push', bundle, site.host, '--insecure-registry', site.host, '--output-dir', join(work, 'out')]);
  expect(pushed.code, pushed.stderr).toBe(0);
  // The pushed catalog's filesystem, as a runtime applies its layers; served as its CatalogSource pod would.
  const root = join(work, 'rootfs');
  await extractImage(site, CATALOG_REPOSITORY, 'v4.16', root);
  catalogPort = await freePort();
  served = startOpmServe(opm, ['serve', join(root, 'configs'), '-p', String(catalogPort), '--pprof-addr', `127.0.0.1:${await freePort()}`, '-t', join(work, 'termination-log')]);
  await served.ready;

  api = await startControlPlane(join(work, 'control-plane'), binaries);
  const config = new KubeConfig();
  config.loadFromFile(api.kubeconfigPath);
  client = new KubeClient(config);
  await installOlmCrds(binaries);
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: GLOBAL } } });
  await subscriberNamespace('app');
  await subscriberNamespace('datagrid');
  // (a) nothing installed: app-operator from its channel. (b) datagrid 2.4.1 installed. Both before
  // the catalog operator starts, so it never sees (b)'s Subscription without the status OLM would have written.
  await create(`${V0}/namespaces/app/subscriptions`, 'Subscription', {
    metadata: { name: 'app-operator', namespace: 'app' },
    spec: { name: 'app-operator', channel: 'stable', source: 'prestage', sourceNamespace: 'app', installPlanApproval: 'Manual' },
  });
  // As the OLM operator leaves it: the CSV Succeeded, the Subscription at it.
  await create(`${V0}/namespaces/datagrid/clusterserviceversions`, 'ClusterServiceVersion', {
    metadata: {
      name: 'datagrid-operator.v2.4.1',
      namespace: 'datagrid',
      annotations: { 'operatorframework.io/properties': JSON.stringify({ properties: [{ type: 'olm.package', value: { packageName: 'datagrid', version: '2.4.1' } }] }), 'olm.operatorGroup': 'global-operators', 'olm.operatorNamespace': 'datagrid' },
    },
    spec: {
      displayName: 'datagrid',
      version: '2.4.1',
      installModes: [{ type: 'AllNamespaces', supported: true }],
      install: { strategy: 'deployment', spec: { deployments: [{ name: 'datagrid-controller-manager', spec: { selector: { matchLabels: { app: 'datagrid' } }, template: { metadata: { labels: { app: 'datagrid' } }, spec: { containers: [{ name: 'manager', image: bundleTruth('datagrid-operator.v2.4.1').images[1]!.reference }] } } } }] } },
    },
  }, { phase: 'Succeeded', reason: 'InstallSucceeded', message: 'install strategy completed with no errors', lastUpdateTime: NOW, lastTransitionTime: NOW });
  await create(`${V0}/namespaces/datagrid/subscriptions`, 'Subscription', {
    metadata: { name: 'datagrid', namespace: 'datagrid' },
    spec: { name: 'datagrid', channel: 'stable', startingCSV: 'datagrid-operator.v2.4.1', source: 'prestage', sourceNamespace: 'datagrid', installPlanApproval: 'Manual' },
  }, { installedCSV: 'datagrid-operator.v2.4.1', currentCSV: 'datagrid-operator.v2.4.1', state: 'AtLatestKnown', lastUpdated: NOW });
  olmLog = join(work, 'olm-catalog.log');
  // No pod runs: the images named for the registry pods and unpack Jobs are never pulled.
  olm = Daemon.start({
    name: 'olm-catalog',
    command: binaries['olm-catalog'],
    args: ['--kubeconfig', api.kubeconfigPath, '--namespace', GLOBAL, '--configmapServerImage', 'quay.io/operator-framework/configmap-operator-registry:unused', '--opmImage', 'quay.io/operator-framework/opm:unused', '--util-image', 'quay.io/operator-framework/olm:unused', '--interval', '10m'],
    logPath: olmLog,
  });
  // OLM reports the CatalogSource's gRPC connection READY once it has dialed opm serve.
  for (const ns of ['app', 'datagrid']) {
    await until(`CatalogSource ${ns}/prestage READY`, async () => {
      const cs = await client.get<{ status?: { connectionState?: { lastObservedState?: string } } }>(`${V0}/namespaces/${ns}/catalogsources/prestage`);
      return cs.status?.connectionState?.lastObservedState === 'READY' ? true : undefined;
    });
  }
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await olm?.stop();
  served?.process.kill('SIGTERM');
  await api?.stop();
  await source?.stop();
  await site?.stop();
  removeTempDirs();
});

describe("OLM's catalog operator resolving against the catalog prestage pushed", () => {
  it('installs app-operator with the kv-store bundle it requires: exactly the bundles prestage plans', async () => {
    const { jobs, plan } = await resolve('app', 2);
    const expected = ['app-operator.v3.0.0', 'kv-store.v1.1.0'];
    // The bundle images OLM pulls to unpack: those two bundles' images, as the catalog names them.
    expect([...jobs.values()].sort()).toEqual(expected.map((n) => bundleTruth(n).image).sort());
    expect(plan.spec.clusterServiceVersionNames.sort()).toEqual(expected);
    expect(plan.spec).toMatchObject({ approval: 'Manual', approved: false });
    expect(plan.status!.phase).toBe('RequiresApproval');
    expect(plan.status!.bundleLookups!.map((l) => [l.identifier, l.path]).sort()).toEqual(expected.map((n) => [n, bundleTruth(n).image]));
    const csvSteps = plan.status!.plan!.filter((s) => s.resource.kind === 'ClusterServiceVersion').map((s) => [s.resolving, s.resource.name]).sort();
    expect(csvSteps).toEqual(expected.map((n) => [n, n]));
    resolved.set('app', plan.status!.bundleLookups!.map((l) => [l.identifier, l.path]));

    const planned = await prestagePlan(['app-operator']);
    const staged = planned.operators!.bundles.map((b) => b.name).sort();
    expect(staged).toEqual(expected);
    expect(planned.operators!.bundles.find((b) => b.name === 'kv-store.v1.1.0')!.why).toMatch(/^dependency of app-operator\.v3\.0\.0/);
    expect(new Map(planned.operators!.bundles.map((b) => [b.name, b.image]))).toEqual(new Map(plan.status!.bundleLookups!.map((l) => [l.identifier, l.path])));
  }, 180_000);

  it('upgrades an installed datagrid 2.4.1 to 2.4.2, the bundle prestage stages past it', async () => {
    const { jobs, plan } = await resolve('datagrid', 1);
    expect([...jobs.values()]).toEqual([bundleTruth('datagrid-operator.v2.4.2').image]);
    expect(plan.spec.clusterServiceVersionNames).toEqual(['datagrid-operator.v2.4.2']);
    expect(plan.status!.bundleLookups!.map((l) => [l.identifier, l.path, l.replaces])).toEqual([['datagrid-operator.v2.4.2', bundleTruth('datagrid-operator.v2.4.2').image, 'datagrid-operator.v2.4.1']]);
    resolved.set('datagrid', plan.status!.bundleLookups!.map((l) => [l.identifier, l.path]));

    // prestage's selection of the range stages both ends; OLM's next step past the installed one is in it.
    const planned = await prestagePlan(['datagrid/stable@2.4.1..2.4.2']);
    expect(planned.operators!.bundles.map((b) => b.name).sort()).toEqual(['datagrid-operator.v2.4.1', 'datagrid-operator.v2.4.2']);
    expect(planned.operators!.bundles.find((b) => b.name === 'datagrid-operator.v2.4.2')!.image).toBe(plan.status!.bundleLookups![0]!.path);
  }, 180_000);

  describe("prestage's plan of the same cluster (--kubeconfig)", () => {
    let planned: Plan;
    /** The bundles the plan stages for `owner`, with the image each names. */
    const walk = (owner: string) => planned.operators!.bundles.filter((b) => b.why.includes(owner)).map((b): [string, string] => [b.name, b.image]).sort();
    beforeAll(async () => {
      expect([...resolved.keys()].sort()).toEqual(['app', 'datagrid']);
      // OLM is done: the CatalogSources become what `bundle push` wrote for the disconnected cluster,
      // the pushed catalog by digest (prestage reads catalogs from images, not from grpc addresses).
      await olm!.stop();
      const pushedSource = load(await readFile(join(work, 'out', 'cs-community-operator-index-v4-16.yaml'), 'utf8')) as { spec: { image: string } };
      for (const ns of ['app', 'datagrid']) await client.request('PATCH', `${V0}/namespaces/${ns}/catalogsources/prestage`, { body: { spec: { address: null, image: pushedSource.spec.image } }, ...merge });
      // The OpenShift cluster around them: its ClusterVersion (4.16.2), Infrastructure, FeatureGate, two Nodes.
      await installOpenShiftCrds(client, OPENSHIFT_4_21, 'config');
      const nodes = [{ name: 'master-0', role: 'control-plane' as const }, { name: 'worker-0', role: 'worker' as const }];
      for (const node of nodes) await client.request('POST', '/api/v1/nodes', { body: { metadata: { name: node.name, labels: { [node.role === 'control-plane' ? 'node-role.kubernetes.io/master' : 'node-role.kubernetes.io/worker']: '' } } } });
      const simulated = simulatedCluster(truth, nodes);
      for (const [plural, object] of [['clusterversions', simulated.clusterVersion], ['infrastructures', simulated.infrastructure], ['featuregates', simulated.featureGate]] as const) {
        const { status, ...spec } = object as { status: unknown; metadata: { name: string } };
        await client.request('POST', `/apis/config.openshift.io/v1/${plural}`, { body: spec });
        await client.request('PATCH', `/apis/config.openshift.io/v1/${plural}/${spec.metadata.name}/status`, { body: { status }, ...merge });
      }
      const r = await runCli(['plan', RELEASE, ...mirrorFlags, '--insecure-registry', site.host, '--kubeconfig', api!.kubeconfigPath, '-o', 'json']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      planned = JSON.parse(r.stdout) as Plan;
    }, 180_000);

    it('walks the installed datagrid 2.4.1 to the bundle OLM proposed, 2.4.2', () => {
      expect(walk('Subscription datagrid/datagrid')).toEqual(resolved.get('datagrid'));
      expect(planned.operators!.bundles.find((b) => b.name === 'datagrid-operator.v2.4.2')!.why).toMatch(/^upgrade step 1 of 1 for Subscription datagrid\/datagrid: replaces datagrid-operator\.v2\.4\.1/);
    });

    it('stages app-operator, which OLM installs first for the new Subscription', () => {
      expect(walk('Subscription app/app-operator')).toContainEqual(resolved.get('app')!.find(([name]) => name === 'app-operator.v3.0.0'));
    });

    // For a Subscription with nothing installed, OLM's InstallPlan installs app-operator.v3.0.0 AND
    // kv-store.v1.1.0 (its olm.package.required and olm.gvk.required); so does the live walk (this
    // test found the walk staging app-operator alone).
    it('stages the kv-store bundle OLM installs beside it, as a dependency', () => {
      expect(walk('app-operator')).toEqual(resolved.get('app')!.sort());
    });
  });
});
