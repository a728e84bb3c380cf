/**
 * The upgrade lifecycle end to end, as an admin runs it, with the REAL agents and CRI-O: a
 * simulated OpenShift cluster on the test bed (OpenShift's ClusterVersion CRD, the fixture's
 * 4.16.2 running, 4.16.3 offered in status.availableUpdates) whose nodes each run a real CRI-O
 * mirroring quay.io to a docker-registry with both fixture releases, and one `prestage agent`
 * per node. The 4.16.2 sets are staged first (as the previous upgrade left them); then
 * `stage --to 4.16.3`, `ready`/`status --release` per release, the upgrade completes in
 * ClusterVersion history, and `prune` deletes the 4.16.2 sets: the agents unpin the images
 * only those sets held (CRI-O reports pinned: false) and keep the ones 4.16.3 shares.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { simulatedCluster } from '../fixtures/live-cluster.js';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import { KubeClient, type KubeObject } from '../src/kube/client.js';
import type { Plan } from '../src/plan/types.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { waitFor, type Daemon } from './cluster/processes.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { installOpenShiftCrds, OPENSHIFT_4_21 } from './mco/crds.js';
import { pinState, startNodeAgent, storedLayerBytes } from './support/agent-bed.js';
import { runCli } from './support/cli.js';
import { loadSimulatedCluster } from './support/simulated-cluster.js';
import { formatBytes } from '../src/units.js';

const NAMESPACE = 'prestage';
const CLUSTER_VERSION = '/apis/config.openshift.io/v1/clusterversions/version';
const truth = inject('fixtureTruth');
const OLD = truth.current.version;
const NEW = truth.release.version;
let dir: string;
let registry: RegistryHandle;
let cluster: TestCluster;
let client: KubeClient;
let kube: string[];
let registryFlags: string[];
const agents: Daemon[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-lifecycle-'));
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  registryFlags = ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
  cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': registry.host }, insecureRegistries: [registry.host] });
  client = new KubeClient(cluster.kubeConfig);
  kube = ['--kubeconfig', cluster.kubeconfigPath];
  await installOpenShiftCrds(client, OPENSHIFT_4_21, 'config');
  await loadSimulatedCluster(client, simulatedCluster(truth, cluster.nodes.map((n) => ({ name: n.name, role: n.role }))));
  const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--apply', ...kube]);
  expect(installed.stderr).toBe('');
  for (const node of cluster.nodes) agents.push(await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, args: ['--concurrency', '4', '--control-plane-concurrency', '4'] }));
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
  await cluster?.stop();
  await registry?.stop();
  if (dir && !process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
});

const imagesOf = async (set: string) => (await client.get<KubeObject & { spec: { pinnedImages: Array<{ name: string }> } }>(`${AGENT_PATHS.pinnedImageSets}/${set}`)).spec.pinnedImages.map((i) => i.name);
const node = (name: string) => cluster.nodes.find((n) => n.name === name)!;

/** The NEW ON DISK column of plan's "New bytes per node" table, by node (rows of up to 3 names). */
function newBytesTable(stdout: string): Map<string, string> {
  const section = stdout.split('\nNew bytes per node ')[1]?.split('\n\n')[0] ?? '';
  const rows = section.split('\n').slice(2);
  return new Map(rows.flatMap((row) => {
    const match = /^(.+?) {2,}(control-plane|worker) +\S+ \S+ +(\S+ \S+) /.exec(row);
    return match ? match[1]!.split(', ').map((node) => [node, match[3]!] as const) : [];
  }));
}

/** stdout and stderr of a run, for the record (the docs show these). */
function show(what: string, result: { stdout: string; stderr: string; code: number }): void {
  console.log(`$ ${what}  (exit ${result.code})\n${result.stdout}${result.stderr}`);
}

describe('the upgrade lifecycle: stage --to, ready, prune', () => {
  it('--to resolves only updates the cluster offers: not offered is exit 2 listing them; a conditional one needs --allow-not-recommended and prints its risks', async () => {
    const notOffered = await runCli(['plan', '--to', '4.16.9', ...registryFlags, ...kube]);
    expect([notOffered.code, notOffered.stdout]).toEqual([2, '']);
    expect(notOffered.stderr).toBe(`prestage: error: --to 4.16.9: not an update this cluster offers; it offers ${NEW} in channel stable-4.16 (ClusterVersion status.availableUpdates, status.conditionalUpdates); name one of them, or the release pullspec instead of --to; for a path of several hops name the update graph with --graph (Red Hat's: https://api.openshift.com/api/upgrades_info/v1/graph), as ClusterVersion spec.upstream is empty\n`);
    const both = await runCli(['plan', truth.release.pullSpec, '--to', NEW, ...kube]);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/exactly one of them/);

    // As the CVO lists a conditional update: only in conditionalUpdates, Recommended False.
    const conditional = {
      release: { version: '4.16.4', image: `${truth.sourceRegistry}/${truth.releaseRepository}@${truth.release.image.digest}` },
      risks: [{ name: 'NodeDiskPressure', message: 'Nodes may report\ndisk pressure.', url: 'https://issues.example.com/OCPBUGS-4', matchingRules: [{ type: 'Always' }] }],
      conditions: [{ type: 'Recommended', status: 'False', reason: 'NodeDiskPressure', message: 'Nodes may report disk pressure.', lastTransitionTime: '2024-07-02T10:00:00Z' }],
    };
    await client.request('PATCH', `${CLUSTER_VERSION}/status`, { body: { status: { conditionalUpdates: [conditional] } }, contentType: 'application/merge-patch+json' });
    const refused = await runCli(['plan', '--to', '4.16.4', ...registryFlags, ...kube]);
    show('prestage plan --to 4.16.4', refused);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe('prestage: error: --to 4.16.4: a conditional update, not recommended for this cluster (NodeDiskPressure); risks: NodeDiskPressure: Nodes may report disk pressure. (https://issues.example.com/OCPBUGS-4); pass --allow-not-recommended to accept them\n');
    const accepted = await runCli(['plan', '--to', '4.16.4', '--allow-not-recommended', '-o', 'json', ...registryFlags, ...kube]);
    expect(accepted.code).toBe(0);
    expect(accepted.stderr).toBe('prestage: warning: 4.16.4 is not recommended: NodeDiskPressure: Nodes may report disk pressure. (https://issues.example.com/OCPBUGS-4)\n');
    expect((JSON.parse(accepted.stdout) as Plan).release.pullSpec).toBe(conditional.release.image);
    await client.request('PATCH', `${CLUSTER_VERSION}/status`, { body: { status: { conditionalUpdates: [] } }, contentType: 'application/merge-patch+json' });
  }, 5 * 60_000);

  it(`stages ${OLD} then --to ${NEW}, answers per release, and after the upgrade completes prune deletes the ${OLD} sets and the agents unpin their images`, async () => {
    // What the previous upgrade left: the running release's sets.
    const old = await runCli(['stage', truth.current.pullSpec, '--no-cluster', ...registryFlags, '--timeout', '15m', ...kube]);
    // The agent backend on OpenShift 4.16: its MCO rebases nodes from the registry whatever is staged.
    const osImagePulledAnyway = (version: string) => new RegExp(`^prestage: warning: MCO ${version.replace(/\./g, '\\.')} pulls the node OS image \\([\\d.]+ \\w+\\) from the registry at the upgrade whatever is on the node: staging it saves no download on 4\\.16\\n$`);
    expect(old.stderr).toMatch(osImagePulledAnyway(OLD));
    expect(old.code).toBe(0);

    const stored = new Map(cluster.nodes.map((n) => [n.name, storedLayerBytes(n.crio)]));
    const staged = await runCli(['stage', '--to', NEW, '--prune', ...registryFlags, '--timeout', '15m', ...kube]);
    show(`prestage stage --to ${NEW} --prune`, staged);
    expect(staged.stderr).toMatch(osImagePulledAnyway(NEW));
    expect(staged.code).toBe(0);
    // Before it applied anything, stage said what each node still stores, against what it runs
    // and what the ${OLD} sets pin there: what each node's containers/storage then really added.
    const newBytes = newBytesTable(staged.stdout);
    expect([...newBytes.keys()].sort()).toEqual(cluster.nodes.map((n) => n.name).sort());
    for (const n of cluster.nodes) {
      const added = storedLayerBytes(n.crio) - stored.get(n.name)!;
      expect(newBytes.get(n.name), `${n.name}: NEW ON DISK printed vs what its storage added`).toBe(formatBytes(added));
      expect(added).toBeLessThan(storedLayerBytes(n.crio) / 2);
    }
    expect(staged.stdout).toMatch(new RegExp(`^Release ${NEW.replace(/\./g, '\\.')} \\(amd64\\) {2}${truth.sourceRegistry}/${truth.releaseRepository}@${truth.release.image.digest}$`, 'm'));
    expect(staged.stdout).toMatch(new RegExp(`^prestage-${NEW}-worker: 2/2 nodes done\\b.* ready$`, 'm'));
    // --prune after the stage: the cluster still runs ${OLD}, so nothing is older than it.
    expect(staged.stdout).toMatch(new RegExp(`\\nnothing to prune: the cluster runs ${OLD}; no prestage set is of an older release \\(kept: ${OLD}, ${NEW}\\)\\n$`));

    for (const version of [OLD, NEW]) {
      const ready = await runCli(['ready', version, ...kube]);
      show(`prestage ready ${version}`, ready);
      expect([ready.code, ready.stdout]).toEqual([0, `READY ${version}: 2 sets current on all 3 nodes they target\n`]);
    }
    const status = await runCli(['status', '--release', NEW, ...kube]);
    show(`prestage status --release ${NEW}`, status);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(new RegExp(`^worker-1 +prestage-${NEW}-worker +1/1/1 +done `, 'm'));
    expect(status.stdout).not.toContain(`prestage-${OLD}`);

    // Before pruning: what only the old sets hold, and what the new ones share with them.
    const oldWorker = await imagesOf(`prestage-${OLD}-worker`);
    const newWorker = new Set(await imagesOf(`prestage-${NEW}-worker`));
    const onlyOld = oldWorker.filter((image) => !newWorker.has(image));
    const shared = oldWorker.filter((image) => newWorker.has(image));
    expect(onlyOld.length).toBeGreaterThan(0);
    expect(shared.length).toBeGreaterThan(0);

    // Not yet: the cluster still runs the old release.
    expect((await runCli(['prune', '--dry-run', ...kube])).stdout).toBe(`nothing to prune: the cluster runs ${OLD}; no prestage set is of an older release (kept: ${OLD}, ${NEW})\n`);
    // The CVO finishes the upgrade: a new Completed entry on top of the history.
    const history = (await client.get<KubeObject & { status: { history: unknown[] } }>(CLUSTER_VERSION)).status.history;
    const image = `${truth.sourceRegistry}/${truth.releaseRepository}@${truth.release.image.digest}`;
    await client.request('PATCH', `${CLUSTER_VERSION}/status`, {
      body: { status: { desired: { version: NEW, image }, history: [{ state: 'Completed', version: NEW, image, startedTime: '2024-07-02T09:00:00Z', completionTime: '2024-07-02T10:00:00Z', verified: true }, ...history] } },
      contentType: 'application/merge-patch+json',
    });

    const dry = await runCli(['prune', '--dry-run', ...kube]);
    show('prestage prune --dry-run', dry);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(new RegExp(`^The cluster runs ${NEW} \\(Completed\\); would delete 2 sets of older releases, keeping 2 \\(${NEW}\\)\\n`));
    expect(dry.stdout).toMatch(new RegExp(`^prestage-${OLD}-worker +${OLD} +\\S+ \\S+ +worker-0, worker-1$`, 'm'));
    expect(dry.stdout).toMatch(/^worker-1 +\S+ \S+$/m);
    expect(await client.find(`${AGENT_PATHS.pinnedImageSets}/prestage-${OLD}-worker`)).toBeDefined();

    // A set a GitOps controller applied comes back when deleted by hand: prune refuses, unless --force.
    await client.request('PATCH', `${AGENT_PATHS.pinnedImageSets}/prestage-${OLD}-worker`, {
      body: { metadata: { labels: { 'kustomize.toolkit.fluxcd.io/name': 'prestage-sets', 'kustomize.toolkit.fluxcd.io/namespace': 'flux-system' } } },
      contentType: 'application/merge-patch+json',
    });
    const refused = await runCli(['prune', ...kube]);
    show('prestage prune', refused);
    expect(refused).toMatchObject({ code: 2, stdout: '' });
    expect(refused.stderr).toBe(`prestage: error: prune would fight Flux Kustomization flux-system/prestage-sets, which manages set prestage-${OLD}-worker: remove the set from the repository (with prune: true, Flux deletes it) (or pass --force to delete it anyway)\n`);
    expect(await client.find(`${AGENT_PATHS.pinnedImageSets}/prestage-${OLD}-worker`)).toBeDefined();

    const pruned = await runCli(['prune', '--force', ...kube]);
    show('prestage prune --force', pruned);
    expect(pruned.code).toBe(0);
    expect(pruned.stdout).toMatch(new RegExp(`\\npinnedimageset/prestage-${OLD}-control-plane deleted\\npinnedimageset/prestage-${OLD}-worker deleted\\n$`));
    const sets = (await client.get<{ items: KubeObject[] }>(AGENT_PATHS.pinnedImageSets)).items.map((s) => s.metadata.name).sort();
    expect(sets).toEqual([`prestage-${NEW}-control-plane`, `prestage-${NEW}-worker`]);

    // The agents unpin what only the deleted sets held (still stored, now GC-able); shared images stay pinned.
    for (const name of ['worker-0', 'worker-1']) {
      const pins = await waitFor(`${name} to unpin the ${OLD}-only images`, async () => {
        const state = await pinState(node(name), onlyOld);
        return Object.values(state).every((pinned) => pinned === false) ? state : undefined;
      }, 120_000, 500);
      expect(Object.keys(pins)).toHaveLength(onlyOld.length);
      expect(Object.values(await pinState(node(name), shared)).every((pinned) => pinned === true)).toBe(true);
    }
    expect((await runCli(['ready', NEW, ...kube])).code).toBe(0);
  }, 40 * 60_000);
});
