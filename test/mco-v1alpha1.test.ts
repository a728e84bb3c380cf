/**
 * OpenShift 4.16-4.18 (TechPreviewNoUpgrade): the cluster serves PinnedImageSet and
 * MachineConfigNode only at machineconfiguration.openshift.io/v1alpha1, and a node reports a
 * set's failure as a list of strings. On a real kube-apiserver with those CRDs, apply writes
 * v1alpha1 sets, and wait and status read v1alpha1 MachineConfigNodes written as MCO wrote them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../src/kube/client.js';
import { MCO_PATHS, mcoPaths } from '../src/cluster/mco/backend.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { installMcoCrds, OPENSHIFT_4_16 } from './mco/crds.js';
import { testPlan, writePlan } from './mco/plans.js';
import { DEFAULT_POOLS } from './mco/simulator.js';
import { runCli } from './support/cli.js';

const PATHS = mcoPaths({ pinnedImageSets: 'v1alpha1', machineConfigNodes: 'v1alpha1' });
const NODES = { 'master-0': 'master', 'worker-0': 'worker' } as const;

let cluster: TestCluster;
let client: KubeClient;
let dir: string;
let kube: string[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'prestage-mco-alpha-'));
  cluster = await startCluster({ workers: 1 });
  client = new KubeClient(cluster.kubeConfig);
  await installMcoCrds(client, OPENSHIFT_4_16);
  for (const pool of DEFAULT_POOLS) await client.request('POST', PATHS.machineConfigPools, { body: pool });
  for (const [node, pool] of Object.entries(NODES)) {
    await client.request('POST', PATHS.machineConfigNodes, {
      body: { apiVersion: 'machineconfiguration.openshift.io/v1alpha1', kind: 'MachineConfigNode', metadata: { name: node }, spec: { node: { name: node }, pool: { name: pool }, configVersion: { desired: `rendered-${pool}-0` } } },
    });
  }
  kube = ['--kubeconfig', cluster.kubeconfigPath];
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** What MCO 4.16's daemon writes for one set on one node. */
async function report(node: string, set: string, entry: { desiredGeneration: number; currentGeneration?: number; lastFailedGeneration?: number; lastFailedGenerationErrors?: string[] }): Promise<void> {
  const mcn = await client.get<{ status?: { pinnedImageSets?: Array<{ name: string }> } }>(`${PATHS.machineConfigNodes}/${node}`);
  const others = (mcn.status?.pinnedImageSets ?? []).filter((s) => s.name !== set);
  await client.request('PATCH', `${PATHS.machineConfigNodes}/${node}/status`, {
    body: { status: { configVersion: { desired: 'rendered-0' }, pinnedImageSets: [...others, { name: set, ...entry }] } },
    contentType: 'application/merge-patch+json',
  });
}

describe('MCO at v1alpha1 (OpenShift 4.16-4.18)', () => {
  it('detects MCO and applies the sets at v1alpha1, the version the cluster serves', async () => {
    const result = await runCli(['apply', writePlan(dir, testPlan('alpha')), ...kube]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('pinnedimageset/alpha-control-plane created: 3 images\npinnedimageset/alpha-worker created: 2 images\n');
    const set = await client.get<{ apiVersion: string; metadata: { labels: Record<string, string> } }>(`${PATHS.pinnedImageSets}/alpha-worker`);
    expect(set.apiVersion).toBe('machineconfiguration.openshift.io/v1alpha1');
    expect(set.metadata.labels['machineconfiguration.openshift.io/role']).toBe('worker');
    await expect(client.get(`${MCO_PATHS.pinnedImageSets}/alpha-worker`)).rejects.toMatchObject({ status: 404 });
  });

  it('wait follows v1alpha1 MachineConfigNodes to ready, and status shows them', async () => {
    const waiting = runCli(['wait', 'alpha-control-plane', 'alpha-worker', '--timeout', '60s', ...kube]);
    await report('master-0', 'alpha-control-plane', { desiredGeneration: 1 });
    await report('worker-0', 'alpha-worker', { desiredGeneration: 1 });
    await report('master-0', 'alpha-control-plane', { desiredGeneration: 1, currentGeneration: 1 });
    await report('worker-0', 'alpha-worker', { desiredGeneration: 1, currentGeneration: 1 });
    const result = await waiting;
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^alpha-control-plane: 1\/1 nodes done {2}ready$/m);
    expect(result.stdout).toMatch(/^alpha-worker: 1\/1 nodes done {2}ready$/m);

    const status = await runCli(['status', 'alpha-worker', '-o', 'json', ...kube]);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ backend: 'mco', sets: [{ name: 'alpha-worker', nodes: [{ node: 'worker-0', phase: 'done', desiredGeneration: 1, currentGeneration: 1 }] }] });
  });

  it('a failure reported as lastFailedGenerationErrors fails wait after --fail-after with that error', async () => {
    const result = await runCli(['apply', writePlan(dir, testPlan('broken', { seed: 'broken' })), ...kube]);
    expect(result.code).toBe(0);
    const error = 'failed to pull image quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123: manifest unknown';
    await report('worker-0', 'broken-worker', { desiredGeneration: 1, lastFailedGeneration: 1, lastFailedGenerationErrors: [error] });
    const waited = await runCli(['wait', 'broken-worker', '--fail-after', '1s', '--timeout', '60s', ...kube]);
    expect(waited.code).toBe(1);
    expect(waited.stdout).toContain(`broken-worker worker-0: degraded (generation 0/1): ${error}\n`);
    expect(waited.stderr).toMatch(/^prestage: error: set broken-worker failed on node worker-0 \(degraded for \d+ s\): (.*)\n$/);
    expect(waited.stderr).toContain(error);
  });
});
