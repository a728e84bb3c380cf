/**
 * `prestage plan --kubeconfig` of the upgrade to a 5.0-style release (fixtures/eras.ts), against
 * the test bed's real kube-apiserver serving openshift/api main's CRDs: the fixture's cluster on
 * 4.16.2 (ClusterVersion, FeatureGate, Pods), plus the OS streams as MCO 5.0 publishes them
 * (OSImageStream `cluster`) and pools that boot different streams (MachineConfigPool
 * `spec.osImageStream`). The FeatureGate has no entry for the target version yet, as before any
 * upgrade: the gates come from the payload, with a note.
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildEraFixture } from '../fixtures/eras.js';
import { simulatedCluster } from '../fixtures/live-cluster.js';
import { pushFixture } from '../fixtures/push.js';
import { KubeClient } from '../src/kube/client.js';
import type { Plan } from '../src/plan/types.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { installOpenShiftCrds, OPENSHIFT_5_0 } from './mco/crds.js';
import { McoSimulator } from './mco/simulator.js';
import { applyServerSide, waitForCrdsEstablished, type Manifest } from '../src/install/apply.js';
import { runCli } from './support/cli.js';
import { loadSimulatedCluster } from './support/simulated-cluster.js';
import { CRDS } from '../src/api/prestage-crds.js';

const truth416 = inject('fixtureTruth');
const era = buildEraFixture('5.0');
const era420 = buildEraFixture('4.20');
const { truth } = era;
const MCO = '/apis/machineconfiguration.openshift.io/v1';
let dir: string;
let registry: RegistryHandle;
let cluster: TestCluster;
let client: KubeClient;

beforeAll(async () => {
  // The 4.16 fixture (the cluster's current release) in a copy of the shared storage, plus the 5.0 release.
  dir = await mkdtemp(join(tmpdir(), 'prestage-plan-live-eras-'));
  await cp(inject('fixtureStorageDir'), join(dir, 'storage'), { recursive: true });
  registry = await startRegistry({ storageDir: join(dir, 'storage') });
  await pushFixture(registry.url, era);
  await pushFixture(registry.url, era420);
  cluster = await startCluster({ workers: 2 });
  client = new KubeClient(cluster.kubeConfig);
  await installOpenShiftCrds(client, OPENSHIFT_5_0, 'all');
  await loadSimulatedCluster(client, simulatedCluster(truth416, cluster.nodes.map((n) => ({ name: n.name, role: n.role }))));
  // MCO's view of the current release's streams; workers were moved to RHEL 10, masters stay on the default.
  const pullSpec = (name: string) => truth.components.find((c) => c.name === name)!.pullSpec;
  const stream = (name: string, tag: string) => ({ name, osImage: pullSpec(tag), osExtensionsImage: pullSpec(`${tag}-extensions`) });
  await client.request('POST', `${MCO}/osimagestreams`, { body: { apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'OSImageStream', metadata: { name: 'cluster' }, spec: { defaultStream: 'rhel-9' } } });
  await client.request('PATCH', `${MCO}/osimagestreams/cluster/status`, { body: { status: { defaultStream: 'rhel-9', availableStreams: [stream('rhel-10', 'rhel-coreos-10'), stream('rhel-9', 'rhel-coreos')] } }, contentType: 'application/merge-patch+json' });
  for (const [pool, osImageStream] of [['master', undefined], ['worker', 'rhel-10']] as const) {
    await client.request('POST', `${MCO}/machineconfigpools`, {
      body: {
        apiVersion: 'machineconfiguration.openshift.io/v1',
        kind: 'MachineConfigPool',
        metadata: { name: pool },
        spec: {
          machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': pool } },
          nodeSelector: { matchLabels: { [`node-role.kubernetes.io/${pool}`]: '' } },
          ...(osImageStream ? { osImageStream: { name: osImageStream } } : {}),
        },
      },
    });
  }
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await cluster?.stop();
  await registry?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('plan of the upgrade of a running cluster to 5.0', () => {
  let plan: Plan;
  beforeAll(async () => {
    const r = await runCli(['plan', truth.release.pullSpec, '--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host, '--kubeconfig', cluster.kubeconfigPath, '-o', 'json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    plan = JSON.parse(r.stdout) as Plan;
  }, 120_000);
  const role = (name: string) => plan.images.find((i) => i.name === name)?.role ?? 'none';

  it('pins each pool\'s OS stream on that pool\'s nodes: RHEL 10 on workers, the default RHEL 9 on masters', () => {
    expect(plan.cluster.osStreams!.pinned).toEqual(['rhel-10', 'rhel-9']);
    expect(plan.cluster.osStreams!.why).toBe('rhel-10: pool worker; rhel-9: pool master (the cluster\'s default (OSImageStream cluster))');
    expect([role('rhel-coreos-10'), role('rhel-coreos-10-extensions')]).toEqual(['worker', 'worker']);
    expect([role('rhel-coreos'), role('rhel-coreos-extensions')]).toEqual(['control-plane', 'control-plane']);
    const workerSet = new Set(plan.sets.filter((s) => s.role === 'worker').flatMap((s) => s.images));
    expect(truth.components.filter((c) => c.osStream === 'rhel-9').some((c) => workerSet.has(c.pullSpec))).toBe(false);
  });

  it('decides inclusion with the cluster\'s feature set and, with no FeatureGate entry for 5.0.2 yet, the payload\'s gates (with a note)', () => {
    expect(plan.cluster.featureSet).toBe('Default');
    expect(plan.cluster.featureGates!.from).toMatch(/^the release's FeatureGate manifest .*SelfManagedHA-Default.*\(self-managed-high-availability, Default\)$/);
    expect(plan.cluster.featureGates!.enabled).toEqual([...truth.scenarios.Default.enabledGates].sort());
    expect(plan.warnings).toContain(`the cluster's FeatureGate has no status entry for ${truth.release.version} yet: its gates come from ${plan.cluster.featureGates!.from}`);
  });

  it('keeps the Cluster API images out: their gate is off and their capability unknown while it is', () => {
    for (const c of truth.components.filter((x) => x.featureGate === 'ClusterAPIMachineManagement')) expect(role(c.name)).toBe('none');
  });

  it('plans the MCO image on workers (its daemon), the cluster\'s capabilities as the CVO computes them for 5.0', () => {
    expect(role('machine-config-operator')).toBe('all');
    // The cluster's spec: baseline None plus what it enabled (no Insights, no baremetal).
    expect(plan.cluster.capabilities).not.toContain('Insights');
    expect(plan.cluster.capabilities).not.toContain('OperatorLifecycleManagerV1');
  });
});

/**
 * The agent backend on this OpenShift cluster: MCO's daemon of the target release rebases the
 * nodes, from their own storage only as its release allows (os-image-via-mco.ts). The MCO
 * simulator's controller fills the pools' set lists, as MCO's does.
 */
describe('the node OS image when the agent stages an OpenShift cluster', () => {
  const mirror = () => ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
  const kube = () => ['--kubeconfig', cluster.kubeconfigPath, '--backend', 'agent'];
  let simulator: McoSimulator | undefined;
  beforeAll(async () => {
    await applyServerSide(client, CRDS as unknown as Manifest[]);
    await waitForCrdsEstablished(client, CRDS.map((crd) => crd.metadata.name));
  });
  afterAll(() => simulator?.stop());

  it('4.20: warns that pools listing no MCO set pull the OS image again; --os-image-via-mco writes one MCO set per pool of the OS image alone, and the warning goes', async () => {
    const release = era420.truth.release.pullSpec;
    const warned = await runCli(['apply', release, ...mirror(), ...kube(), '--name-prefix', 'os-a']);
    expect(warned.code).toBe(0);
    expect(warned.stderr).toMatch(/^prestage: warning: MCO 4\.20\.\d+ rebases a node from its own storage only when the node's pool lists a PinnedImageSet of MCO's; pools master, worker list none, so their nodes pull the OS image \([\d.]+ \w+\) again at the upgrade: --os-image-via-mco writes one MCO set per pool holding it\n$/m);
    expect(await client.get<{ items: unknown[] }>(`${MCO}/pinnedimagesets`).then((l) => l.items)).toEqual([]);

    const via = await runCli(['apply', release, ...mirror(), ...kube(), '--name-prefix', 'os-b', '--os-image-via-mco']);
    expect(via.stderr).toBe('');
    expect(via.code).toBe(0);
    const osTags = new Set(era420.truth.components.filter((c) => /coreos/.test(c.name)).map((c) => c.pullSpec));
    const mcoSets = (await client.get<{ items: Array<{ metadata: { name: string; labels: Record<string, string> }; spec: { pinnedImages: Array<{ name: string }> } }> }>(`${MCO}/pinnedimagesets`)).items;
    expect(mcoSets.map((s) => [s.metadata.name, s.metadata.labels['machineconfiguration.openshift.io/role']])).toEqual([[`os-b-${era420.truth.release.version}-control-plane-os-image`, 'master'], [`os-b-${era420.truth.release.version}-worker-os-image`, 'worker']]);
    for (const set of mcoSets) {
      expect(set.spec.pinnedImages.length).toBeGreaterThan(0);
      expect(set.spec.pinnedImages.every((i) => osTags.has(i.name))).toBe(true);
    }
    expect(via.stdout).toMatch(new RegExp(`^pinnedimageset\\.machineconfiguration\\.openshift\\.io/os-b-${era420.truth.release.version.replace(/\./g, '\\.')}-worker-os-image created: 2 images$`, 'm'));

    // MCO's controller lists the sets in the pools: the next stage has nothing to warn about.
    simulator = await McoSimulator.start(client, { pullMs: 50 });
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      const pools = (await client.get<{ items: Array<{ spec: { pinnedImageSets?: unknown[] } }> }>(`${MCO}/machineconfigpools`)).items;
      if (pools.every((p) => (p.spec.pinnedImageSets ?? []).length > 0)) break;
    }
    const quiet = await runCli(['apply', release, ...mirror(), ...kube(), '--name-prefix', 'os-c']);
    expect([quiet.code, quiet.stderr]).toEqual([0, '']);
  });

  it('5.0: no warning (its MCO rebases from the node whenever the image is there), and --os-image-via-mco is refused as needless', async () => {
    const quiet = await runCli(['apply', truth.release.pullSpec, ...mirror(), ...kube(), '--name-prefix', 'os-d', '--dry-run=server']);
    expect([quiet.code, quiet.stderr]).toEqual([0, '']);
    const refused = await runCli(['apply', truth.release.pullSpec, ...mirror(), ...kube(), '--name-prefix', 'os-e', '--os-image-via-mco']);
    expect(refused.code).toBe(4);
    expect(refused.stderr).toBe(`prestage: error: --os-image-via-mco: MCO ${truth.release.version} rebases from the node's storage whenever the OS image is there; no MCO set is needed (leave the flag out)\n`);
  });
});
