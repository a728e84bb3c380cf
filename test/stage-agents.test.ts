/**
 * End to end with the REAL agents: the test bed's kube-apiserver and three nodes (one control
 * plane, two workers), each with its own CRI-O mirroring quay.io to a docker-registry that
 * serves the fixture release; `prestage install --apply` as a user runs it; and one
 * `prestage agent` process per node, as the DaemonSet would run it (a pod-bound ServiceAccount
 * token, the node's CRI socket, drop-in and reload). Then `prestage stage`, `status`, `apply`
 * and `wait` as a user runs them. Pulls are real.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { API_VERSION } from '../src/api/prestage.js';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import type { ProgressSnapshot } from '../src/cluster/backend.js';
import { KubeClient } from '../src/kube/client.js';
import { CriClient } from '../src/cri/client.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { waitFor, type Daemon } from './cluster/processes.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { runCli } from './support/cli.js';
import { prestageEntry, prestageHelp, startPrestageProcess } from './support/prestage-process.js';
import { formatBytes } from '../src/units.js';
import { AGENT_NAME } from '../src/api/names.js';

const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
const CONTROL_PLANE_SET = 'prestage-4.16.3-control-plane';
const WORKER_SET = 'prestage-4.16.3-worker';
const NAMESPACE = 'prestage';
const DROP_IN = '50-prestage-pinned-images';
/** Parallel pulls per node: the default 1 on the control plane would pull ~150 images one by one. */
const CONCURRENCY = '4';
/** A digest no registry has, under the component repository the mirror serves. */
const MISSING = `quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:${'0badc0de'.repeat(8)}`;

const truth = inject('fixtureTruth');
let dir: string;
let registry: RegistryHandle;
let cluster: TestCluster;
let client: KubeClient;
let kube: string[];
const agents = new Map<string, Daemon>();
/** Whether this build's agent reads the node's registries.conf (mirrors) for exact image sizes. */
let agentReadsRegistriesConf = false;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-stage-agents-'));
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  // The operator catalog comes from registry.redhat.io, its bundles and images from quay.io.
  cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': registry.host, 'registry.redhat.io': `${registry.host}/registry.redhat.io` }, insecureRegistries: [registry.host] });
  client = new KubeClient(cluster.kubeConfig);
  kube = ['--kubeconfig', cluster.kubeconfigPath];
  // As a user installs it: CRDs, namespace, RBAC, admission policy, DaemonSet. No kubelet runs
  // the DaemonSet here, so the test starts its agents the way the DaemonSet's pods would run.
  const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--apply', ...kube]);
  expect(installed.stderr).toBe('');
  expect(installed.code).toBe(0);
  agentReadsRegistriesConf = (await prestageHelp('agent')).includes('--registries-conf');
  for (const node of cluster.nodes) await startAgent(node);
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.allSettled([...agents.values()].map((agent) => agent.stop(30_000)));
  await cluster?.stop();
  await registry?.stop();
  // PRESTAGE_TESTBED_KEEP keeps the agents' logs and kubeconfigs too.
  if (dir && !process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
});

/**
 * What the DaemonSet's pod on `node` would hold: a ServiceAccount token bound to a Pod on that
 * node (the admission policy reads the node name from it), in a kubeconfig file.
 */
async function agentKubeconfig(node: TestNode): Promise<string> {
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  const pod = await core.createNamespacedPod({
    namespace: NAMESPACE,
    body: {
      metadata: { generateName: `${AGENT_NAME}-`, labels: { app: AGENT_NAME } },
      spec: { nodeName: node.name, serviceAccountName: AGENT_NAME, containers: [{ name: 'agent', image: 'ghcr.io/prestage/prestage:test' }] },
    },
  });
  const token = await cluster.serviceAccountToken(NAMESPACE, AGENT_NAME, { boundPod: { name: pod.metadata!.name!, uid: pod.metadata!.uid! } });
  const path = join(dir, `${node.name}.kubeconfig`);
  await writeFile(path, cluster.kubeConfigForToken(token).exportConfig(), { mode: 0o600 });
  return path;
}

async function startAgent(node: TestNode): Promise<Daemon> {
  const pullSecret = join(dir, `${node.name}-config.json`);
  await writeFile(pullSecret, JSON.stringify({ auths: {} }));
  const agent = await startPrestageProcess({
    name: `prestage agent (${node.name})`,
    args: [
      'agent',
      '--node-name', node.name,
      '--kubeconfig', await agentKubeconfig(node),
      '--cri-socket', node.crio.socketPath,
      '--drop-in', join(node.crio.confDir, DROP_IN),
      '--reload', `pid:${node.crio.pid}`,
      '--pull-secret', pullSecret,
      '--reserve', '0',
      '--port', '0',
      '--concurrency', CONCURRENCY,
      '--control-plane-concurrency', CONCURRENCY,
      '--namespace', NAMESPACE,
      // The node's own registries.conf: where CRI-O finds quay.io (the test bed's mirror).
      ...(agentReadsRegistriesConf ? ['--registries-conf', join(dirname(node.crio.confDir), 'registries.conf')] : []),
    ],
    logPath: join(dir, `agent-${node.name}.log`),
    readyWhen: '"msg":"agent started"',
  });
  agents.set(node.name, agent);
  return agent;
}

async function stopAgent(node: TestNode): Promise<void> {
  await agents.get(node.name)?.stop(30_000);
  agents.delete(node.name);
}

const node = (name: string): TestNode => {
  const found = cluster.nodes.find((candidate) => candidate.name === name);
  if (!found) throw new Error(`no node ${name}`);
  return found;
};

/** `image -> pinned` as CRI ListImages on `testNode` reports it; 'absent' when not stored. */
async function criPins(testNode: TestNode, images: readonly string[]): Promise<Record<string, boolean | 'absent'>> {
  const cri = await CriClient.connect(testNode.crio.socketPath);
  try {
    const listed = await cri.listImages();
    return Object.fromEntries(images.map((image) => [image, listed.find((entry) => entry.repoDigests.includes(image))?.pinned ?? 'absent']));
  } finally {
    cri.close();
  }
}

const imagesOf = async (set: string) => (await client.get<{ spec: { pinnedImages: Array<{ name: string }> } }>(`${AGENT_PATHS.pinnedImageSets}/${set}`)).spec.pinnedImages.map((i) => i.name);

/** Images only the control-plane set has: not yet on the workers. */
async function controlPlaneOnlyImages(): Promise<string[]> {
  const worker = new Set(await imagesOf(WORKER_SET));
  return (await imagesOf(CONTROL_PLANE_SET)).filter((image) => !worker.has(image));
}

/** A hand-written PinnedImageSet for the worker role, applied with `prestage apply FILE`. */
async function applyWorkerSet(name: string, images: readonly string[]): Promise<void> {
  const file = join(dir, `${name}.yaml`);
  await writeFile(file, yaml.dump({
    apiVersion: API_VERSION,
    kind: 'PinnedImageSet',
    metadata: { name, labels: { 'machineconfiguration.openshift.io/role': 'worker' } },
    spec: { pinnedImages: images.map((image) => ({ name: image })) },
  }));
  const applied = await runCli(['apply', file, ...kube]);
  expect(applied.stderr).toBe('');
  expect(applied.code).toBe(0);
  expect(applied.stdout).toBe(`pinnedimageset/${name} created: ${images.length} images\n`);
}

describe('prestage stage with the real agents', () => {
  it('stages the whole release on 3 nodes: every set current on every node it targets, every image pinned in CRI-O', async () => {
    console.log(`agents run ${prestageEntry().built ? 'bin/prestage.js (dist/ is current)' : 'the sources through tsx (dist/ is stale)'}${agentReadsRegistriesConf ? ' with --registries-conf' : ''}`);
    // What the plan puts in each set, and its ON DISK figure per set (the planner's rule is tested in plan.test).
    const plan = await runCli(['plan', RELEASE, '--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host, '-o', 'json']);
    expect(plan.code).toBe(0);
    const plannedSets = new Map((JSON.parse(plan.stdout) as { sets: Array<{ name: string; diskBytes: number; images: string[] }> }).sets.map((set) => [set.name, set]));
    const onDisk = (set: string) => plannedSets.get(set)!.diskBytes;
    const count = (set: string) => plannedSets.get(set)!.images.length;
    const started = Date.now();
    const result = await runCli(['stage', RELEASE, '--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host, '--timeout', '15m', ...kube]);
    console.log(`stage: ${Math.round((Date.now() - started) / 1000)} s for ${truth.components.length} components on 3 nodes (concurrency ${CONCURRENCY})`);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^SET +ROLE +IMAGES +COMPRESSED +ON DISK +SIZES$/m);
    expect(result.stdout).toMatch(new RegExp(`^${CONTROL_PLANE_SET} +control-plane +${count(CONTROL_PLANE_SET)} `, 'm'));
    expect(result.stdout).toMatch(new RegExp(`^${WORKER_SET} +worker +${count(WORKER_SET)} `, 'm'));
    expect(result.stdout).toContain(`pinnedimageset/${CONTROL_PLANE_SET} created: ${count(CONTROL_PLANE_SET)} images\npinnedimageset/${WORKER_SET} created: ${count(WORKER_SET)} images\n`);
    expect(result.stdout).toMatch(new RegExp(`^${CONTROL_PLANE_SET}: 1/1 nodes done\\b.* ready$`, 'm'));
    expect(result.stdout).toMatch(new RegExp(`^${WORKER_SET}: 2/2 nodes done\\b.* ready$`, 'm'));
    expect(result.stdout.indexOf('SET ')).toBeLessThan(result.stdout.indexOf('created'));

    // Bytes: each node reports a set over its UNIQUE layers, exactly the plan's ON DISK figure
    // (not a sum over images, which counts the shared layers again per image).
    expect(result.stdout).toMatch(new RegExp(`^${CONTROL_PLANE_SET} +control-plane +${count(CONTROL_PLANE_SET)} +\\S+ \\S+ +${formatBytes(onDisk(CONTROL_PLANE_SET)).replace('.', '\\.')} `, 'm'));
    expect(result.stdout).toMatch(new RegExp(`^${CONTROL_PLANE_SET}: 1/1 nodes done  ${formatBytes(onDisk(CONTROL_PLANE_SET))}/${formatBytes(onDisk(CONTROL_PLANE_SET))}  ready$`, 'm'));
    expect(result.stdout).toMatch(new RegExp(`^${WORKER_SET}: 2/2 nodes done  ${formatBytes(2 * onDisk(WORKER_SET))}/${formatBytes(2 * onDisk(WORKER_SET))}  ready$`, 'm'));

    const status = await runCli(['status', '-o', 'json', ...kube]);
    expect(status.code).toBe(0);
    const snapshot = JSON.parse(status.stdout) as ProgressSnapshot & { backend: string };
    expect(snapshot.backend).toBe('agent');
    // The agent backend's selectors: the control-plane set on control-plane nodes, the worker
    // set on nodes that are neither control-plane nor master.
    const targets = Object.fromEntries(snapshot.sets.map((set) => [set.name, set.nodes.map((n) => n.node)]));
    expect(targets).toEqual({ [CONTROL_PLANE_SET]: ['master-0'], [WORKER_SET]: ['worker-0', 'worker-1'] });
    for (const set of snapshot.sets) {
      expect(set.generation).toBe(1);
      for (const n of set.nodes) {
        expect(n, `${set.name} on ${n.node}`).toMatchObject({ phase: 'done', desiredGeneration: 1, currentGeneration: 1, imagesTotal: n.imagesDone, bytes: onDisk(set.name), pulledBytes: onDisk(set.name) });
        expect(n.error).toBeUndefined();
      }
    }

    for (const set of snapshot.sets) {
      const images = await imagesOf(set.name);
      for (const n of set.nodes) {
        const pins = await criPins(node(n.node), images);
        expect(Object.entries(pins).filter(([, pinned]) => pinned !== true), `${set.name} on ${n.node}`).toEqual([]);
      }
    }
  }, 20 * 60_000);

  it('staging the same release again changes nothing and is ready at once', async () => {
    const result = await runCli(['stage', RELEASE, '--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host, '--timeout', '1m', ...kube]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`pinnedimageset/${CONTROL_PLANE_SET} unchanged\npinnedimageset/${WORKER_SET} unchanged\n`);
    expect(result.stdout).toMatch(new RegExp(`^${CONTROL_PLANE_SET}: 1/1 nodes done\\b.* ready$`, 'm'));
    expect(result.stdout).toMatch(new RegExp(`^${WORKER_SET}: 2/2 nodes done\\b.* ready$`, 'm'));
    expect(result.stdout).not.toMatch(/progressing|degraded/);
  });

  it('a set with an image no registry has: wait exits 1 after --fail-after with CRI-O\'s error for that image; the other image is pulled', async () => {
    const [good] = await controlPlaneOnlyImages();
    await applyWorkerSet('broken', [good!, MISSING]);

    const result = await runCli(['wait', 'broken', '--fail-after', '3s', '--timeout', '5m', ...kube]);
    expect(result.code).toBe(1);
    const escaped = MISSING.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    expect(result.stderr).toMatch(new RegExp(`^prestage: error: set broken failed on node worker-[01] \\(degraded for \\d+ s\\): image ${escaped}: .*manifest unknown.*\\n$`));
    expect(result.stdout).toMatch(new RegExp(`^\\S+ broken worker-[01]: degraded \\(generation 0/1\\) [01]/2 images\\b.*: image ${escaped}: `, 'm'));

    // wait failed on the first node past --fail-after; the other reports the same shortly.
    const set = await waitFor('both workers to report broken degraded', async () => {
      const status = await runCli(['status', 'broken', '-o', 'json', ...kube]);
      const [candidate] = (JSON.parse(status.stdout) as ProgressSnapshot).sets;
      return candidate?.nodes.every((n) => n.phase === 'degraded') ? candidate : undefined;
    }, 120_000, 500);
    expect(set.nodes.map((n) => n.node)).toEqual(['worker-0', 'worker-1']);
    for (const n of set.nodes) {
      expect(n.error).toMatch(new RegExp(`^image ${escaped}: .*manifest unknown`));
      // One bad image blocks nothing else: its sibling is pulled (maybe after wait gave up), but
      // not pinned, since the set is not satisfied.
      const expected = { [good!]: false, [MISSING]: 'absent' };
      await waitFor(`${good} pulled on ${n.node}`, async () => {
        const pins = await criPins(node(n.node), [good!, MISSING]);
        return pins[good!] === 'absent' ? undefined : pins;
      }, 120_000, 250);
      expect(await criPins(node(n.node), [good!, MISSING])).toEqual(expected);
    }
  }, 5 * 60_000);

  it('wait --timeout 2s on a set a node cannot finish exits 124 naming what it waits for; the restarted agent finishes it', async () => {
    const [, ...images] = await controlPlaneOnlyImages();
    const worker1 = node('worker-1');
    await stopAgent(worker1);
    await applyWorkerSet('late', images.slice(0, 2));

    const timedOut = await runCli(['wait', 'late', '--timeout', '2s', ...kube]);
    expect(timedOut.code).toBe(124);
    expect(timedOut.stderr).toMatch(/^prestage: error: timed out after 2 s: late [01]\/2 nodes done \(waiting on (worker-0 \w+; |worker-0, )?worker-1 pending\)\n$/);

    await startAgent(worker1);
    const finished = await runCli(['wait', 'late', '--timeout', '5m', ...kube]);
    expect(finished.stderr).toBe('');
    expect(finished.code).toBe(0);
    expect(finished.stdout).toMatch(/^late: 2\/2 nodes done .* ready$/m);
    expect(await criPins(worker1, images.slice(0, 2))).toEqual(Object.fromEntries(images.slice(0, 2).map((image) => [image, true])));
  }, 5 * 60_000);

  it('stages an operator beside the release: catalog and bundle images on every node, its operator image on the workers only', async () => {
    const catalog = inject('catalogTruth');
    const head = catalog.bundles.find((b) => b.name === 'datagrid-operator.v2.4.2')!;
    const result = await runCli([
      'stage', RELEASE, '--mirror', `quay.io=${registry.host}`, '--mirror', `registry.redhat.io=${registry.host}/registry.redhat.io`, '--insecure-registry', registry.host,
      '--catalog', catalog.reference, '--package', 'datagrid/stable@2.4.2', '--timeout', '5m', ...kube,
    ]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    for (const set of ['prestage-4.16.3-op-datagrid-control-plane', 'prestage-4.16.3-op-datagrid-worker']) expect(result.stdout).toMatch(new RegExp(`^pinnedimageset/${set} created: \\d+ images$`, 'm'));
    expect(result.stdout).toMatch(/^prestage-4\.16\.3-op-datagrid-control-plane: 1\/1 nodes done\b.* ready$/m);
    expect(result.stdout).toMatch(/^prestage-4\.16\.3-op-datagrid-worker: 2\/2 nodes done\b.* ready$/m);
    const byDigest = (reference: string, digest: string) => `${reference.replace(/[:@][^/]*$/, '')}@${digest}`;
    const bundleImage = byDigest(head.images[0]!.reference, head.images[0]!.digest);
    const operatorImage = byDigest(head.images[1]!.reference, head.images[1]!.digest);
    const catalogImage = `${catalog.reference.replace(/:[^/]*$/, '')}@${catalog.digest}`;
    for (const worker of ['worker-0', 'worker-1']) expect(await criPins(node(worker), [bundleImage, operatorImage, catalogImage])).toEqual({ [bundleImage]: true, [operatorImage]: true, [catalogImage]: true });
    expect(await criPins(node('master-0'), [bundleImage, catalogImage, operatorImage])).toEqual({ [bundleImage]: true, [catalogImage]: true, [operatorImage]: 'absent' });
  }, 10 * 60_000);

  it("the agents did all of it with the DaemonSet's pod-bound token: RBAC and the admission policy denied nothing", async () => {
    for (const testNode of cluster.nodes) {
      const log = await readFile(join(dir, `agent-${testNode.name}.log`), 'utf8');
      expect(log).toContain('"msg":"pulled"');
      // The errors logged, not every number in a line (a pull can take 403 ms).
      const errors = log.split('\n').filter(Boolean).map((line) => {
        try {
          return String((JSON.parse(line) as { err?: unknown }).err ?? '');
        } catch {
          return line;
        }
      });
      expect(errors.filter((error) => /\b403\b|forbidden/i.test(error)), testNode.name).toEqual([]);
    }
  });
});
