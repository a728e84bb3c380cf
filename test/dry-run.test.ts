/**
 * kubectl's dry runs on every command that changes a cluster or a registry, against the real
 * things: the test bed's kube-apiserver (OpenShift's MCO and config CRDs), a docker-registry with
 * the fixture release and an empty one as the mirror. Each dry run (client and server) is taken
 * between two snapshots of every object it could touch, name and resourceVersion, which must be
 * equal; bundle push's mirror must have received no write (its catalog and its request log).
 */
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MCO_PATHS } from '../src/cluster/mco/backend.js';
import { KubeClient, type KubeObject } from '../src/kube/client.js';
import type { Plan } from '../src/plan/types.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { installOpenShiftCrds, OPENSHIFT_4_21 } from './mco/crds.js';
import { testPlan, writePlan } from './mco/plans.js';
import { DEFAULT_POOLS } from './mco/simulator.js';
import { runCli, type CliResult } from './support/cli.js';
import { generateGpgKey, removeGpgKey, signRelease, startSignatureStore, type GpgKey, type SignatureStore } from './support/release-signing.js';

const truth = inject('fixtureTruth');
const RELEASE = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;
const CLUSTER_VERSION = '/apis/config.openshift.io/v1/clusterversions/version';
const SIGNATURES_NAMESPACE = 'openshift-config-managed';
/** Everything a dry run here could write: the sets, the pools, the CVO's ConfigMaps, ClusterVersion. */
const WATCHED = [MCO_PATHS.pinnedImageSets, MCO_PATHS.machineConfigPools, `/api/v1/namespaces/${SIGNATURES_NAMESPACE}/configmaps`, '/apis/config.openshift.io/v1/clusterversions'];

let work: string;
let source: RegistryHandle;
let mirror: RegistryHandle;
let cluster: TestCluster;
let client: KubeClient;
let store: SignatureStore;
let key: GpgKey;
let kube: string[];
let from: string[];
let bundle: string;

/** Every watched object as `path/name@resourceVersion`, with its labels and annotations. */
async function objects(): Promise<string[]> {
  const lists = await Promise.all(WATCHED.map(async (path) => (await client.get<{ items: KubeObject[] }>(path)).items.map((o) => `${path}/${o.metadata.name}@${o.metadata.resourceVersion} ${JSON.stringify([o.metadata.labels, o.metadata.annotations])}`)));
  return lists.flat().sort();
}

/** A run that must change nothing: the objects are the same before and after, and it succeeded. */
async function changesNothing(args: readonly string[]): Promise<CliResult> {
  const before = await objects();
  const result = await runCli(args);
  expect(result.stderr, args.join(' ')).not.toMatch(/error/);
  expect(result.code, `${args.join(' ')}\n${result.stderr}`).toBe(0);
  expect(await objects()).toEqual(before);
  return result;
}

/** The mirror's repositories, and every write request its log shows. */
async function mirrorWrites(): Promise<{ repositories: string[]; writes: string[] }> {
  const catalog = (await (await fetch(`${mirror.url}/v2/_catalog`)).json()) as { repositories: string[] | null };
  const log = await readFile(mirror.logFile, 'utf8');
  return { repositories: catalog.repositories ?? [], writes: log.split('\n').filter((line) => /http\.request\.method="?(PUT|POST|PATCH|DELETE)/.test(line)) };
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'prestage-dry-run-'));
  for (const plans of ['new', 'changed', 'same']) await mkdir(join(work, plans));
  [source, mirror] = await Promise.all([startRegistry({ storageDir: inject('fixtureStorageDir') }), startRegistry()]);
  from = ['--mirror', `quay.io=${source.host}`, '--insecure-registry', source.host];
  cluster = await startCluster({ workers: 1 });
  kube = ['--kubeconfig', cluster.kubeconfigPath, '--backend', 'mco'];
  client = new KubeClient(cluster.kubeConfig);
  await installOpenShiftCrds(client, OPENSHIFT_4_21, 'all');
  for (const pool of DEFAULT_POOLS) await client.request('POST', MCO_PATHS.machineConfigPools, { body: pool });
  await client.apply(`/api/v1/namespaces/${SIGNATURES_NAMESPACE}`, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: SIGNATURES_NAMESPACE } } as never, { fieldManager: 'test' });
  // Sets that are there already: a dry run of an apply that would change them, a pause, a prune.
  const kept = await runCli(['apply', writePlan(work, testPlan('kept')), ...kube]);
  expect([kept.code, kept.stderr]).toEqual([0, '']);
  const old = testPlan('old');
  const oldPlan: Plan = { ...old, release: { ...old.release, version: '4.16.2' } };
  const olds = await runCli(['apply', writePlan(work, oldPlan), ...kube]);
  expect([olds.code, olds.stderr]).toEqual([0, '']);

  // A bundle of the fixture release with its GPG signature, for push --apply's ConfigMap.
  key = await generateGpgKey('Release Signer');
  store = await startSignatureStore({ good: { [truth.release.image.digest]: [await signRelease(key, truth.release.image.digest, RELEASE)] } });
  const planned = await runCli(['plan', RELEASE, ...from, '-o', 'json']);
  expect(planned.code, planned.stderr).toBe(0);
  await writeFile(join(work, 'plan.json'), planned.stdout);
  bundle = join(work, 'bundle');
  const made = await runCli(['bundle', 'create', join(work, 'plan.json'), '--output-dir', bundle, ...from, '--signature-store', store.url('good'), '--verification-key', key.publicKeyFile, '--remove-signatures']);
  expect(made.code, made.stderr).toBe(0);
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await removeGpgKey(key);
  await cluster?.stop();
  await Promise.allSettled([source?.stop(), mirror?.stop(), store?.stop()]);
  if (work) await rm(work, { recursive: true, force: true });
});

describe('apply', () => {
  it('of new sets and of changed ones: client and server say what would happen, in kubectl\'s words, and change nothing', async () => {
    const changed = writePlan(join(work, 'changed'), testPlan('kept', { imageCount: 4 }));
    for (const mode of ['client', 'server'] as const) {
      const created = await changesNothing(['apply', writePlan(join(work, 'new'), testPlan('new')), `--dry-run=${mode}`, ...kube]);
      expect(created.stdout).toBe(`pinnedimageset/new-control-plane created: 3 images (${mode} dry run)\npinnedimageset/new-worker created: 2 images (${mode} dry run)\n${mode === 'client' ? 'Dry run (client): nothing sent to the cluster but reads; nothing changed.\n' : 'Dry run (checked by the API server): nothing changed.\n'}`);
      const configured = await changesNothing(['apply', changed, `--dry-run=${mode}`, ...kube]);
      expect(configured.stdout).toMatch(new RegExp(`^pinnedimageset/kept-worker configured: \\+1 -0 images \\(${mode} dry run\\)$`, 'm'));
      const same = await changesNothing(['apply', writePlan(join(work, 'same'), testPlan('kept')), `--dry-run=${mode}`, ...kube]);
      expect(same.stdout).toMatch(new RegExp(`^pinnedimageset/kept-worker unchanged \\(${mode} dry run\\)$`, 'm'));
    }
    // A bare --dry-run is client, as in kubectl; the flag before the source works too.
    const bare = await changesNothing(['apply', '--dry-run', changed, ...kube]);
    expect(bare.stdout).toContain('(client dry run)');
    expect(await client.find(`${MCO_PATHS.pinnedImageSets}/new-worker`)).toBeUndefined();
  });
});

describe('stage', () => {
  it('plans, checks and shows what it would apply, then stops: no set created, nothing waited for', async () => {
    for (const mode of ['client', 'server'] as const) {
      const result = await changesNothing(['stage', RELEASE, ...from, '--name-prefix', 'staged', `--dry-run=${mode}`, ...kube]);
      expect(result.stdout).toMatch(/^SET +ROLE +IMAGES /m);
      expect(result.stdout).toMatch(new RegExp(`^pinnedimageset/staged-4\\.16\\.3-worker created: \\d+ images \\(${mode} dry run\\)$`, 'm'));
      expect(result.stdout).not.toMatch(/nodes done/);
    }
    expect(await client.find(`${MCO_PATHS.pinnedImageSets}/staged-4.16.3-worker`)).toBeUndefined();
  });
});

describe('pause and resume', () => {
  it('client and server dry runs change nothing, on a set running and on one paused', async () => {
    for (const mode of ['client', 'server'] as const) {
      const paused = await changesNothing(['pause', 'kept-worker', `--dry-run=${mode}`, ...kube]);
      expect(paused.stdout).toMatch(/^would pause kept-worker/);
    }
    const pause = await runCli(['pause', 'kept-worker', ...kube]);
    expect([pause.code, pause.stderr]).toEqual([0, '']);
    for (const mode of ['client', 'server'] as const) {
      const resumed = await changesNothing(['resume', 'kept-worker', `--dry-run=${mode}`, ...kube]);
      expect(resumed.stdout).toMatch(/^would resume kept-worker/);
    }
    const resume = await runCli(['resume', 'kept-worker', ...kube]);
    expect([resume.code, resume.stderr]).toEqual([0, '']);
  });
});

describe('bundle push', () => {
  const push = (mode: string, out: string) => ['bundle', 'push', bundle, mirror.host, '--insecure-registry', mirror.host, '--output-dir', out, '--verification-key', key.publicKeyFile, '--apply', ...kube.slice(0, 2), `--dry-run=${mode}`];

  it('server reads the mirror only and sends --apply\'s ConfigMap with dryRun=All; client sends nothing; neither writes a file', async () => {
    const out = join(work, 'push-out');
    await mkdir(out);
    const server = await changesNothing(push('server', out));
    expect(server.stdout).toMatch(/^would push \d+ images to 127\.0\.0\.1:\d+: blobs [1-9]\d* to upload \([\d.]+ \w+\), \d+ to mount, 0 present; manifests [1-9]\d* to push, 0 present; tags 1 to write, 0 present \(server dry run\)$/m);
    expect(server.stdout).toMatch(/^configmap\/\S+ created \(server dry run\) \(namespace openshift-config-managed\)$/m);
    expect(server.stdout).toMatch(/^Dry run \(server\): the mirror was only read/m);
    const client = await changesNothing(push('client', out));
    expect(client.stdout).toMatch(/^would push \d+ images to 127\.0\.0\.1:\d+: blobs [1-9]\d* to upload \([\d.]+ \w+\), \d+ to mount; manifests [1-9]\d* to push; tags 1 to write \(client dry run\)$/m);
    expect(client.stdout).toMatch(/^configmap\/\S+ would be applied \(client dry run\)/m);
    expect(await readdir(out)).toEqual([]);
    expect(await mirrorWrites()).toEqual({ repositories: [], writes: [] });

    // Pushed for real, a server dry run finds everything there and would send nothing.
    const real = await runCli(['bundle', 'push', bundle, mirror.host, '--insecure-registry', mirror.host, '--output-dir', out, '--verification-key', key.publicKeyFile]);
    expect(real.code, real.stderr).toBe(0);
    expect((await mirrorWrites()).writes.length).toBeGreaterThan(0);
    const again = await changesNothing(push('server', out));
    expect(again.stdout).toMatch(/blobs 0 to upload \(0 B\), 0 to mount, [1-9]\d* present; manifests 0 to push, [1-9]\d* present; tags 0 to write, 1 present \(server dry run\)/);
  });
});

describe('prune', () => {
  it('of the sets of a release older than the one the cluster runs: client and server dry runs delete nothing', async () => {
    await client.request('POST', '/apis/config.openshift.io/v1/clusterversions', { body: { apiVersion: 'config.openshift.io/v1', kind: 'ClusterVersion', metadata: { name: 'version' }, spec: { clusterID: '00000000-0000-0000-0000-000000000001' } } });
    await client.request('PATCH', `${CLUSTER_VERSION}/status`, {
      body: { status: { desired: { version: '4.16.3', image: RELEASE }, history: [{ state: 'Completed', version: '4.16.3', image: RELEASE, startedTime: '2024-07-02T09:00:00Z', completionTime: '2024-07-02T10:00:00Z', verified: true }], availableUpdates: [], versionHash: 'x', observedGeneration: 1 } },
      contentType: 'application/merge-patch+json',
    });
    for (const mode of ['client', 'server'] as const) {
      const pruned = await changesNothing(['prune', `--dry-run=${mode}`, ...kube]);
      expect(pruned.stdout).toMatch(/; would delete 2 sets of older releases/);
      if (mode === 'server') expect(pruned.stdout).toMatch(/^pinnedimageset\/old-worker deleted \(server dry run\)$/m);
    }
    // The machine formats: one document, or the names, on stdout; the dry run still changes nothing.
    const json = await changesNothing(['prune', '--dry-run=server', '-o', 'json', ...kube]);
    const result = JSON.parse(json.stdout) as { current: string; dryRun: string; prune: Array<{ name: string; release: string; result?: string }>; kept: Array<{ name: string; release?: string }> };
    expect(result.current).toBe('4.16.3');
    expect(result.dryRun).toBe('server');
    expect(result.prune.map((set) => [set.name, set.release, set.result]).sort()).toEqual([['old-control-plane', '4.16.2', 'deleted'], ['old-worker', '4.16.2', 'deleted']]);
    expect(result.kept.map((set) => set.name).sort()).toEqual(['kept-control-plane', 'kept-worker']);
    const yamlRun = await changesNothing(['prune', '--dry-run=client', '-oyaml', ...kube]);
    expect(yaml.load(yamlRun.stdout)).toMatchObject({ current: '4.16.3', dryRun: 'client', prune: result.prune.map(({ result: _sent, ...set }) => set) });
    const names = await changesNothing(['prune', '--dry-run=client', '-o', 'name', ...kube]);
    expect(names.stdout.split('\n').filter(Boolean).sort()).toEqual(['pinnedimageset/old-control-plane', 'pinnedimageset/old-worker']);
    expect(await client.find(`${MCO_PATHS.pinnedImageSets}/old-worker`)).toBeDefined();
  });
});

describe('plan -o name', () => {
  it('prints pinnedimageset/NAME per set of the plan, as kubectl -o name does, and nothing else on stdout', async () => {
    const plan = JSON.parse(await readFile(join(work, 'plan.json'), 'utf8')) as Plan;
    const names = await runCli(['plan', RELEASE, ...from, '-o', 'name']);
    expect(names.code, names.stderr).toBe(0);
    expect(plan.sets.length).toBeGreaterThan(0);
    expect(names.stdout).toBe(plan.sets.map((set) => `pinnedimageset/${set.name}\n`).join(''));
  });
});
