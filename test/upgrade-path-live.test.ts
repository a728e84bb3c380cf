/**
 * `plan --to` on a live cluster finds the path by itself: the test bed's real API server with
 * OpenShift's own ClusterVersion CRD (github.com/openshift/api), a ClusterVersion whose
 * spec.upstream names the harness's update service and whose status offers only the next
 * z-stream, as the CVO writes it; the release images in the real docker-registry.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pushFixture } from '../fixtures/push.js';
import { buildReleasePath, PATH_VERSIONS, type ReleasePathFixture } from '../fixtures/release-path.js';
import { buildUpdateGraph } from '../fixtures/update-graph.js';
import { KubeClient } from '../src/kube/client.js';
import type { PathPlan } from '../src/plan/path-plan.js';
import type { Plan } from '../src/plan/types.js';
import { testbedBinaries } from './cluster/binaries.js';
import { COLD_BUILD_TIMEOUT_MS } from './cluster/index.js';
import { startControlPlane, type ControlPlane } from './cluster/control-plane.js';
import { startRegistry, startUpdateService, type RegistryHandle, type UpdateServiceHandle } from './harness/index.js';
import { installOpenShiftCrds, OPENSHIFT_4_21 } from './mco/crds.js';
import { runCli } from './support/cli.js';

const CONFIG = '/apis/config.openshift.io/v1';
let dir: string;
let fixture: ReleasePathFixture;
let registry: RegistryHandle;
let service: UpdateServiceHandle;
let api: ControlPlane;
let client: KubeClient;
let flags: string[];

const release = (version: string) => fixture.truth.releases.find((r) => r.version === version)!;
const byDigest = (version: string) => `quay.io/openshift-release-dev/ocp-release@${release(version).digest}`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-path-live-'));
  fixture = buildReleasePath();
  registry = await startRegistry({ storageDir: join(dir, 'registry') });
  await pushFixture(registry.url, fixture);
  service = await startUpdateService({ graphs: (channel) => (channel === 'eus-4.18' || channel === 'stable-4.16' ? buildUpdateGraph(fixture, channel) : undefined) });
  api = await startControlPlane(join(dir, 'control-plane'), await testbedBinaries());
  const config = new KubeConfig();
  config.loadFromFile(api.kubeconfigPath);
  client = new KubeClient(config);
  await installOpenShiftCrds(client, OPENSHIFT_4_21, 'config');
  // As the CVO writes it: the running release, and the one update it offers in the cluster's channel.
  await client.request('POST', `${CONFIG}/clusterversions`, {
    body: { apiVersion: 'config.openshift.io/v1', kind: 'ClusterVersion', metadata: { name: 'version' }, spec: { clusterID: '6c6e2a3c-8f0e-4b38-9c3a-0d8f2d1b7a11', channel: 'eus-4.18', upstream: `${service.url}/api/upgrades_info/v1/graph` } },
  });
  await client.request('PATCH', `${CONFIG}/clusterversions/version/status`, {
    contentType: 'application/merge-patch+json',
    body: {
      status: {
        desired: { version: '4.16.3', image: byDigest('4.16.3') },
        history: [{ state: 'Completed', version: '4.16.3', image: byDigest('4.16.3'), startedTime: '2026-11-01T00:00:00Z', completionTime: '2026-11-01T01:00:00Z', verified: true }],
        availableUpdates: [{ version: '4.16.8', image: byDigest('4.16.8') }],
        observedGeneration: 1,
        versionHash: 'abc',
        capabilities: {},
        conditions: [],
      },
    },
  });
  flags = ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host, '--kubeconfig', api.kubeconfigPath, '--no-cluster'];
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await api?.stop();
  await service?.close();
  await registry?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('plan --to on a cluster whose ClusterVersion names its update service', () => {
  it('a --to the cluster offers stays one hop, reading no graph', async () => {
    const before = service.requests.length;
    const r = await runCli(['plan', '--to', '4.16.8', ...flags, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as Plan).release.digest).toBe(release('4.16.8').digest);
    expect(service.requests.length).toBe(before);
  });

  it('a --to further away: the path over the graph spec.upstream names, from the version the cluster runs, in its channel', async () => {
    const r = await runCli(['plan', '--to', '4.18.2', ...flags, '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const path = JSON.parse(r.stdout) as PathPlan;
    expect([path.from, ...path.hops.map((h) => h.to)]).toEqual(PATH_VERSIONS);
    expect(path.channel).toBe('eus-4.18');
    expect(path.graph).toContain(service.url);
    expect(service.requests.at(-1)!.query).toMatchObject({ channel: 'eus-4.18', arch: 'amd64', version: '4.16.3' });
  });

  it('without spec.upstream it says how to name a graph', async () => {
    await client.request('PATCH', `${CONFIG}/clusterversions/version`, { contentType: 'application/merge-patch+json', body: { spec: { upstream: null } } });
    try {
      const r = await runCli(['plan', '--to', '4.18.2', ...flags]);
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toContain('--to 4.18.2: not an update this cluster offers; it offers 4.16.8 in channel eus-4.18');
      expect(r.stderr).toContain('name the update graph with --graph');
    } finally {
      await client.request('PATCH', `${CONFIG}/clusterversions/version`, { contentType: 'application/merge-patch+json', body: { spec: { upstream: `${service.url}/api/upgrades_info/v1/graph` } } });
    }
  });
});
