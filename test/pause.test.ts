/**
 * `prestage pause` and `prestage resume` through the real CLI on the real test bed API server:
 * the agent backend's annotation round trip, and on MCO's v1 API (OpenShift's own CRDs) the
 * role label moved aside so the worker pool no longer selects the set, then restored exactly.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAUSED_ANNOTATION, PAUSED_ROLE_ANNOTATION } from '../src/api/staging.js';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import { MCO_PATHS, MCO_V1, mcoBackend } from '../src/cluster/mco/backend.js';
import { patchSet } from '../src/cluster/pause.js';
import { KubeClient, type KubeObject } from '../src/kube/client.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { installAgentCrds } from './mco/agent-status-writer.js';
import { installMcoCrds } from './mco/crds.js';
import { testPlan, writePlan } from './mco/plans.js';
import { DEFAULT_POOLS } from './mco/simulator.js';
import { runCli } from './support/cli.js';

const AGENT_NOTE = '(agent: no new pulls start; pulls under way finish; nothing is unpinned)';
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

let cluster: TestCluster;
let client: KubeClient;
let dir: string;
const kube = (backend: 'agent' | 'mco') => ['--kubeconfig', cluster.kubeconfigPath, '--backend', backend];
const metadataOf = async (path: string) => (await client.get<KubeObject>(path)).metadata;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'prestage-pause-'));
  cluster = await startCluster({ workers: 1 });
  client = new KubeClient(cluster.kubeConfig);
  await Promise.all([installMcoCrds(client), installAgentCrds(client)]);
  for (const pool of DEFAULT_POOLS) await client.request('POST', MCO_PATHS.machineConfigPools, { body: pool });
  for (const [prefix, backend] of [['agent', 'agent'], ['mco', 'mco']] as const) {
    const applied = await runCli(['apply', writePlan(dir, testPlan(prefix)), ...kube(backend)]);
    expect([applied.code, applied.stderr]).toEqual([0, '']);
  }
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('agent backend', () => {
  const path = (set: string) => `${AGENT_PATHS.pinnedImageSets}/${set}`;

  it('pause annotates, says already paused, resume of a set not paused exits 2 changing nothing, resume removes the annotation', async () => {
    // kubectl's dry runs: a bare --dry-run is client (nothing sent), =server is checked and not persisted.
    const unchanged = (await metadataOf(path('agent-worker'))).resourceVersion;
    const dry = await runCli(['pause', 'agent-worker', '--dry-run', ...kube('agent')]);
    expect([dry.code, dry.stderr, dry.stdout]).toEqual([0, '', `would pause agent-worker ${AGENT_NOTE}\nDry run (client): nothing sent to the cluster but reads; nothing changed.\n`]);
    const serverDry = await runCli(['pause', 'agent-worker', '--dry-run=server', ...kube('agent')]);
    expect([serverDry.code, serverDry.stderr, serverDry.stdout]).toEqual([0, '', `would pause agent-worker ${AGENT_NOTE}\nDry run (checked by the API server): nothing changed.\n`]);
    const wrong = await runCli(['pause', 'agent-worker', '--dry-run=true', ...kube('agent')]);
    expect([wrong.code, wrong.stdout]).toEqual([2, '']);
    expect(wrong.stderr).toMatch(/^prestage: error: .*dry-run.*\n$/);
    expect((await metadataOf(path('agent-worker'))).annotations).not.toHaveProperty(PAUSED_ANNOTATION);
    expect((await metadataOf(path('agent-worker'))).resourceVersion).toBe(unchanged);

    const paused = await runCli(['pause', 'agent-worker', ...kube('agent')]);
    expect([paused.code, paused.stderr, paused.stdout]).toEqual([0, '', `paused agent-worker ${AGENT_NOTE}\n`]);
    const since = (await metadataOf(path('agent-worker'))).annotations?.[PAUSED_ANNOTATION];
    expect(since).toMatch(RFC3339);

    const again = await runCli(['pause', 'agent-worker', ...kube('agent')]);
    expect([again.code, again.stdout]).toEqual([0, `agent-worker already paused since ${since}\n`]);
    // Applied again (server-side apply, field manager prestage): the pause, another operation's field, stays.
    const reapplied = await runCli(['apply', writePlan(dir, testPlan('agent')), ...kube('agent')]);
    expect([reapplied.code, reapplied.stderr]).toEqual([0, '']);
    expect((await metadataOf(path('agent-worker'))).annotations?.[PAUSED_ANNOTATION]).toBe(since);

    // One set named is not paused: nothing changes for either.
    const before = await Promise.all(['agent-worker', 'agent-control-plane'].map(async (set) => (await metadataOf(path(set))).resourceVersion));
    const refused = await runCli(['resume', 'agent-worker', 'agent-control-plane', ...kube('agent')]);
    expect([refused.code, refused.stdout, refused.stderr]).toEqual([2, '', `prestage: error: agent-control-plane is not paused (no annotation ${PAUSED_ANNOTATION}); nothing changed\n`]);
    expect(await Promise.all(['agent-worker', 'agent-control-plane'].map(async (set) => (await metadataOf(path(set))).resourceVersion))).toEqual(before);

    const pausedVersion = (await metadataOf(path('agent-worker'))).resourceVersion;
    for (const mode of ['--dry-run=server', '--dry-run=client']) {
      const dryResume = await runCli(['resume', 'agent-worker', mode, ...kube('agent')]);
      expect([dryResume.code, dryResume.stderr]).toEqual([0, '']);
      expect(dryResume.stdout).toMatch(/^would resume agent-worker\nDry run \((client|checked by the API server)\)/);
    }
    expect((await metadataOf(path('agent-worker'))).resourceVersion).toBe(pausedVersion);
    const resumed = await runCli(['resume', 'agent-worker', ...kube('agent')]);
    expect([resumed.code, resumed.stderr, resumed.stdout]).toEqual([0, '', 'resumed agent-worker\n']);
    expect((await metadataOf(path('agent-worker'))).annotations).not.toHaveProperty(PAUSED_ANNOTATION);

    const none = await runCli(['resume', ...kube('agent')]);
    expect([none.code, none.stdout]).toEqual([2, '']);
    expect(none.stderr).toMatch(/^prestage: error: no paused sets [^\n]*\n$/);
    const missing = await runCli(['pause', 'agent-nope', ...kube('agent')]);
    expect([missing.code, missing.stderr]).toEqual([2, 'prestage: error: no PinnedImageSet agent-nope on the cluster; nothing changed\n']);
  });
});

describe('MCO backend, v1', () => {
  const path = (set: string) => `${MCO_PATHS.pinnedImageSets}/${set}`;

  it('pause moves the role label aside so the worker pool no longer selects the set; resume restores the exact labels', async () => {
    const backend = mcoBackend(client);
    const before = await metadataOf(path('mco-worker'));
    expect(before.labels).toMatchObject({ 'machineconfiguration.openshift.io/role': 'worker' });
    expect(await backend.targetNodes('mco-worker')).toEqual(['worker-0']);

    const paused = await runCli(['pause', 'mco-worker', ...kube('mco')]);
    expect(paused.stderr).toBe('');
    expect(paused.code).toBe(0);
    const lines = paused.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('paused mco-worker (MCO: label machineconfiguration.openshift.io/role=worker moved to annotation prestage.dev/paused-role; pool worker no longer selects it)');
    expect(lines[1]).toMatch(/^MCO has no pause: .*pin drop-in.*kubelet's image garbage collection until resume; pulls under way finish\. resume puts the label back: MCO pulls what is missing and pins it again\.$/);
    expect(lines).toHaveLength(2);
    const during = await metadataOf(path('mco-worker'));
    expect(during.labels).not.toHaveProperty('machineconfiguration.openshift.io/role');
    expect(during.annotations).toMatchObject({ [PAUSED_ROLE_ANNOTATION]: 'worker', [PAUSED_ANNOTATION]: expect.stringMatching(RFC3339) });
    expect(await backend.targetNodes('mco-worker')).toEqual([]);
    // Applied again (a stage, a GitOps sync): it stays paused, or the pool would pull it at once.
    const reapplied = await runCli(['apply', writePlan(dir, testPlan('mco')), ...kube('mco')]);
    expect([reapplied.code, reapplied.stderr]).toEqual([0, '']);
    expect(await backend.targetNodes('mco-worker')).toEqual([]);
    // The patch is conditional on the resourceVersion read: one from before the pause is refused, not merged.
    await expect(patchSet(client, { kind: 'mco', versions: MCO_V1 }, 'mco-worker', { metadata: { resourceVersion: before.resourceVersion!, annotations: { [PAUSED_ANNOTATION]: null } } }, { dryRun: false, verb: 'resume' })).rejects.toThrow(
      'set mco-worker changed since resume read it, so it was left as it is; run resume again',
    );

    const resumed = await runCli(['resume', ...kube('mco')]);
    expect([resumed.code, resumed.stderr, resumed.stdout]).toEqual([0, '', 'resumed mco-worker (MCO: label machineconfiguration.openshift.io/role=worker restored; pool worker selects it again: MCO pulls what is missing and pins it again)\n']);
    const after = await metadataOf(path('mco-worker'));
    expect(after.labels).toEqual(before.labels);
    expect(after.annotations).toEqual(before.annotations);
    expect(await backend.targetNodes('mco-worker')).toEqual(['worker-0']);
  });

  it('refuses, exit 2 in one line, a set with no role label to move aside and restore', async () => {
    await client.request('POST', MCO_PATHS.pinnedImageSets, {
      body: { apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'PinnedImageSet', metadata: { name: 'unlabelled' }, spec: { pinnedImages: testPlan('unlabelled').sets[0]!.images.map((name) => ({ name })) } },
    });
    const refused = await runCli(['pause', 'unlabelled', 'mco-control-plane', ...kube('mco')]);
    expect([refused.code, refused.stdout]).toEqual([2, '']);
    expect(refused.stderr).toBe('prestage: error: cannot pause unlabelled has no label machineconfiguration.openshift.io/role to move aside and restore on resume (MCO pools select sets by it); nothing changed\n');
    expect((await metadataOf(path('mco-control-plane'))).labels).toHaveProperty('machineconfiguration.openshift.io/role', 'master');
  });
});
