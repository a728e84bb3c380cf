/**
 * apply and stage from a release pullspec and from a GitOps directory: the synthetic release
 * served by a real docker-registry, a real kube-apiserver with the MCO CRDs, MCO simulated.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubeClient } from '../src/kube/client.js';
import { MCO_PATHS } from '../src/cluster/mco/backend.js';
import type { Plan } from '../src/plan/types.js';
import type { Preflight } from '../src/api/preflight.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { installMcoCrds } from './mco/crds.js';
import { McoSimulator } from './mco/simulator.js';
import { runCli } from './support/cli.js';

const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
let registry: RegistryHandle;
let cluster: TestCluster;
let client: KubeClient;
let simulator: McoSimulator;
let dir: string;
let registryFlags: string[];
let kube: string[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'prestage-stage-'));
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  registryFlags = ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
  cluster = await startCluster({ workers: 1 });
  client = new KubeClient(cluster.kubeConfig);
  await installMcoCrds(client);
  simulator = await McoSimulator.start(client, { pullMs: 200 });
  kube = ['--kubeconfig', cluster.kubeconfigPath];
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  simulator?.stop();
  await cluster?.stop();
  await registry?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** How many images `plan` puts in each set of the fixture release (the planner's rule is tested in plan.test). */
let counts: Promise<{ controlPlane: number; worker: number }> | undefined;
function plannedCounts(): Promise<{ controlPlane: number; worker: number }> {
  counts ??= runCli(['plan', RELEASE, ...registryFlags, '-o', 'json']).then((r) => {
    const sets = (JSON.parse(r.stdout) as Plan).sets;
    return { controlPlane: sets.find((s) => s.role === 'control-plane')!.images.length, worker: sets.find((s) => s.role === 'worker')!.images.length };
  });
  return counts;
}

const imagesOf = async (name: string) => (await client.get<{ spec: { pinnedImages: unknown[] } }>(`${MCO_PATHS.pinnedImageSets}/${name}`)).spec.pinnedImages.length;

describe('apply', () => {
  it('--dry-run=server of a release plans it and reports what would be created, creating nothing', async () => {
    const { controlPlane, worker } = await plannedCounts();
    const result = await runCli(['apply', RELEASE, ...registryFlags, '--name-prefix', 'dry', '--dry-run=server', ...kube]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`pinnedimageset/dry-4.16.3-control-plane created: ${controlPlane} images (server dry run)\npinnedimageset/dry-4.16.3-worker created: ${worker} images (server dry run)\nDry run (checked by the API server): nothing changed.\n`);
    expect(await client.find(`${MCO_PATHS.pinnedImageSets}/dry-4.16.3-worker`)).toBeUndefined();
  });

  it('applies the GitOps directory `plan --output-dir` writes (kustomization.yaml included)', async () => {
    const gitops = join(dir, 'gitops');
    const planned = await runCli(['plan', RELEASE, ...registryFlags, '--name-prefix', 'gitops', '--output-dir', gitops, '-o', 'json']);
    expect(planned.code).toBe(0);
    expect(readdirSync(gitops)).toContain('kustomization.yaml');
    const result = await runCli(['apply', gitops, ...kube]);
    expect(result.code).toBe(0);
    const { controlPlane, worker } = await plannedCounts();
    expect(result.stdout).toBe(`pinnedimageset/gitops-4.16.3-control-plane created: ${controlPlane} images\npinnedimageset/gitops-4.16.3-worker created: ${worker} images\n`);
    expect(await imagesOf('gitops-4.16.3-worker')).toBe(worker);
  });
});

describe('stage', () => {
  it('refuses with exit 4 when a target node cannot hold its set, before applying anything', async () => {
    await client.request('PATCH', '/api/v1/nodes/worker-0/status', { body: { status: { allocatable: { 'ephemeral-storage': '1Mi' } } }, contentType: 'application/merge-patch+json' });
    try {
      const result = await runCli(['stage', RELEASE, ...registryFlags, '--name-prefix', 'small', ...kube]);
      expect(result.code).toBe(4);
      expect(result.stderr).toMatch(/^prestage: error: not enough ephemeral storage for the sets on 1 node\(s\): worker-0 \(1\.0 MiB allocatable < [\d.]+ MiB needed\)\n$/);
      expect(await client.find(`${MCO_PATHS.pinnedImageSets}/small-4.16.3-worker`)).toBeUndefined();
    } finally {
      await client.request('PATCH', '/api/v1/nodes/worker-0/status', { body: { status: { allocatable: { 'ephemeral-storage': String(120 * 2 ** 30) } } }, contentType: 'application/merge-patch+json' });
    }
  });

  it('refuses up front what MCO\'s own disk check would refuse (2 x compressed bytes against allocatable - 16 GiB), naming the node and figures; --force applies anyway', async () => {
    // Room for the set's 17.4 MiB on disk (prestage's own check), not for MCO's 2 x 11.8 MiB over its 16 GiB reserve.
    await client.request('PATCH', '/api/v1/nodes/worker-0/status', { body: { status: { allocatable: { 'ephemeral-storage': String(16 * 2 ** 30 + 20 * 2 ** 20) } } }, contentType: 'application/merge-patch+json' });
    try {
      const refused = await runCli(['stage', RELEASE, ...registryFlags, '--name-prefix', 'mcodisk', '--timeout', '60s', ...kube]);
      expect(refused.code).toBe(4);
      expect(refused.stderr).toMatch(/^prestage: error: MCO's disk check would refuse a set \(mcodisk-4\.16\.3-worker on worker-0: 2 x 11\.\d MiB compressed = 23\.\d MiB, not below 16\.0 GiB allocatable - 16 GiB\): free ephemeral storage on the node or pin fewer images at once \(--os-stream, --platform\), or --force to apply anyway\n$/);
      expect(await client.find(`${MCO_PATHS.pinnedImageSets}/mcodisk-4.16.3-worker`)).toBeUndefined();
      const forced = await runCli(['stage', RELEASE, ...registryFlags, '--name-prefix', 'mcodisk', '--timeout', '60s', '--force', ...kube]);
      expect(forced.code).toBe(0);
      expect(forced.stderr).toMatch(/^prestage: warning: MCO's disk check would refuse a set \(mcodisk-4\.16\.3-worker on worker-0: .*\); applying anyway \(--force\)$/m);
      expect(forced.stdout).toMatch(/^mcodisk-4\.16\.3-worker: 1\/1 nodes done {2}ready$/m);
    } finally {
      await client.request('PATCH', '/api/v1/nodes/worker-0/status', { body: { status: { allocatable: { 'ephemeral-storage': String(120 * 2 ** 30) } } }, contentType: 'application/merge-patch+json' });
      for (const role of ['worker', 'control-plane']) await client.request('DELETE', `${MCO_PATHS.pinnedImageSets}/mcodisk-4.16.3-${role}`).catch(() => undefined);
    }
  });

  it('plans, prints the size table, applies and waits until every node has both sets', async () => {
    const { controlPlane } = await plannedCounts();
    const result = await runCli(['stage', RELEASE, ...registryFlags, '--timeout', '60s', ...kube]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^SET +ROLE +IMAGES +COMPRESSED +ON DISK +SIZES$/m);
    expect(result.stdout).toContain(`pinnedimageset/prestage-4.16.3-control-plane created: ${controlPlane} images\n`);
    expect(result.stdout).toMatch(/^prestage-4\.16\.3-control-plane: 1\/1 nodes done {2}ready$/m);
    expect(result.stdout).toMatch(/^prestage-4\.16\.3-worker: 1\/1 nodes done {2}ready$/m);
    expect(result.stdout.indexOf('SET ')).toBeLessThan(result.stdout.indexOf('created'));
    expect(await imagesOf('prestage-4.16.3-control-plane')).toBe(controlPlane);
  });
});

describe('cluster access', () => {
  it('merges a KUBECONFIG list and honours --context; a cluster it cannot reach is exit 4, an unknown context exit 2', async () => {
    const broken = join(dir, 'broken.kubeconfig');
    writeFileSync(broken, JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'broken', cluster: { server: 'https://127.0.0.1:1' } }],
      users: [{ name: 'nobody', user: {} }],
      contexts: [{ name: 'broken', context: { cluster: 'broken', user: 'nobody' } }],
      'current-context': 'broken',
    }));
    const saved = process.env.KUBECONFIG;
    process.env.KUBECONFIG = `${broken}:${cluster.kubeconfigPath}`;
    try {
      const viaContext = await runCli(['status', '--context', 'testbed', '--backend', 'mco']);
      expect(viaContext.stderr).toBe('');
      expect(viaContext.code).toBe(0);
      expect(viaContext.stdout).toMatch(/^NODE +SET /);
      const unreachable = await runCli(['status', '--backend', 'mco']);
      expect(unreachable.code).toBe(4);
      expect(unreachable.stderr).toMatch(/^prestage: error: cannot reach the Kubernetes API at https:\/\/127\.0\.0\.1:1: /);
      const unknown = await runCli(['status', '--context', 'nope']);
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toBe('prestage: error: kubeconfig has no context nope\n');
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
  });
});

describe('preflight on MCO', () => {
  it("checks MCO's own disk rule from allocatable, and says it sees no listing of stored images: the sets done on a node count as stored", async () => {
    // The stages above left the release's sets done on every node.
    const result = await runCli(['preflight', RELEASE, ...registryFlags, '--link-rate', '20MiB/s', '-o', 'json', ...kube]);
    // The link's rate, said back in both units as stage says it (MCO cannot be capped: it paces the ETA).
    expect([result.code, result.stderr]).toEqual([0, 'link cap: 20 MiB/s = 21 MB/s (168 Mbit/s)\n']);
    const preflight = JSON.parse(result.stdout) as Preflight;
    expect([preflight.backend, preflight.verdict, preflight.reasons]).toEqual(['mco', 'GO', []]);
    // MCO reports no listing of a node's images: it says so, and counts the sets done there as stored.
    expect(preflight.nodes.map((node) => [node.node, node.storage.rule, node.heldFrom, node.present === node.images, node.fetchBytes])).toEqual([
      ['master-0', 'mco', 'sets', true, 0],
      ['worker-0', 'mco', 'sets', true, 0],
    ]);
    expect(preflight.assumptions.some((line) => /without an agent's listing of stored images .*: MCO reports none\): only the images of prestage sets done there count as stored; the bytes to fetch are an upper bound$/.test(line))).toBe(true);
    // MCO's rule: 2 x the compressed layers of what is not on the node, against allocatable less 16 GiB.
    for (const node of preflight.nodes) expect(node.storage).toEqual({ rule: 'mco', availableBytes: 120 * 2 ** 30, reserveBytes: 16 * 2 ** 30, neededBytes: 0 });
    expect(preflight.eta).toMatchObject({ seconds: 0, pullSeconds: 0, rateFrom: 'cap' });
  });
});
