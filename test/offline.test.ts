/**
 * The proof the mission asks for: after `stage`, the registry can disappear.
 *
 * On the real test bed (kube-apiserver, one CRI-O per node, a real `prestage agent` per node with
 * a pod-bound token), the fixture release is staged from a docker-registry that CRI-O reaches as
 * its quay.io mirror. Then every registry is STOPPED (the fixture's and the one serving the pause
 * image; there is no cache, and CRI-O's fallback to quay.io itself has nowhere to go), proven
 * down, and only then are REAL kubelets (v1.34, test/cluster/kubelet.ts) started on the
 * control-plane node and on a worker. Pods bound to each node with `imagePullPolicy:
 * IfNotPresent` run images of the set that targets their node: each runs from local storage
 * (the kubelet's "already present on machine", its imageID the staged digest). The same
 * control-plane-only image on the worker fails to pull (ErrImagePull/ImagePullBackOff): the split
 * was applied, not skipped. Then `prestage verify` in both modes on the same bed: VERIFIED with the
 * registry down; an image removed by hand (CRI RemoveImage) on the worker makes it NOT VERIFIED
 * naming that node and image (exit 1); an agent that does not answer is exit 124.
 *
 * The fixture images have no runnable entrypoint: each container runs a static busybox mounted
 * from the host (`sleep`), on the image's own root filesystem.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import { KubeClient, type KubeObject } from '../src/kube/client.js';
import { MCO_GROUP } from '../src/cluster/mco/backend.js';
import { CriClient } from '../src/cri/client.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { KubeletBed, pushPauseImage } from './cluster/kubelet.js';
import { waitFor, type Daemon } from './cluster/processes.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { installMcoCrds } from './mco/crds.js';
import { DEFAULT_POOLS } from './mco/simulator.js';
import { pinState, startNodeAgent } from './support/agent-bed.js';
import { runCli } from './support/cli.js';

const truth = inject('fixtureTruth');
const VERSION = truth.release.version;
const CONTROL_PLANE_SET = `prestage-${VERSION}-control-plane`;
const WORKER_SET = `prestage-${VERSION}-worker`;
const NAMESPACE = 'prestage';
const PODS = 'offline';
const BUSYBOX = '/prestage-testbed/busybox';

let dir: string;
let registry: RegistryHandle;
/** Serves only the pause image (a busybox sleep); stopped with the fixture's. */
let pauseRegistry: RegistryHandle;
let pauseImage: string;
let cluster: TestCluster;
let client: KubeClient;
let core: CoreV1Api;
let kube: string[];
let kubelets: KubeletBed;
const agents = new Map<string, Daemon>();
let master: TestNode;
let worker: TestNode;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-offline-'));
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  pauseRegistry = await startRegistry();
  cluster = await startCluster({ workers: 1, registryMirrors: { 'quay.io': registry.host }, insecureRegistries: [registry.host, pauseRegistry.host] });
  client = new KubeClient(cluster.kubeConfig);
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  kube = ['--kubeconfig', cluster.kubeconfigPath];
  master = cluster.nodes.find((n) => n.role === 'control-plane')!;
  worker = cluster.nodes.find((n) => n.role === 'worker')!;
  const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--apply', ...kube]);
  expect(installed.stderr).toBe('');
  // CRI-O made able to run containers first (it restarts), the pause image pulled while a registry serves it.
  kubelets = new KubeletBed(cluster);
  pauseImage = await pushPauseImage(pauseRegistry.host, cluster.binaries.busybox);
  for (const node of [master, worker]) {
    await kubelets.runContainers(node, { pauseImage });
    const cri = await CriClient.connect(node.crio.socketPath);
    await cri.pullImage(pauseImage).finally(() => cri.close());
  }
  for (const node of cluster.nodes) agents.set(node.name, await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, args: ['--concurrency', '4', '--control-plane-concurrency', '4'] }));
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.allSettled([...agents.values()].map((agent) => agent.stop(30_000)));
  await kubelets?.stop();
  await cluster?.stop();
  await registry?.stop();
  await pauseRegistry?.stop();
  if (dir && !process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
}, 120_000);

const imagesOf = async (set: string) => (await client.get<{ spec: { pinnedImages: Array<{ name: string }> } }>(`${AGENT_PATHS.pinnedImageSets}/${set}`)).spec.pinnedImages.map((i) => i.name);

/** stdout and stderr of a run, for the record (the docs show these). */
function show(what: string, result: { stdout: string; stderr: string; code: number }): void {
  console.log(`$ ${what}  (exit ${result.code})\n${result.stdout}${result.stderr}`);
}

/** A Pod bound to `node` directly (no scheduler), running `image` from local storage if present. */
async function createPod(name: string, node: TestNode, image: string): Promise<void> {
  await core.createNamespacedPod({
    namespace: PODS,
    body: {
      metadata: { name },
      spec: {
        nodeName: node.name,
        automountServiceAccountToken: false,
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 0,
        // The image's own root filesystem, with a static busybox from the host to have something to run.
        containers: [{ name: 'staged', image, imagePullPolicy: 'IfNotPresent', command: [BUSYBOX, 'sleep', '3600'], volumeMounts: [{ name: 'busybox', mountPath: BUSYBOX, readOnly: true }] }],
        volumes: [{ name: 'busybox', hostPath: { path: cluster.binaries.busybox, type: 'File' } }],
      },
    },
  });
}

const pod = (name: string): Promise<V1Pod> => core.readNamespacedPod({ namespace: PODS, name });

async function eventsOf(name: string): Promise<Array<{ reason: string; message: string }>> {
  const events = await core.listNamespacedEvent({ namespace: PODS, fieldSelector: `involvedObject.name=${name}` });
  return events.items.map((event) => ({ reason: event.reason ?? '', message: event.message ?? '' }));
}

let removed: string;
let controlPlaneOnly: string[];
let workerImages: string[];
/** A worker-set image the control-plane set has too (the release's all-nodes images): a Pod runs it on both nodes. */
let everywhere: string;

describe('after stage, the registry can disappear', () => {
  it(`stages ${VERSION} on a control-plane node and a worker with the real agents`, async () => {
    const started = Date.now();
    const staged = await runCli(['stage', truth.release.pullSpec, '--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host, '--timeout', '15m', ...kube]);
    console.log(`stage: ${Math.round((Date.now() - started) / 1000)} s`);
    expect(staged.stderr).toBe('');
    expect(staged.code).toBe(0);
    expect(staged.stdout).toMatch(new RegExp(`^${CONTROL_PLANE_SET}: 1/1 nodes done\\b.* ready$`, 'm'));
    expect(staged.stdout).toMatch(new RegExp(`^${WORKER_SET}: 1/1 nodes done\\b.* ready$`, 'm'));
    workerImages = await imagesOf(WORKER_SET);
    const inWorkerSet = new Set(workerImages);
    const controlPlaneImages = await imagesOf(CONTROL_PLANE_SET);
    controlPlaneOnly = controlPlaneImages.filter((image) => !inWorkerSet.has(image));
    everywhere = workerImages.find((image) => controlPlaneImages.includes(image))!;
    expect(everywhere).toBeDefined();
    // The plan split the release: images only the control plane gets, and images the workers get.
    expect(controlPlaneOnly.length).toBeGreaterThan(10);
    expect(workerImages.length).toBeGreaterThan(10);
    expect(Object.values(await pinState(worker, controlPlaneOnly)).every((state) => state === 'absent')).toBe(true);
  }, 16 * 60_000);

  it('with every registry stopped, real kubelets start Pods from local storage on the nodes the sets target; a control-plane-only image on the worker fails to pull', async () => {
    await registry.stop();
    await pauseRegistry.stop();
    // Down: nothing answers where CRI-O would pull from (its quay.io mirror, the pause image's registry).
    for (const host of [registry.host, pauseRegistry.host]) {
      await expect(fetch(`http://${host}/v2/`, { signal: AbortSignal.timeout(5_000) }), host).rejects.toThrow();
    }

    for (const node of [master, worker]) await kubelets.start(node);
    await core.createNamespace({ body: { metadata: { name: PODS } } });
    // Pod admission needs the namespace's default ServiceAccount (no controller manager here to make it).
    await core.createNamespacedServiceAccount({ namespace: PODS, body: { metadata: { name: 'default' } } });

    // A component the plan gives the control plane only (not the release image itself).
    const onlyControlPlane = controlPlaneOnly.find((image) => !image.includes(`/${truth.releaseRepository}@`));
    expect(onlyControlPlane).toBeDefined();
    const runs: Array<[string, TestNode, string]> = [
      ['control-plane-only-on-master', master, onlyControlPlane!],
      ['all-nodes-on-master', master, everywhere],
      ['worker-set-on-worker', worker, everywhere],
    ];
    for (const [name, node, image] of runs) await createPod(name, node, image);
    await createPod('control-plane-only-on-worker', worker, onlyControlPlane!);

    for (const [name, node, image] of runs) {
      const running = await waitFor(`${name} to run`, async () => {
        const status = (await pod(name)).status;
        const container = status?.containerStatuses?.[0];
        if (container?.state?.waiting?.reason && /ErrImagePull|BackOff|Error/.test(container.state.waiting.reason)) throw new Error(`${name}: ${container.state.waiting.reason}: ${container.state.waiting.message}`);
        return container?.state?.running ? status : undefined;
      }, 120_000, 500);
      const container = running.containerStatuses![0]!;
      // The staged image, by digest, from the node's store: the kubelet pulled nothing.
      expect(container.image, name).toBe(image);
      expect(container.imageID, name).toContain(image.slice(image.indexOf('@')));
      expect(container.restartCount).toBe(0);
      const events = await eventsOf(name);
      expect(events, name).toContainEqual({ reason: 'Pulled', message: `Container image "${image}" already present on machine` });
      expect(events.filter((event) => event.reason === 'Pulling'), name).toEqual([]);
      expect((await pod(name)).spec?.nodeName).toBe(node.name);
    }

    // The worker set does not hold it, so the worker never pulled it, and now cannot.
    const failed = await waitFor('control-plane-only-on-worker to fail pulling', async () => {
      const waiting = (await pod('control-plane-only-on-worker')).status?.containerStatuses?.[0]?.state?.waiting;
      return waiting?.reason === 'ErrImagePull' || waiting?.reason === 'ImagePullBackOff' ? waiting : undefined;
    }, 120_000, 500);
    console.log(`control-plane-only image on the worker: ${failed.reason}: ${failed.message}`);
    expect((await eventsOf('control-plane-only-on-worker')).filter((event) => event.reason === 'Failed').map((event) => event.message).join('\n')).toMatch(/Failed to pull image/);
    expect((await pinState(worker, [onlyControlPlane!]))[onlyControlPlane!]).toBe('absent');
  }, 6 * 60_000);

  it('verify: VERIFIED with the registry down, asking every agent and on each node by CRI', async () => {
    const cluster = await runCli(['verify', VERSION, ...kube]);
    show(`prestage verify ${VERSION}`, cluster);
    expect(cluster.stderr).toBe('');
    expect(cluster.code).toBe(0);
    const images = { master: (await imagesOf(CONTROL_PLANE_SET)).length, worker: workerImages.length };
    expect(cluster.stdout.split('\n')).toEqual([
      expect.stringMatching(/^NODE +ROLE +SETS +IMAGES +PINNED +MISSING$/),
      expect.stringMatching(new RegExp(`^master-0 +control-plane,master +${CONTROL_PLANE_SET} +${images.master} +${images.master} +0$`)),
      expect.stringMatching(new RegExp(`^worker-0 +worker +${WORKER_SET} +${images.worker} +${images.worker} +0$`)),
      '',
      `VERIFIED ${VERSION}: every image of 2 sets present and pinned on all 2 nodes they target (${images.master + images.worker} images checked by CRI)`,
      '',
    ]);

    for (const node of [master, worker]) {
      const local = await runCli(['verify', VERSION, '--cri-socket', node.crio.socketPath, '--node-name', node.name, ...kube]);
      show(`prestage verify ${VERSION} --cri-socket ${node.crio.socketPath} --node-name ${node.name}`, local);
      expect(local.stderr).toBe('');
      expect(local.code).toBe(0);
      const set = node === master ? CONTROL_PLANE_SET : WORKER_SET;
      const count = node === master ? images.master : images.worker;
      expect(local.stdout).toContain(`\n\nVERIFIED ${VERSION}: every image of 1 set present and pinned on ${node.name} (${count} images checked by CRI)\n`);
    }
  }, 3 * 60_000);

  it('verify: an image removed by hand on the worker is NOT VERIFIED naming the node and the image (exit 1), in both modes', async () => {
    // Not the image a Pod runs (CRI-O refuses to remove an image in use).
    removed = workerImages.find((image) => image !== everywhere)!;
    const cri = await CriClient.connect(worker.crio.socketPath);
    try {
      await cri.removeImage(removed);
      expect(await cri.imageStatus(removed)).toBeNull();
    } finally {
      cri.close();
    }
    const cluster = await runCli(['verify', VERSION, ...kube]);
    show(`prestage verify ${VERSION}`, cluster);
    expect(cluster.code).toBe(1);
    expect(cluster.stdout).toMatch(new RegExp(`^worker-0 +worker +${WORKER_SET} +${workerImages.length} +${workerImages.length - 1} +1$`, 'm'));
    expect(cluster.stdout).toMatch(new RegExp(`^master-0 +control-plane,master +${CONTROL_PLANE_SET} +(\\d+) +\\1 +0$`, 'm'));
    expect(cluster.stderr).toBe(`prestage: error: NOT VERIFIED ${VERSION}: worker-0 misses 1 image (${removed})\n`);

    const local = await runCli(['verify', VERSION, '--cri-socket', worker.crio.socketPath, '--node-name', worker.name, ...kube]);
    show(`prestage verify ${VERSION} --cri-socket ... --node-name worker-0`, local);
    expect(local.code).toBe(1);
    expect(local.stderr).toBe(`prestage: error: NOT VERIFIED ${VERSION}: worker-0 misses 1 image (${removed})\n`);
    // -o json: the document on stdout, the verdict still exit 1 and the same line on stderr.
    const localJson = await runCli(['verify', VERSION, '--cri-socket', worker.crio.socketPath, '--node-name', worker.name, '-o', 'json', ...kube]);
    expect([localJson.code, localJson.stderr]).toEqual([1, local.stderr]);
    const document = JSON.parse(localJson.stdout) as { release: string; verified: boolean; untargeted: string[]; nodes: Array<{ node: string; sets: Array<{ name: string; missingCount: number; missing: string[] }> }> };
    expect([document.release, document.verified, document.untargeted]).toEqual([VERSION, false, []]);
    expect(document.nodes.map((n) => [n.node, n.sets.map((set) => [set.name, set.missingCount, set.missing])])).toEqual([[worker.name, [[WORKER_SET, 1, [removed]]]]]);
    // The control plane still has all of its own.
    const onMaster = await runCli(['verify', VERSION, '--cri-socket', master.crio.socketPath, '--node-name', master.name, ...kube]);
    expect([onMaster.code, onMaster.stderr]).toEqual([0, '']);
  }, 3 * 60_000);

  it('verify: a node whose agent does not answer is exit 124 naming it; no set of a version, or a bad socket, is exit 2 in one line', async () => {
    await agents.get(master.name)!.stop(30_000);
    agents.delete(master.name);
    const silent = await runCli(['verify', VERSION, '--timeout', '5', ...kube]);
    show(`prestage verify ${VERSION} --timeout 5`, silent);
    expect(silent.code).toBe(124);
    expect(silent.stderr).toMatch(new RegExp(`^prestage: error: verify ${VERSION.replace(/\./g, '\\.')}: no answer within 5 s from master-0 \\(is prestage agent running there\\?.*\\n$`));
    // The worker answered: its row is printed.
    expect(silent.stdout).toMatch(/^worker-0 +worker /m);

    const none = await runCli(['verify', '4.15.2', ...kube]);
    expect([none.code, none.stdout]).toEqual([2, '']);
    expect(none.stderr).toBe('prestage: error: verify 4.15.2: no prestage set of release 4.15.2 on the cluster, so nothing to verify; stage it first (prestage stage --to 4.15.2)\n');
    const socket = await runCli(['verify', VERSION, '--cri-socket', join(dir, 'nothing.sock'), ...kube]);
    expect([socket.code, socket.stdout]).toEqual([2, '']);
    expect(socket.stderr).toBe(`prestage: error: --cri-socket ${join(dir, 'nothing.sock')}: no such file; name the container runtime's socket on this node (CRI-O: /var/run/crio/crio.sock)\n`);
  }, 2 * 60_000);

  it("under MCO: verify asks for --cri-socket (exit 2, MCO's daemon makes no per-image check), and --cri-socket checks the node's sets as MCO's pools target them", async () => {
    // The cluster now serves MCO's PinnedImageSets (OpenShift 4.21's CRDs), with the master and
    // worker pools, and the release's sets as MCO sets (as `stage --backend mco` writes them).
    await installMcoCrds(client);
    for (const pool of DEFAULT_POOLS) await client.request('POST', `/apis/${MCO_GROUP}/v1/machineconfigpools`, { body: pool });
    for (const [name, role] of [[CONTROL_PLANE_SET, 'master'], [WORKER_SET, 'worker']] as const) {
      const set = await client.get<KubeObject & { spec: { pinnedImages: Array<{ name: string }> } }>(`${AGENT_PATHS.pinnedImageSets}/${name}`);
      await client.request('POST', `/apis/${MCO_GROUP}/v1/pinnedimagesets`, {
        body: {
          apiVersion: `${MCO_GROUP}/v1`,
          kind: 'PinnedImageSet',
          metadata: { name, labels: { ...set.metadata.labels, [`${MCO_GROUP}/role`]: role }, annotations: set.metadata.annotations },
          spec: { pinnedImages: set.spec.pinnedImages },
        },
      });
    }
    const asked = await runCli(['verify', VERSION, ...kube]);
    show(`prestage verify ${VERSION}  # on MCO`, asked);
    expect([asked.code, asked.stdout]).toEqual([2, '']);
    expect(asked.stderr).toBe(
      `prestage: error: verify ${VERSION}: on MCO, the machine-config-daemon reports per set and node only (MachineConfigNode), no per-image CRI check to ask for; run 'prestage verify ${VERSION} --cri-socket /var/run/crio/crio.sock' on each node (e.g. in a debug pod with the host's socket)\n`,
    );
    const onWorker = await runCli(['verify', VERSION, '--cri-socket', worker.crio.socketPath, '--node-name', worker.name, ...kube]);
    show(`prestage verify ${VERSION} --cri-socket ... --node-name worker-0  # on MCO`, onWorker);
    expect(onWorker.code).toBe(1);
    expect(onWorker.stdout).toMatch(new RegExp(`^worker-0 +worker +${WORKER_SET} +${workerImages.length} +${workerImages.length - 1} +1$`, 'm'));
    expect(onWorker.stderr).toBe(`prestage: error: NOT VERIFIED ${VERSION}: worker-0 misses 1 image (${removed})\n`);
    const onMaster = await runCli(['verify', VERSION, '--cri-socket', master.crio.socketPath, '--node-name', master.name, ...kube]);
    expect(onMaster.stderr).toBe('');
    expect(onMaster.code).toBe(0);
    expect(onMaster.stdout).toMatch(new RegExp(`^master-0 +control-plane,master +${CONTROL_PLANE_SET} +`, 'm'));
  }, 2 * 60_000);
});
