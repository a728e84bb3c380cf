/**
 * The pinning backend contract, one suite run against each backend on a real kube-apiserver:
 * the MCO backend with OpenShift's own CRDs of 4.21 (v1) and of 4.16 (v1alpha1) and MCO's
 * daemon played by the simulator (test/mco/simulator.ts, FACTS §3), and the agent backend with
 * the prestage CRDs and a status writer playing the node agents. apply, wait and status run
 * through the CLI in-process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import { KubeClient, type KubeObject } from '../src/kube/client.js';
import { MCO_PATHS, mcoPaths } from '../src/cluster/mco/backend.js';
import { renderYaml, setObjectFor, writeGitOpsDir } from '../src/render/pinned-image-sets.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { AgentStatusWriter, installAgentCrds } from './mco/agent-status-writer.js';
import { installMcoCrds, installOpenShiftCrds, OPENSHIFT_4_16, OPENSHIFT_4_21 } from './mco/crds.js';
import { testPlan, writePlan } from './mco/plans.js';
import { McoSimulator, type NodeBehaviour } from './mco/simulator.js';
import { runCli } from './support/cli.js';

interface NodePlayer {
  behave(node: string, behaviour: NodeBehaviour): void;
  stop(): void;
  readonly errors: Error[];
}

/** One API server: 4.21's MCO CRDs beside prestage's (detection picks MCO), or 4.16's alone. */
interface Bed {
  cluster: TestCluster;
  client: KubeClient;
  players: Partial<Record<'mco' | 'agent', NodePlayer>>;
}

let dir: string;
const beds: Partial<Record<'current' | 'v1alpha1', Bed>> = {};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'prestage-wait-'));
  const current = await startCluster({ workers: 2 });
  const currentClient = new KubeClient(current.kubeConfig);
  await Promise.all([installMcoCrds(currentClient), installAgentCrds(currentClient)]);
  beds.current = { cluster: current, client: currentClient, players: { mco: await McoSimulator.start(currentClient, { pullMs: 300 }), agent: await AgentStatusWriter.start(currentClient, { pullMs: 300 }) } };
  const alpha = await startCluster({ workers: 2 });
  const alphaClient = new KubeClient(alpha.kubeConfig);
  await installMcoCrds(alphaClient, OPENSHIFT_4_16);
  beds.v1alpha1 = { cluster: alpha, client: alphaClient, players: { mco: await McoSimulator.start(alphaClient, { pullMs: 300 }, { versions: { pinnedImageSets: 'v1alpha1', machineConfigNodes: 'v1alpha1' } }) } };
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  for (const bed of Object.values(beds)) {
    for (const player of Object.values(bed.players)) player.stop();
    await bed.cluster.stop();
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A status table as records, cut at the header's column starts. */
function parseTable(text: string): Array<Record<string, string>> {
  // The table ends at the first blank line (MCO's pool lines follow it).
  const [header, ...lines] = text.trimEnd().split('\n\n')[0]!.split('\n');
  const starts = [...header!.matchAll(/(?:^|(?<=\s{2}))\S/g)].map((m) => m.index);
  const names = starts.map((start, i) => header!.slice(start, starts[i + 1]).trim());
  return lines.map((line) => Object.fromEntries(names.map((name, i) => [name, line.slice(starts[i], starts[i + 1]).trim()])));
}

const jsonLines = (text: string) => text.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);

describe.each([
  { backend: 'mco' as const, api: 'v1 (4.19+)', bed: 'current' as const, setsPath: MCO_PATHS.pinnedImageSets },
  { backend: 'mco' as const, api: 'v1alpha1 (4.16-4.18)', bed: 'v1alpha1' as const, setsPath: mcoPaths({ pinnedImageSets: 'v1alpha1', machineConfigNodes: 'v1alpha1' }).pinnedImageSets },
  { backend: 'agent' as const, api: 'prestage.dev/v1alpha1', bed: 'current' as const, setsPath: AGENT_PATHS.pinnedImageSets },
])('$backend backend, $api', ({ backend, bed, setsPath }) => {
  const cluster = { get kubeconfigPath() { return beds[bed]!.cluster.kubeconfigPath; } };
  const client = { get: <T>(path: string) => beds[bed]!.client.get<T>(path), request: (...args: Parameters<KubeClient['request']>) => beds[bed]!.client.request(...args) };
  const kube = () => ['--kubeconfig', cluster.kubeconfigPath, '--backend', backend];
  const player = () => beds[bed]!.players[backend]!;

  afterEach(() => {
    for (const node of ['master-0', 'worker-0', 'worker-1']) player().behave(node, { pullMs: 300 });
    expect(player().errors).toEqual([]);
  });

  describe('apply', () => {
    it('creates labelled PinnedImageSets owned by field manager prestage, then reports them unchanged', async () => {
      const plan = writePlan(dir, testPlan('apply'));
      const first = await runCli(['apply', plan, ...kube()]);
      expect(first.stderr).toBe('');
      expect(first.code).toBe(0);
      expect(first.stdout).toBe('pinnedimageset/apply-control-plane created: 3 images\npinnedimageset/apply-worker created: 2 images\n');
      const set = await client.get<KubeObject & { spec: { pinnedImages: Array<{ name: string }> } }>(`${setsPath}/apply-worker`);
      expect(set.metadata.labels).toMatchObject({ 'machineconfiguration.openshift.io/role': 'worker', 'app.kubernetes.io/managed-by': 'prestage' });
      expect(set.spec.pinnedImages).toHaveLength(2);
      // The agent's sets carry their node selector; MCO's are picked up by the pools.
      if (backend === 'agent') expect(set.spec).toMatchObject({ nodeSelector: { matchExpressions: [{ key: 'node-role.kubernetes.io/control-plane', operator: 'DoesNotExist' }, { key: 'node-role.kubernetes.io/master', operator: 'DoesNotExist' }] } });
      expect((set.metadata['managedFields'] as Array<{ manager: string; operation: string }>).some((f) => f.manager === 'prestage' && f.operation === 'Apply')).toBe(true);

      const again = await runCli(['apply', plan, ...kube()]);
      expect(again.stdout).toBe('pinnedimageset/apply-control-plane unchanged\npinnedimageset/apply-worker unchanged\n');
    });

    it('--dry-run=server shows the images that would change and changes nothing', async () => {
      await runCli(['apply', writePlan(dir, testPlan('dry')), ...kube()]);
      const before = await client.get<KubeObject>(`${setsPath}/dry-worker`);
      const changed = testPlan('dry', { imageCount: 4, seed: 'dry-v2' });
      const dry = await runCli(['apply', writePlan(dir, changed), '--dry-run=server', ...kube()]);
      expect(dry.code).toBe(0);
      expect(dry.stdout).toContain('pinnedimageset/dry-worker configured: +3 -2 images (server dry run)');
      expect(dry.stdout).toContain('pinnedimageset/dry-control-plane configured: +4 -3 images (server dry run)');
      for (const image of changed.sets[1]!.images) expect(dry.stdout).toContain(`  + ${image}`);
      const after = await client.get<KubeObject>(`${setsPath}/dry-worker`);
      expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    });

    it('refuses a directory without PinnedImageSets with exit 2', async () => {
      const empty = mkdtempSync(join(dir, 'empty-'));
      const result = await runCli(['apply', empty, ...kube()]);
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/no PinnedImageSets found/);
    });
  });

  describe('wait', () => {
    it('exits 0 once every target node reports current == desired, one plain line per change', async () => {
      await runCli(['apply', writePlan(dir, testPlan('ready')), ...kube()]);
      const result = await runCli(['wait', 'ready-control-plane', 'ready-worker', '--timeout', '60s', ...kube()]);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/ready-worker worker-0: done \(generation 1\/1\)/);
      expect(result.stdout).toMatch(/ready-worker worker-1: done \(generation 1\/1\)/);
      expect(result.stdout).toMatch(/ready-control-plane master-0: done/);
      expect(result.stdout).not.toMatch(/ready-worker master-0/);
      expect(result.stdout).toMatch(/^ready-worker: 2\/2 nodes done.* {2}ready$/m);
    });

    it('-o json: one event per line, the set ready only after each of its nodes is done; -o yaml: the same events as YAML documents; status -o name', async () => {
      await runCli(['apply', writePlan(dir, testPlan('json')), ...kube()]);
      const result = await runCli(['wait', 'json-worker', '-o', 'json', '--timeout', '60s', ...kube()]);
      expect(result.code).toBe(0);
      const events = jsonLines(result.stdout);
      const ready = events.findIndex((e) => e['type'] === 'set' && e['ready'] === true);
      expect(ready).toBe(events.length - 1);
      for (const node of ['worker-0', 'worker-1']) {
        const done = events.findIndex((e) => e['type'] === 'node' && e['node'] === node && e['phase'] === 'done');
        expect(done).toBeGreaterThanOrEqual(0);
        expect(done).toBeLessThan(ready);
      }
      // -o yaml: the same events, one YAML document each; the set is ready now, each node done.
      const again = await runCli(['wait', 'json-worker', '-o', 'yaml', '--timeout', '60s', ...kube()]);
      expect([again.code, again.stdout.startsWith('---\n')]).toEqual([0, true]);
      const documents = yaml.loadAll(again.stdout) as Array<Record<string, unknown>>;
      expect(documents.at(-1)).toMatchObject({ type: 'set', set: 'json-worker', ready: true });
      expect(documents.filter((e) => e['type'] === 'node' && e['phase'] === 'done').map((e) => e['node']).sort()).toEqual(['worker-0', 'worker-1']);
      // -o name: the set as kubectl names it.
      expect((await runCli(['status', 'json-worker', '-o', 'name', ...kube()])).stdout).toBe('pinnedimageset/json-worker\n');
    });

    it('a node degraded while retrying does not fail the set before --fail-after', async () => {
      player().behave('worker-1', { pullMs: 200, failWith: 'exit status 125', failForMs: 2_000 });
      await runCli(['apply', writePlan(dir, testPlan('retry')), ...kube()]);
      const result = await runCli(['wait', 'retry-worker', '--fail-after', '20s', '--timeout', '60s', ...kube()]);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/retry-worker worker-1: degraded \(generation 0\/1\).*: exit status 125$/m);
      expect(result.stdout).toMatch(/retry-worker worker-1: done/);
    });

    it('a node degraded past --fail-after fails the set: exit 1 with the node and its first error', async () => {
      player().behave('worker-0', { pullMs: 200, failWith: 'failed to pull image quay.io/x@sha256:1: manifest unknown' });
      await runCli(['apply', writePlan(dir, testPlan('fail')), ...kube()]);
      const started = Date.now();
      const result = await runCli(['wait', 'fail-worker', '--fail-after', '2s', '--timeout', '60s', ...kube()]);
      expect(result.code).toBe(1);
      expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
      expect(result.stderr).toMatch(/^prestage: error: set fail-worker failed on node worker-0 \(degraded for \d+ s\): failed to pull image quay\.io\/x@sha256:1: manifest unknown\n$/);
    });

    it('--timeout exits 124 naming what it still waits for', async () => {
      player().behave('worker-1', { pullMs: 120_000 });
      await runCli(['apply', writePlan(dir, testPlan('slow')), ...kube()]);
      const result = await runCli(['wait', 'slow-worker', '--timeout', '2s', ...kube()]);
      expect(result.code).toBe(124);
      expect(result.stderr).toMatch(/timed out after 2 s: slow-worker 1\/2 nodes done \(waiting on worker-1 progressing\)/);
    });

    it('a node that joins the pool while waiting holds the set until it catches up', async () => {
      for (const node of ['worker-0', 'worker-1']) player().behave(node, { pullMs: 1_500 });
      player().behave('worker-9', { pullMs: 3_000 });
      await runCli(['apply', writePlan(dir, testPlan('join')), ...kube()]);
      const waiting = runCli(['wait', 'join-worker', '-o', 'json', '--timeout', '60s', ...kube()]);
      await client.request('POST', '/api/v1/nodes', { body: { metadata: { name: 'worker-9', labels: { 'node-role.kubernetes.io/worker': '' } } } });
      const result = await waiting;
      expect(result.code).toBe(0);
      const events = jsonLines(result.stdout);
      const joined = events.find((e) => e['type'] === 'set' && e['nodesTotal'] === 3);
      expect(joined).toBeDefined();
      const lastNodeDone = events.findIndex((e) => e['type'] === 'node' && e['node'] === 'worker-9' && e['phase'] === 'done');
      const ready = events.findIndex((e) => e['type'] === 'set' && e['ready'] === true);
      expect(lastNodeDone).toBeGreaterThan(0);
      expect(ready).toBeGreaterThan(lastNodeDone);
      expect(events[ready]).toMatchObject({ nodesDone: 3, nodesTotal: 3 });
      await client.request('DELETE', '/api/v1/nodes/worker-9');
    });
  });

  describe('status', () => {
    it('shows a node × set table with generations, states and the node error', async () => {
      player().behave('worker-1', { pullMs: 100, failWith: 'exit status 125' });
      await runCli(['apply', writePlan(dir, testPlan('table')), ...kube()]);
      const degraded = await runCli(['wait', 'table-control-plane', '--timeout', '30s', ...kube()]);
      expect(degraded.code).toBe(0);
      // worker-1 keeps failing: wait for it to report the failure, then read the table.
      await runCli(['wait', 'table-worker', '--fail-after', '1s', '--timeout', '30s', ...kube()]);
      const result = await runCli(['status', 'table-control-plane', 'table-worker', ...kube()]);
      expect(result.code).toBe(0);
      const rows = parseTable(result.stdout);
      const failing = rows.map((r) => [r['NODE'], r['SET'], r['GENERATION (CURRENT/DESIRED/SET)'], r['STATE'], r['ERROR']]);
      // A one-shot read on 4.19+ (v1) may fall between two of the daemon's syncs, where the retry has
      // dropped the entries' error and Degraded names none: the node pulls on, the NOTE says why.
      if (backend === 'mco' && bed === 'current' && failing[2]![3] === 'progressing') {
        failing[2]![3] = 'degraded';
        failing[2]![4] = 'exit status 125';
        expect(rows[2]!['NOTE']).toMatch(/^MCO reports Degraded without naming an error/);
      }
      expect(failing).toEqual([
        ['master-0', 'table-control-plane', '1/1/1', 'done', ''],
        ['worker-0', 'table-worker', '1/1/1', 'done', ''],
        ['worker-1', 'table-worker', '0/1/1', 'degraded', 'exit status 125'],
      ]);
      // Only the agent reports images and bytes; MCO's table has no such columns.
      if (backend === 'agent') expect(rows.map((r) => [r['IMAGES'], r['BYTES']])).toEqual([['3/3', '30.0 MiB/30.0 MiB'], ['2/2', '20.0 MiB/20.0 MiB'], ['1/2', '10.0 MiB/20.0 MiB']]);
      else expect(Object.keys(rows[0]!)).not.toContain('IMAGES');

      const json = JSON.parse((await runCli(['status', 'table-worker', '-o', 'json', ...kube()])).stdout) as { backend: string; sets: Array<{ nodes: unknown[] }> };
      expect(json.backend).toBe(backend);
      expect(json.sets[0]!.nodes).toHaveLength(2);
    });
  });

  describe('release lifecycle: status --release, ready, prune', () => {
    const CLUSTER_VERSIONS = '/apis/config.openshift.io/v1/clusterversions';
    /** A plan of `prefix` whose release is `version` (testPlan's are all 4.16.3). */
    const releasePlan = (prefix: string, version: string) => {
      const plan = testPlan(prefix);
      return { ...plan, release: { ...plan.release, version } };
    };
    /** ClusterVersion as the CVO writes it: `history` newest first. */
    async function clusterHistory(history: Array<{ version: string; state: 'Completed' | 'Partial' }>): Promise<void> {
      if (!(await client.request('GET', CLUSTER_VERSIONS).then((l) => (l as { items: unknown[] }).items.length))) {
        await client.request('POST', CLUSTER_VERSIONS, { body: { apiVersion: 'config.openshift.io/v1', kind: 'ClusterVersion', metadata: { name: 'version' }, spec: { clusterID: '5a3c1e6e-6c1b-4d5e-9c39-0f0d1f6f2a11' } } });
      }
      const entries = history.map((h) => ({ ...h, image: `quay.io/openshift-release-dev/ocp-release:${h.version}-x86_64`, startedTime: '2024-07-01T09:00:00Z', completionTime: h.state === 'Completed' ? '2024-07-01T10:00:00Z' : null, verified: false }));
      // A JSON patch: a merge patch would drop the null completionTime of a Partial entry.
      const status = { desired: { version: history[0]!.version, image: entries[0]!.image }, history: entries, availableUpdates: null, observedGeneration: 1, versionHash: 'x' };
      await client.request('PATCH', `${CLUSTER_VERSIONS}/version/status`, { body: [{ op: 'add', path: '/status', value: status }], contentType: 'application/json-patch+json' });
    }

    beforeAll(async () => {
      // OpenShift's ClusterVersion CRD, once per API server (two backends share one).
      if (!(await beds[bed]!.client.find('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterversions.config.openshift.io'))) {
        await installOpenShiftCrds(beds[bed]!.client, bed === 'current' ? OPENSHIFT_4_21 : OPENSHIFT_4_16, 'config');
      }
      await clusterHistory([{ version: '4.15.1', state: 'Completed' }]);
    });

    it('ready and status --release answer per release: READY once each set is current on every node it targets, else NOT READY naming the node', async () => {
      await runCli(['apply', writePlan(dir, releasePlan('life-old', '4.15.1')), ...kube()]);
      expect((await runCli(['wait', 'life-old-control-plane', 'life-old-worker', '--timeout', '60s', ...kube()])).code).toBe(0);
      const ready = await runCli(['ready', '4.15.1', ...kube()]);
      expect(ready.stderr).toBe('');
      expect(ready.code).toBe(0);
      expect(ready.stdout).toBe('READY 4.15.1: 2 sets current on all 3 nodes they target\n');
      const labelled = await client.get<KubeObject>(`${setsPath}/life-old-worker`);
      expect(labelled.metadata.labels).toMatchObject({ 'prestage.dev/release-version': '4.15.1' });
      expect(Object.keys(labelled.metadata.annotations ?? {})).toEqual(expect.arrayContaining(['prestage.dev/release', 'prestage.dev/release-digest', 'prestage.dev/release-version']));

      // The next release: worker-1 fails its pulls until the test lets it recover (not after a
      // time: on a busy host the CLI runs below can outlast any fixed failing time).
      player().behave('worker-1', { pullMs: 100, failWith: 'exit status 125' });
      await runCli(['apply', writePlan(dir, releasePlan('life-new', '4.15.2')), ...kube()]);
      expect((await runCli(['wait', 'life-new-worker', '--fail-after', '1s', '--timeout', '30s', ...kube()])).code).toBe(1);
      const notReady = await runCli(['ready', '4.15.2', ...kube()]);
      expect(notReady.code).toBe(1);
      expect(notReady.stdout).toBe('');
      // A one-shot read on 4.19+ (v1) may fall between two of the daemon's syncs: the retry drops the
      // entries' error and the Degraded condition names none, so the node is said to pull on, with why.
      const failing = backend === 'mco' && bed === 'current'
        ? /^prestage: error: NOT READY 4\.15\.2: life-new-worker on worker-1 (degraded: exit status 125|progressing: MCO reports Degraded without naming an error \(One or more PinnedImageSet is experiencing an error[^)]*\); its last sync failed or passed its deadline, and it pulls on)\n$/
        : /^prestage: error: NOT READY 4\.15\.2: life-new-worker on worker-1 degraded( \(\d\/2 images\))?: exit status 125\n$/;
      expect(notReady.stderr).toMatch(failing);
      const status = await runCli(['status', '--release', '4.15.2', ...kube()]);
      expect(status.code).toBe(1);
      expect(status.stderr).toMatch(failing);
      // Only that release's sets, every node of each.
      expect(parseTable(status.stdout).map((r) => `${r['NODE']} ${r['SET']}`)).toEqual(['master-0 life-new-control-plane', 'worker-0 life-new-worker', 'worker-1 life-new-worker']);
      // The old release stays ready meanwhile.
      expect((await runCli(['ready', '4.15.1', ...kube()])).code).toBe(0);

      player().behave('worker-1', { pullMs: 100 });
      expect((await runCli(['wait', 'life-new-worker', '--timeout', '60s', ...kube()])).code).toBe(0);
      const recovered = await runCli(['status', '--release', '4.15.2', ...kube()]);
      expect(recovered.code).toBe(0);
      expect(recovered.stdout).toMatch(/\n\nREADY 4\.15\.2: 2 sets current on all 3 nodes they target\n$/);

      const none = await runCli(['ready', '4.15.9', ...kube()]);
      expect([none.code, none.stderr]).toEqual([1, 'prestage: error: NOT READY 4.15.9: no prestage set of release 4.15.9 on the cluster; stage it (stage --to 4.15.9)\n']);
      const bad = await runCli(['ready', 'latest', ...kube()]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/^prestage: error: VERSION latest: not a release version; name one such as 4\.16\.3/);
    }, 180_000); // A dozen CLI runs against the API server: 13 s idle, over 60 s seen on a busy 2-core host.

    it('prune deletes only the sets of releases older than the Completed current one; --dry-run lists them with up-to bytes per node', async () => {
      const exists = async (name: string) => (await beds[bed]!.client.find(`${setsPath}/${name}`)) !== undefined;
      // Someone else's set of the old release: never prestage's to delete.
      const foreign = setObjectFor(releasePlan('foreign', '4.15.1'), releasePlan('foreign', '4.15.1').sets[1]!, backend === 'agent' ? 'prestage' : bed === 'current' ? 'mco' : 'mco-v1alpha1') as KubeObject;
      delete foreign.metadata.labels!['app.kubernetes.io/managed-by'];
      await client.request('POST', setsPath, { body: foreign });
      // A newer release staged already: 4.15.10 sorts before 4.15.2 as text, after it as a version.
      await runCli(['apply', writePlan(dir, releasePlan('life-next', '4.15.10')), ...kube()]);

      await clusterHistory([{ version: '4.15.2', state: 'Partial' }, { version: '4.15.1', state: 'Completed' }]);
      const during = await runCli(['prune', ...kube()]);
      expect([during.code, during.stdout]).toEqual([0, 'nothing to prune: the update to 4.15.2 is not Completed (history state Partial); prune once it is\n']);
      expect(await exists('life-old-worker')).toBe(true);

      await clusterHistory([{ version: '4.15.2', state: 'Completed' }, { version: '4.15.1', state: 'Completed' }]);
      const dry = await runCli(['prune', '--dry-run', ...kube()]);
      expect(dry.stderr).toBe('');
      expect(dry.code).toBe(0);
      expect(dry.stdout).toMatch(/^The cluster runs 4\.15\.2 \(Completed\); would delete 2 sets of older releases, keeping \d+ \(4\.15\.2, 4\.15\.10(, 4\.16\.3)?\)\n/);
      expect(parseTable(dry.stdout.split('\n\n')[1]!)).toEqual([
        { SET: 'life-old-control-plane', RELEASE: '4.15.1', 'ON DISK': '64.0 MiB', NODES: 'master-0' },
        { SET: 'life-old-worker', RELEASE: '4.15.1', 'ON DISK': '64.0 MiB', NODES: 'worker-0, worker-1' },
      ]);
      expect(parseTable(dry.stdout.split('\n\n')[2]!)).toEqual(['master-0', 'worker-0', 'worker-1'].map((NODE) => ({ NODE, 'FREED (UP TO)': '64.0 MiB' })));
      expect(dry.stdout).toMatch(/\nDry run \(client\): nothing sent to the cluster but reads; nothing changed\.\n$/);
      expect(await exists('life-old-worker')).toBe(true);
      // kubectl's habit: --dry-run=server sends each DELETE with dryRun=All; nothing is deleted.
      const versionOf = async (name: string) => (await beds[bed]!.client.get<KubeObject>(`${setsPath}/${name}`)).metadata.resourceVersion;
      const before = await Promise.all(['life-old-control-plane', 'life-old-worker'].map(versionOf));
      const serverDry = await runCli(['prune', '--dry-run=server', ...kube()]);
      expect([serverDry.code, serverDry.stderr]).toEqual([0, '']);
      expect(serverDry.stdout).toMatch(/\npinnedimageset\/life-old-control-plane deleted \(server dry run\)\npinnedimageset\/life-old-worker deleted \(server dry run\)\nDry run \(checked by the API server\): nothing changed\.\n$/);
      expect(await Promise.all(['life-old-control-plane', 'life-old-worker'].map(versionOf))).toEqual(before);

      const pruned = await runCli(['prune', ...kube()]);
      expect(pruned.code).toBe(0);
      expect(pruned.stdout).toMatch(/\npinnedimageset\/life-old-control-plane deleted\npinnedimageset\/life-old-worker deleted\n$/);
      expect([await exists('life-old-control-plane'), await exists('life-old-worker')]).toEqual([false, false]);
      // Kept: the current release, a newer one, and the set prestage does not manage.
      expect([await exists('life-new-worker'), await exists('life-next-worker'), await exists('foreign-worker')]).toEqual([true, true, true]);
      expect((await runCli(['prune', ...kube()])).stdout).toMatch(/^nothing to prune: the cluster runs 4\.15\.2; no prestage set is of an older release \(kept: 4\.15\.2, 4\.15\.10(, 4\.16\.3)?\)\n$/);
      await client.request('DELETE', `${setsPath}/foreign-worker`);
    });
  });
});

describe('backend detection', () => {
  const cluster = { get kubeconfigPath() { return beds.current!.cluster.kubeconfigPath; } };
  const client = { find: (path: string) => beds.current!.client.find(path) };
  it('picks MCO when the cluster serves MCO PinnedImageSets, even with the prestage CRDs installed', async () => {
    await runCli(['apply', writePlan(dir, testPlan('detect')), '--kubeconfig', cluster.kubeconfigPath]);
    const result = await runCli(['status', 'detect-worker', '-o', 'yaml', '--kubeconfig', cluster.kubeconfigPath]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^backend: mco$/m);
    expect(await client.find(`${MCO_PATHS.pinnedImageSets}/detect-worker`)).toBeDefined();
    expect(await client.find(`${AGENT_PATHS.pinnedImageSets}/detect-worker`)).toBeUndefined();
  });
});

describe('GitOps output: plan -o yaml / --output-dir --api, for the API each cluster serves', () => {
  const targets = [
    { api: 'mco' as const, bed: 'current' as const, path: MCO_PATHS.pinnedImageSets, backend: 'mco' },
    { api: 'mco-v1alpha1' as const, bed: 'v1alpha1' as const, path: mcoPaths({ pinnedImageSets: 'v1alpha1', machineConfigNodes: 'v1alpha1' }).pinnedImageSets, backend: 'mco' },
    { api: 'prestage' as const, bed: 'current' as const, path: AGENT_PATHS.pinnedImageSets, backend: 'agent' },
  ];

  it.each(targets)('--api $api: every document passes a server-side dry-run apply against the real CRDs', async ({ api, bed, path }) => {
    const plan = testPlan(`gitops-${api}`);
    const documents = (yaml.loadAll(renderYaml(plan, api)) as KubeObject[]).filter(Boolean);
    expect(documents.map((d) => d.metadata.name)).toEqual(plan.sets.map((s) => s.name));
    for (const document of documents) {
      const applied = await beds[bed]!.client.apply(`${path}/${document.metadata.name}`, document, { fieldManager: 'kubectl', dryRun: true });
      expect(applied.apiVersion).toBe(document.apiVersion);
      expect(await beds[bed]!.client.find(`${path}/${document.metadata.name}`)).toBeUndefined();
    }
  });

  it.each(targets)('--api $api: apply of the --output-dir creates the sets the backend reads', async ({ api, bed, path, backend }) => {
    const plan = testPlan(`dir-${api}`);
    const out = join(dir, `gitops-${api}`);
    await writeGitOpsDir(plan, out, api);
    const result = await runCli(['apply', out, '--kubeconfig', beds[bed]!.cluster.kubeconfigPath, '--backend', backend]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`pinnedimageset/dir-${api}-control-plane created: 3 images\npinnedimageset/dir-${api}-worker created: 2 images\n`);
    const set = await beds[bed]!.client.get<KubeObject & { spec: Record<string, unknown> }>(`${path}/dir-${api}-worker`);
    if (api === 'prestage') expect(set.spec['nodeSelector']).toBeDefined();
  });
});
