/**
 * A path of three hops staged on the test bed's real nodes (CRI-O per node, prestage's agents)
 * ahead of the first window: `stage --to` finds the path through ClusterVersion spec.upstream
 * (OpenShift's own CRD on the real API server), every hop's sets land at once, each node stores
 * every layer the hops share once, `ready` answers per hop, and `prune` after a hop keeps every
 * set a later hop still needs.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pushFixture } from '../fixtures/push.js';
import { buildReleasePath, PATH_VERSIONS, type ReleasePathFixture } from '../fixtures/release-path.js';
import { buildUpdateGraph } from '../fixtures/update-graph.js';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import { KubeClient, type KubeList, type KubeObject } from '../src/kube/client.js';
import type { PathPlan } from '../src/plan/path-plan.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import type { Daemon } from './cluster/processes.js';
import { startRegistry, startUpdateService, type RegistryHandle, type UpdateServiceHandle } from './harness/index.js';
import { installOpenShiftCrds, OPENSHIFT_4_21 } from './mco/crds.js';
import { startNodeAgent, storedLayerBytes } from './support/agent-bed.js';
import { runCli, startCli } from './support/cli.js';

const NAMESPACE = 'prestage';
const CLUSTER_VERSION = '/apis/config.openshift.io/v1/clusterversions';
const HOPS = PATH_VERSIONS.slice(1);
let dir: string;
let fixture: ReleasePathFixture;
let registry: RegistryHandle;
let service: UpdateServiceHandle;
let cluster: TestCluster;
let client: KubeClient;
let flags: string[];
const agents: Daemon[] = [];

const byDigest = (version: string) => `quay.io/openshift-release-dev/ocp-release@${fixture.truth.releases.find((r) => r.version === version)!.digest}`;
const merge = { contentType: 'application/merge-patch+json' };

/** ClusterVersion as the CVO leaves it once the update to `version` is Completed. */
async function clusterRuns(version: string): Promise<void> {
  await client.request('PATCH', `${CLUSTER_VERSION}/version/status`, {
    ...merge,
    body: { status: { desired: { version, image: byDigest(version) }, history: [{ state: 'Completed', version, image: byDigest(version), startedTime: '2026-11-01T00:00:00Z', completionTime: '2026-11-01T01:00:00Z', verified: true }], availableUpdates: [], observedGeneration: 1, versionHash: 'abc', capabilities: {}, conditions: [] } },
  });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-stage-path-'));
  fixture = buildReleasePath();
  registry = await startRegistry({ storageDir: join(dir, 'registry') });
  await pushFixture(registry.url, fixture);
  service = await startUpdateService({ graphs: (channel) => (channel === 'eus-4.18' ? buildUpdateGraph(fixture, channel) : undefined) });
  flags = ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
  cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': registry.host }, insecureRegistries: [registry.host] });
  client = new KubeClient(cluster.kubeConfig);
  flags.push('--kubeconfig', cluster.kubeconfigPath);
  await installOpenShiftCrds(client, OPENSHIFT_4_21, 'config');
  await client.request('POST', CLUSTER_VERSION, { body: { apiVersion: 'config.openshift.io/v1', kind: 'ClusterVersion', metadata: { name: 'version' }, spec: { clusterID: '6c6e2a3c-8f0e-4b38-9c3a-0d8f2d1b7a11', channel: 'eus-4.18', upstream: `${service.url}/api/upgrades_info/v1/graph` } } });
  await clusterRuns('4.16.3');
  const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--apply', '--kubeconfig', cluster.kubeconfigPath]);
  expect(installed.stderr).toBe('');
  for (const node of cluster.nodes) agents.push(await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, args: ['--concurrency', '4', '--control-plane-concurrency', '4'] }));
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
  await cluster?.stop();
  await service?.close();
  await registry?.stop();
  if (dir && !process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
});

const setNames = async () => (await client.get<KubeList<KubeObject>>(AGENT_PATHS.pinnedImageSets)).items.map((s) => s.metadata.name).sort();

describe('stage --to over a path of three hops', () => {
  let path: PathPlan;

  it('plans the path from the version the cluster runs and stages every hop before the first window', async () => {
    const planned = await runCli(['plan', '--to', '4.18.2', ...flags, '--no-cluster', '-o', 'json']);
    expect(planned.code, planned.stderr).toBe(0);
    path = JSON.parse(planned.stdout) as PathPlan;
    // Watched as kubectl get -w watches: piped, the table once, then each row that changes.
    const watching = startCli(['status', '-w', '--release', '4.16.8', '--kubeconfig', cluster.kubeconfigPath]);
    const r = await runCli(['stage', '--to', '4.18.2', ...flags, '--no-cluster', '--timeout', '15m']);
    console.log(`$ prestage stage --to 4.18.2  (exit ${r.code})\n${r.stdout}${r.stderr}`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Upgrade path 4.16.3 -> 4.16.8 -> 4.17.5 -> 4.18.2: 3 hops');
    expect(await setNames()).toEqual(HOPS.flatMap((v) => [`prestage-${v}-control-plane`, `prestage-${v}-worker`]).sort());
    const watched = await watching.done;
    console.log(`$ prestage status -w --release 4.16.8  (exit ${watched.code})\n${watched.stdout}${watched.stderr}`);
    expect(watched.code, watched.stderr).toBe(0);
    const lines = watched.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NODE +SET +GENERATION/);
    // Every node's row of the hop's sets changed to done, each said once it did.
    for (const node of cluster.nodes) expect(lines.some((line) => new RegExp(`^${node.name} +prestage-4\\.16\\.8-${node.role} +1/1/1 +done `).test(line)), node.name).toBe(true);
    expect(lines.at(-1)).toBe('READY 4.16.8: 2 sets current on all 3 nodes they target');
  }, 20 * 60_000);

  it('each node stores a layer the hops share once: what it holds is the union, not the hops summed', () => {
    for (const node of cluster.nodes) {
      const union = path.union.perNode.find((t) => t.role === node.role)!;
      const stored = storedLayerBytes(node.crio);
      const summed = path.hops.reduce((sum, hop) => sum + hop.plan.sets.filter((s) => s.role === node.role).reduce((a, s) => a + s.diskBytes, 0), 0);
      console.log(`${node.name} (${node.role}): stored ${stored} B, union ${union.diskBytes} B, hops summed ${summed} B`);
      // The pause image and nothing else is on a node before staging.
      expect(Math.abs(stored - union.diskBytes) / union.diskBytes).toBeLessThan(0.02);
      expect(stored).toBeLessThan(summed * 0.6);
    }
  });

  it('ready answers for each hop, one line each', async () => {
    const r = await runCli(['ready', ...HOPS, '--kubeconfig', cluster.kubeconfigPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual(HOPS.map((v) => `READY ${v}: 2 sets current on all 3 nodes they target`));
  });

  it('prune after a hop keeps every set a later hop still needs', async () => {
    await clusterRuns('4.16.8');
    const first = await runCli(['prune', '--kubeconfig', cluster.kubeconfigPath, '-o', 'json']);
    expect(first.code, first.stderr).toBe(0);
    expect((JSON.parse(first.stdout) as { prune: unknown[] }).prune).toEqual([]);
    await clusterRuns('4.17.5');
    const second = await runCli(['prune', '--kubeconfig', cluster.kubeconfigPath, '-o', 'json']);
    expect(second.code, second.stderr).toBe(0);
    expect((JSON.parse(second.stdout) as { prune: Array<{ name: string }> }).prune.map((s) => s.name).sort()).toEqual(['prestage-4.16.8-control-plane', 'prestage-4.16.8-worker']);
    expect(await setNames()).toEqual(['4.17.5', '4.18.2'].flatMap((v) => [`prestage-${v}-control-plane`, `prestage-${v}-worker`]).sort());
  });
});
