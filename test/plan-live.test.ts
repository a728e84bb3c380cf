/**
 * `prestage plan --kubeconfig` against a running cluster: the test bed's real kube-apiserver with
 * OpenShift's own ClusterVersion and Infrastructure CRDs, a cluster on the fixture's 4.16.2
 * (Pods bound to nodes, their statuses written as a kubelet would), planning the upgrade to
 * 4.16.3 over the real registry. Expectations come from the fixture's truth columns.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { liveTruth, simulatedCluster, LIVE_DISABLED_CAPABILITIES, type SimulatedCluster } from '../fixtures/live-cluster.js';
import pLimit from 'p-limit';
import { KubeClient } from '../src/kube/client.js';
import { CriClient } from '../src/cri/client.js';
import { MCO_PATHS } from '../src/cluster/mco/backend.js';
import type { Plan } from '../src/plan/types.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { installOpenShiftCrds, OPENSHIFT_4_21 } from './mco/crds.js';
import { testPlan, writePlan } from './mco/plans.js';
import { McoSimulator } from './mco/simulator.js';
import { runBin, runCli } from './support/cli.js';
import { storedLayerBytes } from './support/agent-bed.js';
import { loadSimulatedCluster } from './support/simulated-cluster.js';
import { formatBytes } from '../src/units.js';

const truth = inject('fixtureTruth');
const RELEASE = `quay.io/openshift-release-dev/ocp-release:${truth.release.tag}`;
const CONFIG = '/apis/config.openshift.io/v1';
let registry: RegistryHandle;
let cluster: TestCluster;
let client: KubeClient;
let simulated: SimulatedCluster;
let simulator: McoSimulator;
let dir: string;
let registryFlags: string[];
const kube = () => ['--kubeconfig', cluster.kubeconfigPath];
const merge = { contentType: 'application/merge-patch+json' };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'prestage-plan-live-'));
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  registryFlags = ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
  // Each node's CRI-O pulls quay.io names from the registry: the new-bytes test fills its storage.
  cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': registry.host }, insecureRegistries: [registry.host] });
  client = new KubeClient(cluster.kubeConfig);
  await installOpenShiftCrds(client, OPENSHIFT_4_21, 'all');
  // The pools stage's disk check targets.
  simulator = await McoSimulator.start(client, { pullMs: 200 });
  simulated = simulatedCluster(truth, cluster.nodes.map((n) => ({ name: n.name, role: n.role })));
  await loadSimulatedCluster(client, simulated);
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  simulator?.stop();
  await cluster?.stop();
  await registry?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const setOf = (plan: Plan, role: 'worker' | 'control-plane') => plan.sets.filter((s) => s.role === role).flatMap((s) => s.images).sort();
const component = (name: string) => truth.components.find((c) => c.name === name)!;
const imageOf = (plan: Plan, name: string) => plan.images.find((i) => i.digest === component(name).digest);
const skippedOf = (plan: Plan, name: string) => plan.skipped.find((i) => i.digest === component(name).digest);

async function planJson(args: string[]): Promise<Plan> {
  const r = await runCli(['plan', RELEASE, ...registryFlags, '-o', 'json', ...args]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as Plan;
}

describe('plan of the upgrade of a running cluster', () => {
  let plan: Plan;
  beforeAll(async () => {
    plan = await planJson(kube());
  });

  it('pins per role exactly the 4.16.3 digests of what runs there, plus new components, the pause and OS images', () => {
    const want = liveTruth(truth, simulated);
    expect(setOf(plan, 'worker')).toEqual(want.worker);
    expect(setOf(plan, 'control-plane')).toEqual(want.controlPlane);
    // The rebuilt components run under their 4.16.2 digests: none of those is pinned.
    const old = truth.current.components.filter((c) => truth.current.rebuiltInTarget.includes(c.name)).map((c) => c.pullSpec);
    expect(old).toHaveLength(truth.current.rebuiltInTarget.length);
    for (const image of old) expect([...setOf(plan, 'worker'), ...setOf(plan, 'control-plane')]).not.toContain(image);
  });

  it('takes the platform, capabilities and current release from the cluster and says what it saw', () => {
    expect(plan.cluster.platform).toBe('AWS');
    expect(plan.cluster.capabilities).not.toContain(LIVE_DISABLED_CAPABILITIES[0]);
    expect(plan.cluster.capabilities).toContain('Console');
    expect(plan.cluster.observed).toEqual({
      server: cluster.apiServerUrl,
      release: `quay.io/openshift-release-dev/ocp-release@${truth.current.digest}`,
      version: truth.current.version,
      nodes: { 'control-plane': 1, worker: 2 },
      pods: simulated.pods.length - 1,
      releasePods: simulated.pods.length - 3,
    });
  });

  it('gives each decision the evidence it rests on', () => {
    expect(imageOf(plan, 'coredns')).toMatchObject({ role: 'all', evidence: ['running: 3 pods on 1/1 control-plane nodes and 2/2 workers, openshift-dns-operator/dns-default'] });
    expect(imageOf(plan, 'cli-artifacts')).toMatchObject({ role: 'worker', evidence: ['running: 2 pods on 2/2 workers, openshift-console-operator/downloads'] });
    expect(imageOf(plan, 'etcd')!.role).toBe('control-plane');
    expect(imageOf(plan, 'cluster-config-api')).toMatchObject({ role: 'control-plane', evidence: ['running: 1 pod on 1/1 control-plane nodes, openshift-config-operator/cluster-config-api'] });
    expect(imageOf(plan, 'multus-networkpolicy')!.role).toBe('all');
    expect(imageOf(plan, 'multus-networkpolicy')!.evidence[0]).toMatch(/^new in 4\.16\.3: env MULTUS_NETWORKPOLICY_IMAGE of Deployment openshift-network-operator\/network-operator/);
    expect(imageOf(plan, 'console')!.role).toBe('control-plane');
    expect(imageOf(plan, 'console')!.evidence[0]).toMatch(/^not running now, but 4\.16\.3 runs it: container of Deployment openshift-console-operator\/console/);
    expect(imageOf(plan, 'pod')).toMatchObject({ role: 'all', evidence: ["CRI-O's pause image (MCO's infraImage): every pod on every node starts from it, though no pod spec names it"] });
    expect(imageOf(plan, 'rhel-coreos')!.role).toBe('all');
    expect(skippedOf(plan, 'sdn')!.why).toMatch(/^not running on any node of the cluster, and 4\.16\.3 only names it as an operand its operator runs nowhere now \(env SDN_IMAGE/);
    expect(skippedOf(plan, 'insights-operator')!.why).toMatch(/capability Insights not enabled/);
  });

  it("counts as new only the bytes a node's storage really adds: measured by containers/storage on the node's CRI-O", async () => {
    expect(plan.nodes!.flatMap((n) => n.nodes).sort()).toEqual(['master-0', 'worker-0', 'worker-1']);
    expect(plan.nodes![0]).toMatchObject({ role: 'control-plane', nodes: ['master-0'], sets: ['prestage-4.16.3-control-plane'] });
    for (const node of [cluster.nodes.find((n) => n.role === 'control-plane')!, cluster.nodes.find((n) => n.name === 'worker-0')!]) {
      const entry = plan.nodes!.find((n) => n.nodes.includes(node.name))!;
      const cri = await CriClient.connect(node.crio.socketPath);
      const pullAll = async (images: readonly string[]) => {
        const limit = pLimit(4);
        await Promise.all(images.map((image) => limit(() => cri.pullImage(image))));
      };
      try {
        // The node as the cluster shows it: the release images its Pods run (4.16.2 digests), stored.
        // (A user workload's image, docker.io here, shares no layer with a release: the plan does not read it.)
        const pods = simulated.pods.filter((p) => p.spec.nodeName === node.name);
        const running = [...new Set(pods.flatMap((p) => [...(p.spec.initContainers ?? []), ...p.spec.containers].map((c) => c.image)))];
        await pullAll(running.filter((image) => image.startsWith(`${truth.sourceRegistry}/`)));
        const before = storedLayerBytes(node.crio);
        await pullAll(plan.sets.filter((s) => s.role === node.role).flatMap((s) => s.images));
        const added = storedLayerBytes(node.crio) - before;
        expect(entry.newDiskBytes, `${node.name}: planned new bytes vs what its storage added`).toBe(added);
        // Most layers are shared with the running release: not counted again.
        expect(entry.heldDiskBytes).toBeGreaterThan(entry.diskBytes / 2);
        expect(entry.heldDiskBytes + entry.newDiskBytes).toBe(entry.diskBytes);
        expect(entry.newCompressedBytes).toBeLessThan(entry.newDiskBytes);
      } finally {
        cri.close();
      }
    }
  }, 10 * 60_000);

  it('shows the new bytes per node in the table, under the sets', async () => {
    const r = await runCli(['plan', RELEASE, ...registryFlags, ...kube()]);
    expect(r.code).toBe(0);
    const worker = plan.nodes!.find((n) => n.nodes.includes('worker-0'))!;
    console.log(`$ prestage plan ${RELEASE} --kubeconfig ...\n${r.stdout}`); // the README shows it
    expect(r.stdout).toContain('\nNew bytes per node (layers of the 4.16.2 images each node runs now are not new):\nNODES ');
    expect(r.stdout).toMatch(new RegExp(`^${worker.nodes.join(', ')} +worker +${formatBytes(worker.newCompressedBytes)} +${formatBytes(worker.newDiskBytes)} +${formatBytes(worker.heldDiskBytes)} +${formatBytes(worker.diskBytes)}$`, 'm'));
  });

  it('lets flags override what the cluster says', async () => {
    const withFlags = await planJson([...kube(), '--capability-set', 'vCurrent', '--all-nodes', 'etcd']);
    expect(withFlags.cluster.capabilities).toContain('Insights');
    expect(imageOf(withFlags, 'insights-operator')!.role).toBe('control-plane');
    expect(imageOf(withFlags, 'etcd')).toMatchObject({ role: 'all', evidence: ['forced to all nodes by --all-nodes'] });
  });

  it('prints what it saw above the sets', async () => {
    const r = await runCli(['plan', RELEASE, ...registryFlags, ...kube()]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Live cluster: ${cluster.apiServerUrl} runs 4.16.2 on 1 control-plane nodes and 2 workers; ${simulated.pods.length - 1} pods, ${simulated.pods.length - 3} of them on release images\n`);
    expect(r.stdout).toMatch(/^Images: \d+ \(\d+ control-plane only, \d+ all nodes, \d+ workers only\); \d+ skipped/m);
  });

  it('plans from the release alone with --no-cluster', async () => {
    const offline = await planJson([...kube(), '--no-cluster']);
    expect(offline.cluster.observed).toBeUndefined();
    expect(offline.cluster.platform).toBeNull();
    expect(imageOf(offline, 'sdn')!.role).toBe('all');
  });

  it('names the RBAC it needs in plan --help, and when a token lacks it (exit 4, one line)', async () => {
    const help = await runBin('prestage', ['plan', '--help']);
    expect(help.stdout.replace(/\s+/g, ' ')).toContain('RBAC needed: get, list on nodes and pods (all namespaces); get on clusterversions, featuregates and infrastructures (config.openshift.io); get on osimagestreams, list on machineconfigpools (machineconfiguration.openshift.io); and list on subscriptions, catalogsources and clusterserviceversions (operators.coreos.com, all namespaces) and on clusterextensions and clustercatalogs (olm.operatorframework.io) for the operators it runs.');
    const token = await cluster.serviceAccountToken('default', 'nobody');
    const file = join(dir, 'nobody.kubeconfig');
    writeFileSync(file, cluster.kubeConfigForToken(token).exportConfig());
    const r = await runCli(['plan', RELEASE, ...registryFlags, '--kubeconfig', file]);
    expect(r).toEqual({
      code: 4,
      stdout: '',
      stderr: `prestage: error: ${cluster.apiServerUrl} refused to get clusterversions/version (HTTP 403): planning from the live cluster needs get, list on nodes and pods (all namespaces); get on clusterversions, featuregates and infrastructures (config.openshift.io); get on osimagestreams, list on machineconfigpools (machineconfiguration.openshift.io); or plan with --no-cluster\n`,
    });

    // Exactly that RBAC is enough.
    await client.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      body: {
        metadata: { name: 'prestage-plan' },
        rules: [
          { apiGroups: [''], resources: ['nodes', 'pods'], verbs: ['get', 'list'] },
          { apiGroups: ['config.openshift.io'], resources: ['clusterversions', 'featuregates', 'infrastructures'], verbs: ['get'] },
          { apiGroups: ['machineconfiguration.openshift.io'], resources: ['osimagestreams'], verbs: ['get'] },
          { apiGroups: ['machineconfiguration.openshift.io'], resources: ['machineconfigpools'], verbs: ['list'] },
        ],
      },
    });
    await client.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      body: { metadata: { name: 'prestage-plan' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'prestage-plan' }, subjects: [{ kind: 'ServiceAccount', namespace: 'default', name: 'nobody' }] },
    });
    let allowed = await runCli(['plan', RELEASE, ...registryFlags, '--kubeconfig', file, '-o', 'json']);
    // RBAC changes reach the authorizer's cache within a moment.
    for (const deadline = Date.now() + 10_000; allowed.code === 4 && Date.now() < deadline; await new Promise((r) => setTimeout(r, 200))) {
      allowed = await runCli(['plan', RELEASE, ...registryFlags, '--kubeconfig', file, '-o', 'json']);
    }
    expect(allowed.stderr).toBe('');
    expect((JSON.parse(allowed.stdout) as Plan).cluster.observed?.pods).toBe(simulated.pods.length - 1);
  });

  it("stage plans from the cluster by default: its table shows what it saw before the disk check", async () => {
    await client.request('PATCH', '/api/v1/nodes/worker-0/status', { body: { status: { allocatable: { 'ephemeral-storage': '1Mi' } } }, ...merge });
    try {
      const r = await runCli(['stage', RELEASE, ...registryFlags, ...kube()]);
      expect(r.code).toBe(4);
      expect(r.stdout).toContain(`Live cluster: ${cluster.apiServerUrl} runs 4.16.2`);
      // What worker-0 must still store: its new bytes, not the whole set.
      const worker = plan.nodes!.find((n) => n.nodes.includes('worker-0'))!;
      expect(worker.newDiskBytes).toBeLessThan(worker.diskBytes);
      expect(r.stderr).toBe(`prestage: error: not enough ephemeral storage for the sets on 1 node(s): worker-0 (1.0 MiB allocatable < ${formatBytes(worker.newDiskBytes)} needed)\n`);
    } finally {
      await client.request('PATCH', '/api/v1/nodes/worker-0/status', { body: { status: { allocatable: { 'ephemeral-storage': String(120 * 2 ** 30) } } }, ...merge });
    }
  });
});

describe('stage without the RBAC to read the cluster', () => {
  it('warns in one line and plans from the release alone', async () => {
    await client.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      body: { metadata: { name: 'stager' }, rules: [{ apiGroups: ['', 'machineconfiguration.openshift.io'], resources: ['*'], verbs: ['*'] }] },
    });
    await client.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      body: { metadata: { name: 'stager' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'stager' }, subjects: [{ kind: 'ServiceAccount', namespace: 'default', name: 'stager' }] },
    });
    const file = join(dir, 'stager.kubeconfig');
    writeFileSync(file, cluster.kubeConfigForToken(await cluster.serviceAccountToken('default', 'stager')).exportConfig());
    await client.request('PATCH', '/api/v1/nodes/worker-0/status', { body: { status: { allocatable: { 'ephemeral-storage': '1Mi' } } }, ...merge });
    try {
      let r = await runCli(['stage', RELEASE, ...registryFlags, '--kubeconfig', file]);
      for (const deadline = Date.now() + 10_000; !r.stderr.includes('warning') && Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 200))) {
        r = await runCli(['stage', RELEASE, ...registryFlags, '--kubeconfig', file]);
      }
      const [warning, error, ...rest] = r.stderr.split('\n');
      expect(warning).toBe(`prestage: warning: ${cluster.apiServerUrl} refused to get clusterversions/version (HTTP 403), so the plan comes from the release alone; planning from the live cluster needs get, list on nodes and pods (all namespaces); get on clusterversions, featuregates and infrastructures (config.openshift.io); get on osimagestreams, list on machineconfigpools (machineconfiguration.openshift.io) (--no-cluster skips it)`);
      expect(error).toMatch(/^prestage: error: not enough ephemeral storage for the sets on 1 node\(s\): worker-0 /);
      expect(rest).toEqual(['']);
      expect(r.stdout).toMatch(/^Release 4\.16\.3 /);
      expect(r.stdout).not.toContain('Live cluster:');
    } finally {
      await client.request('PATCH', '/api/v1/nodes/worker-0/status', { body: { status: { allocatable: { 'ephemeral-storage': String(120 * 2 ** 30) } } }, ...merge });
    }
  });
});

describe('names MCO accepts, at apply', () => {
  it('refuses to apply an MCO set with a localhost name (exit 2, one line) and creates nothing', async () => {
    const plan = testPlan('local');
    const local = { ...plan, sets: plan.sets.map((s) => ({ ...s, images: s.images.map((i) => i.replace('quay.io/', 'localhost:5000/')) })) };
    const r = await runCli(['apply', writePlan(dir, local), ...kube()]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^prestage: error: MCO's PinnedImageSet would reject localhost:5000\/openshift-release-dev\/ocp-v4\.0-art-dev@sha256:[a-f0-9]{64}: its registry host localhost:5000 is not a dotted name or IP address; plan the release by its source name \(quay\.io\/\.\.\.\) with --mirror SOURCE=MIRROR, which keeps the source names, or use --api prestage \(the prestage agent\)\n$/);
    expect(await client.find(`${MCO_PATHS.pinnedImageSets}/local-control-plane`)).toBeUndefined();
  });
});

describe('a cluster that is not OpenShift', () => {
  it('plan --kubeconfig says so (exit 4); stage plans from the release alone', async () => {
    await client.request('DELETE', `${CONFIG}/clusterversions/version`);
    const r = await runCli(['plan', RELEASE, ...registryFlags, ...kube()]);
    expect(r).toEqual({ code: 4, stdout: '', stderr: `prestage: error: ${cluster.apiServerUrl} has no ClusterVersion (not an OpenShift cluster): nothing to plan the upgrade of; plan with --no-cluster\n` });
    await client.request('PATCH', '/api/v1/nodes/worker-0/status', { body: { status: { allocatable: { 'ephemeral-storage': '1Mi' } } }, ...merge });
    const staged = await runCli(['stage', RELEASE, ...registryFlags, ...kube()]);
    expect(staged.code).toBe(4);
    expect(staged.stdout).toMatch(/^Release 4\.16\.3 /);
    expect(staged.stdout).not.toContain('Live cluster:');
  });
});
