/**
 * The node agent on the real test bed: kube-apiserver with the prestage.dev CRDs, three nodes
 * (one control plane, two workers) each with a real CRI-O that mirrors quay.io to a registry
 * serving the fixture release, and one in-process agent per node.
 */
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { PassThrough } from 'node:stream';
import { dirname, join } from 'node:path';
import { ApiextensionsV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  API_VERSION,
  GROUP,
  NODE_PINNED_IMAGES,
  PINNED_IMAGE_SETS,
  VERSION,
  isSetDone,
  type NodePinnedImages,
  type PinnedImageSet,
  type PinnedImageSetStatus,
} from '../src/api/prestage.js';
import { DISK_BYTES_ANNOTATION } from '../src/api/set-metadata.js';
import { CrioRuntime, findCrioPid, renderPinDropIn } from '../src/agent/crio.js';
import { RegistryImageSizes } from '../src/agent/image-sizes.js';
import { KubeAgentCluster } from '../src/agent/kube.js';
import { NodeAgent } from '../src/agent/reconcile.js';
import { LeasePacer, PULL_SLOT_PREFIX, type PullPacer } from '../src/agent/pacing.js';
import type { ImageRuntime } from '../src/agent/runtime.js';
import { serveAgentHttp } from '../src/agent/http.js';
import { AgentMetrics } from '../src/agent/metrics.js';
import { main } from '../src/cli/main.js';
import { KubeClient } from '../src/kube/client.js';
import { applyServerSide, type Manifest } from '../src/install/apply.js';
import { createLogger } from '../src/telemetry/log.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { waitFor } from './cluster/processes.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { withCri } from './support/agent-bed.js';
import { CRDS } from '../src/api/prestage-crds.js';

const truth = inject('fixtureTruth');
/** The smallest fixture components: pulls stay quick. */
const [IMG_A, IMG_B, IMG_C, IMG_D, IMG_E, IMG_F, IMG_G, IMG_H] = [...truth.components]
  .sort((a, b) => a.layers.reduce((sum, l) => sum + l.size, 0) - b.layers.reduce((sum, l) => sum + l.size, 0))
  .slice(0, 8)
  .map((component) => component.pullSpec) as [string, string, string, string, string, string, string, string];

const DROP_IN = '99-prestage-pinned-images';

/** Uncompressed bytes of the unique layers of `images`, from the fixture's truth. */
function diskBytesOf(images: readonly string[]): number {
  const layers = new Map<string, number>();
  for (const image of images) {
    const component = truth.components.find((candidate) => candidate.pullSpec === image);
    if (!component) throw new Error(`no fixture component ${image}`);
    for (const layer of component.layers) layers.set(layer.digest, layer.uncompressedSize);
  }
  return [...layers.values()].reduce((sum, bytes) => sum + bytes, 0);
}
const log = createLogger(process.env.PRESTAGE_TEST_LOG ? 'debug' : 'silent');

let registry: RegistryHandle;
let cluster: TestCluster;
let objects: CustomObjectsApi;

interface RunningAgent {
  readonly node: TestNode;
  readonly agent: NodeAgent;
  readonly runtime: ImageRuntime;
  readonly view: KubeAgentCluster;
  stop(): Promise<void>;
}
const agents = new Map<string, RunningAgent>();
/** Per node: make the next reloads fail, as a broken crio.conf would. */
const failReload = new Map<string, boolean>();

/** The node's registries.conf and drop-in directory, as its CRI-O reads them (test/cluster/crio.ts). */
const registriesConfOf = (testNode: TestNode) => ({ registriesConf: join(dirname(testNode.crio.confDir), 'registries.conf'), registriesConfDir: join(dirname(testNode.crio.confDir), 'registries.conf.d') });

async function startAgent(node: TestNode, reserveBytes = 0, pacer?: PullPacer): Promise<RunningAgent> {
  const runtime = await CrioRuntime.connect({
    socketPath: node.crio.socketPath,
    dropInPath: join(node.crio.confDir, DROP_IN),
    reload: async () => {
      if (failReload.get(node.name)) throw new Error('injected: crio.service reload failed');
      await node.crio.reload();
    },
  });
  let agent: NodeAgent | undefined;
  // Events in `default`: the test bed has no prestage namespace here.
  const view = new KubeAgentCluster(new KubeClient(cluster.kubeConfig), node.name, log, () => agent?.trigger(), 'default');
  // Exact sizes for the disk check, read the way this node's CRI-O pulls (through the mirror).
  const imageSizes = new RegistryImageSizes({ ...registriesConfOf(node), log });
  agent = new NodeAgent({
    nodeName: node.name,
    runtime,
    cluster: view,
    imageSizes,
    log: log.child({ node: node.name }),
    concurrency: node.role === 'control-plane' ? 1 : 3,
    reserveBytes,
    resyncMs: 1_500,
    retry: { attempts: 3, initialDelayMs: 200, maxDelayMs: 1_000 },
    pacer,
  });
  await view.start();
  agent.start();
  const running: RunningAgent = {
    node,
    agent,
    runtime,
    view,
    stop: async () => {
      await agent.stop();
      await view.stop();
      await imageSizes.close();
      runtime.close();
      agents.delete(node.name);
    },
  };
  agents.set(node.name, running);
  return running;
}

beforeAll(async () => {
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': registry.host }, insecureRegistries: [registry.host] });
  objects = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
  await applyServerSide(cluster.kubeConfig, CRDS as unknown as Manifest[]);
  const extensions = cluster.kubeConfig.makeApiClient(ApiextensionsV1Api);
  for (const crd of CRDS) {
    await waitFor(`${crd.metadata.name} established`, async () => {
      const stored = await extensions.readCustomResourceDefinition({ name: crd.metadata.name });
      return stored.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ? true : undefined;
    });
  }
  for (const node of cluster.nodes) await startAgent(node);
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.all([...agents.values()].map((running) => running.stop()));
  await cluster?.stop();
  await registry?.stop();
});

const node = (name: string): TestNode => {
  const found = cluster.nodes.find((candidate) => candidate.name === name);
  if (!found) throw new Error(`no node ${name}`);
  return found;
};

function pinnedImageSet(name: string, images: readonly string[], spec: Partial<PinnedImageSet['spec']> = {}, annotations: Record<string, string> = {}): PinnedImageSet {
  return { apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name, annotations }, spec: { pinnedImages: images.map((image) => ({ name: image })), ...spec } };
}

const setAddress = { group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS };
const createSet = (set: PinnedImageSet) => objects.createClusterCustomObject({ ...setAddress, body: set });
const deleteSet = (name: string) => objects.deleteClusterCustomObject({ ...setAddress, name });

async function nodeStatus(nodeName: string): Promise<NodePinnedImages | undefined> {
  try {
    return (await objects.getClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: nodeName })) as NodePinnedImages;
  } catch (error) {
    if ((error as { code?: number }).code === 404) return undefined;
    throw error;
  }
}

async function waitForSet(nodeName: string, setName: string, until: (set: PinnedImageSetStatus) => boolean, what: string): Promise<PinnedImageSetStatus> {
  return waitFor(`${setName} on ${nodeName}: ${what}`, async () => {
    const set = (await nodeStatus(nodeName))?.status?.pinnedImageSets?.find((candidate) => candidate.name === setName);
    return set && until(set) ? set : undefined;
  }, 60_000, 250);
}

/** `image -> pinned` for the given images as CRI ListImages reports them; absent images are missing. */
async function criPins(testNode: TestNode, images: readonly string[]): Promise<Record<string, boolean | 'absent'>> {
  const listed = await withCri(testNode, (cri) => cri.listImages());
  return Object.fromEntries(images.map((image) => [image, listed.find((entry) => entry.repoDigests.includes(image))?.pinned ?? 'absent']));
}

const dropIn = (testNode: TestNode) => readFile(join(testNode.crio.confDir, DROP_IN), 'utf8').catch(() => null);

/**
 * The ImageRuntime contract: what the agent relies on, whatever the runtime. Every
 * implementation runs this same suite (a containerd runtime would add one call below).
 */
function imageRuntimeContract(name: string, open: () => Promise<ImageRuntime>) {
  describe(`ImageRuntime contract: ${name}`, () => {
    let runtime: ImageRuntime;
    const listed = async (image: string) => (await runtime.listImages()).find((entry) => entry.repoDigests.includes(image));
    beforeAll(async () => {
      runtime = await open();
    });
    afterAll(() => runtime?.close());

    it('pulls by digest and lists the image, unpinned, with its size', async () => {
      await runtime.pull(IMG_F);
      expect(await listed(IMG_F)).toMatchObject({ pinned: false, repoDigests: [IMG_F] });
      expect((await listed(IMG_F))!.size).toBeGreaterThan(0);
    });

    it('pins exactly the given list, and unpins with an empty one without removing the image', async () => {
      await runtime.pin([IMG_F, IMG_F]);
      expect((await listed(IMG_F))?.pinned).toBe(true);
      await runtime.pin([IMG_F]);
      expect((await listed(IMG_F))?.pinned).toBe(true);
      await runtime.pin([]);
      expect(await listed(IMG_F)).toMatchObject({ pinned: false });
    });

    it('reports the capacity and free bytes of its image filesystem', async () => {
      const filesystem = await runtime.imageFilesystem();
      expect(filesystem.capacityBytes).toBeGreaterThan(0);
      expect(filesystem.freeBytes).toBeGreaterThan(0);
      expect(filesystem.freeBytes).toBeLessThanOrEqual(filesystem.capacityBytes);
    });
  });
}

const CONTRACT_DROP_IN = '10-contract-pins';
imageRuntimeContract('CRI-O', async () => {
  const master = node('master-0');
  // The default reload: SIGHUP to the CRI-O that /proc shows reading this drop-in directory.
  return CrioRuntime.connect({ socketPath: master.crio.socketPath, dropInPath: join(master.crio.confDir, CONTRACT_DROP_IN) });
});

describe('CRI-O runtime', () => {
  it('keeps pins in one sorted drop-in, rewrites nothing for an unchanged list, and deletes it when empty', async () => {
    const master = node('master-0');
    const path = join(master.crio.confDir, CONTRACT_DROP_IN);
    const runtime = await CrioRuntime.connect({ socketPath: master.crio.socketPath, dropInPath: path, reload: () => master.crio.reload() });
    try {
      await runtime.pin([IMG_F, IMG_F]);
      expect(await readFile(path, 'utf8')).toBe(renderPinDropIn([IMG_F]));
      const before = (await stat(path)).mtimeMs;
      await runtime.pin([IMG_F]);
      expect((await stat(path)).mtimeMs).toBe(before);
      await runtime.pin([]);
      await expect(stat(path)).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      runtime.close();
    }
  });
});

describe('CRI-O reload', () => {
  it('finds, among several CRI-Os in /proc, the one that reads the drop-in directory', async () => {
    for (const testNode of cluster.nodes) expect(await findCrioPid(testNode.crio.confDir)).toBe(testNode.crio.pid);
    // Other test beds may run CRI-Os too: every pid this one runs is named, none picked.
    const error = (await findCrioPid(cluster.dir).catch((caught: Error) => caught)) as Error;
    expect(error.message).toMatch(new RegExp(`^cannot find the CRI-O process that reads ${cluster.dir} in /proc \\(crio pids [\\d, ]+ name other --config-dir directories\\); or pass --reload=systemctl\\|pidfile:<path>$`));
    for (const testNode of cluster.nodes) expect(error.message).toContain(String(testNode.crio.pid));
  });

  it('reloads again when the drop-in is right but CRI-O never read it, and not when the pins are in force', async () => {
    const master = node('master-0');
    const path = join(master.crio.confDir, CONTRACT_DROP_IN);
    let reloads = 0;
    const runtime = await CrioRuntime.connect({ socketPath: master.crio.socketPath, dropInPath: path, reload: async () => {
      reloads += 1;
      await master.crio.reload();
    } });
    try {
      await runtime.pull(IMG_F);
      // What an agent that died between writing and reloading leaves behind.
      await writeFile(path, renderPinDropIn([IMG_F]));
      expect((await criPins(master, [IMG_F]))[IMG_F]).toBe(false);
      await runtime.pin([IMG_F]);
      expect(reloads).toBe(1);
      expect((await criPins(master, [IMG_F]))[IMG_F]).toBe(true);
      await runtime.pin([IMG_F]);
      expect(reloads).toBe(1);
      await runtime.pin([]);
      expect((await criPins(master, [IMG_F]))[IMG_F]).toBe(false);
    } finally {
      runtime.close();
    }
  });
});

describe("the agent's view of the cluster", () => {
  it('reports no change before its Node is seen (a pass could not select sets), then one once it is', async () => {
    const name = 'joining-0';
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    // A set for the joining node only: listed at start, so its ADD comes before the Node exists.
    await createSet(pinnedImageSet('for-joining-node', [IMG_A], { nodeSelector: { matchLabels: { 'kubernetes.io/hostname': name } } }));
    let changes = 0;
    const view = new KubeAgentCluster(new KubeClient(cluster.kubeConfig), name, log, () => (changes += 1));
    try {
      await view.start();
      await new Promise((resolve) => setImmediate(resolve));
      expect(view.pinnedImageSets().map((set) => set.metadata.name)).toContain('for-joining-node');
      expect(view.loaded()).toBe(false);
      expect(view.waitingFor()).toBe(`Node ${name} (not in the cluster)`);
      expect(changes).toBe(0);

      await core.createNode({ body: { metadata: { name, labels: { 'kubernetes.io/hostname': name } } } });
      await view.untilLoaded();
      expect(view.loaded()).toBe(true);
      expect(changes).toBeGreaterThanOrEqual(1);
      expect(view.nodeLabels()).toEqual({ 'kubernetes.io/hostname': name });
    } finally {
      await view.stop();
      await core.deleteNode({ name }).catch(() => undefined);
      await deleteSet('for-joining-node');
    }
  });
});

describe("the agent's view of the sets and of its status", () => {
  it("reports a set's spec change, not a status the set-status writer wrote", async () => {
    // Selecting no node: no agent pulls for it.
    await createSet(pinnedImageSet('status-only', [IMG_A], { nodeSelector: { matchLabels: { 'kubernetes.io/hostname': 'no-such-node' } } }));
    let changes = 0;
    const view = new KubeAgentCluster(new KubeClient(cluster.kubeConfig), 'worker-0', log, () => (changes += 1));
    const client = new KubeClient(cluster.kubeConfig);
    const patch = (path: string, body: unknown) => client.request('PATCH', path, { body, contentType: 'application/merge-patch+json' });
    const path = `/apis/${GROUP}/${VERSION}/${PINNED_IMAGE_SETS}/status-only`;
    try {
      await view.start();
      await view.untilLoaded();
      const afterLoad = changes;
      const version = () => view.pinnedImageSets().find((set) => set.metadata.name === 'status-only')?.metadata.resourceVersion;
      const before = version();
      await patch(`${path}/status`, { status: { observedGeneration: 1, nodes: 7, readyNodes: 0 } });
      await waitFor('the status write seen', async () => (version() !== before ? true : undefined), 10_000, 100);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(changes).toBe(afterLoad);
      await patch(path, { spec: { pinnedImages: [{ name: IMG_A }, { name: IMG_B }] } });
      await waitFor('the spec change reported', async () => (changes > afterLoad ? true : undefined), 10_000, 100);
    } finally {
      await view.stop();
      await deleteSet('status-only');
    }
  });

  it('writes its status over a status someone else wrote meanwhile, and over its object deleted meanwhile', async () => {
    const name = 'status-writer-0';
    const view = new KubeAgentCluster(new KubeClient(cluster.kubeConfig), name, log, () => undefined);
    const client = new KubeClient(cluster.kubeConfig);
    const path = `/apis/${GROUP}/${VERSION}/${NODE_PINNED_IMAGES}/${name}`;
    const free = (freeBytes: number) => ({ imageFilesystem: { capacityBytes: 1000, freeBytes } });
    try {
      await view.writeStatus(free(1));
      expect((await nodeStatus(name))?.status?.imageFilesystem?.freeBytes).toBe(1);
      // Another writer: the agent's next write goes over the object its last one returned, and must conflict, read again and win.
      await client.request('PATCH', `${path}/status`, { body: { status: { imageFilesystem: { capacityBytes: 1000, freeBytes: 99 } } }, contentType: 'application/merge-patch+json' });
      await view.writeStatus(free(2));
      expect((await nodeStatus(name))?.status?.imageFilesystem?.freeBytes).toBe(2);
      await client.request('DELETE', path);
      await view.writeStatus(free(3));
      const again = await nodeStatus(name);
      expect(again?.status?.imageFilesystem?.freeBytes).toBe(3);
      expect(again?.status?.observedGeneration).toBe(again?.metadata.generation);
    } finally {
      await view.stop();
      await client.request('DELETE', path).catch(() => undefined);
    }
  });
});

describe("the agent's view of its Node", () => {
  it('reports a Node update only when its labels change, not for status the kubelet rewrites', async () => {
    let changes = 0;
    const view = new KubeAgentCluster(new KubeClient(cluster.kubeConfig), 'worker-0', log, () => (changes += 1), 'default');
    const client = new KubeClient(cluster.kubeConfig);
    const patch = (path: string, body: unknown) => client.request('PATCH', path, { body, contentType: 'application/merge-patch+json' });
    try {
      await view.start();
      await view.untilLoaded();
      const afterLoad = changes;
      // What the kubelet does every few seconds: a new heartbeat in the status; and an annotation.
      await patch('/api/v1/nodes/worker-0/status', { status: { conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'ok', lastHeartbeatTime: new Date().toISOString() }] } });
      await patch('/api/v1/nodes/worker-0', { metadata: { annotations: { 'prestage.dev/touched': String(Date.now()) } } });
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(changes).toBe(afterLoad);
      await patch('/api/v1/nodes/worker-0', { metadata: { labels: { 'prestage.dev/zone': 'a' } } });
      await waitFor('the label change reported', async () => (changes > afterLoad ? true : undefined), 10_000, 100);
      expect(view.nodeLabels()).toMatchObject({ 'prestage.dev/zone': 'a' });
    } finally {
      await view.stop();
      await patch('/api/v1/nodes/worker-0', { metadata: { labels: { 'prestage.dev/zone': null } } }).catch(() => undefined);
    }
  });
});

describe('PinnedImageSet CRD validation', () => {
  it('rejects a tag pullspec and duplicate images', async () => {
    await expect(createSet(pinnedImageSet('by-tag', ['quay.io/openshift/origin:latest']))).rejects.toMatchObject({ code: 422 });
    await expect(createSet(pinnedImageSet('duplicates', [IMG_A, IMG_A]))).rejects.toMatchObject({ code: 422 });
    await expect(createSet(pinnedImageSet('empty', []))).rejects.toMatchObject({ code: 422 });
  });

  it('rejects a pull Secret reference that is no Secret name, or named twice', async () => {
    await expect(createSet(pinnedImageSet('bad-secret', [IMG_A], { pullSecrets: [{ name: 'Team_Pull' }] }))).rejects.toMatchObject({ code: 422 });
    await expect(createSet(pinnedImageSet('twice', [IMG_A], { pullSecrets: [{ name: 'team' }, { name: 'team' }] }))).rejects.toMatchObject({ code: 422 });
  });
});

describe('node agents', () => {
  it('pulls and pins each set only on the nodes it selects, and reports generations and per-image state', async () => {
    await createSet(pinnedImageSet('all-nodes', [IMG_A, IMG_B]));
    await createSet(pinnedImageSet('workers', [IMG_C], { nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } } }));
    await createSet(pinnedImageSet('control-plane', [IMG_D], { nodeSelector: { matchExpressions: [{ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists' }] } }));

    const expected: Record<string, string[]> = { 'master-0': ['all-nodes', 'control-plane'], 'worker-0': ['all-nodes', 'workers'], 'worker-1': ['all-nodes', 'workers'] };
    for (const [nodeName, sets] of Object.entries(expected)) {
      for (const setName of sets) {
        const set = await waitForSet(nodeName, setName, isSetDone, 'done');
        expect(set).toMatchObject({ desiredGeneration: 1, currentGeneration: 1 });
        expect(set.lastFailedGeneration).toBeUndefined();
        expect(set.images.every((image) => image.state === 'Pinned' && image.attempts === 1)).toBe(true);
        // Bytes in one unit, from the fixture's truth: each image its own unique layers'
        // uncompressed bytes; the set its UNIQUE layers (shared layers once), all stored.
        expect(set.images.map((image) => [image.name, image.bytes, image.pulledBytes])).toEqual(set.images.map((image) => [image.name, diskBytesOf([image.name]), diskBytesOf([image.name])]));
        const setBytes = diskBytesOf(set.images.map((image) => image.name));
        expect(set).toMatchObject({ bytes: setBytes, pulledBytes: setBytes });
      }
      const status = (await nodeStatus(nodeName))?.status;
      expect(status?.pinnedImageSets?.map((set) => set.name).sort()).toEqual(sets);
      expect(status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
      expect(status?.conditions?.find((c) => c.type === 'Degraded')?.status).toBe('False');
      expect(status?.imageFilesystem?.freeBytes).toBeGreaterThan(0);
    }

    expect(await criPins(node('master-0'), [IMG_A, IMG_B, IMG_C, IMG_D])).toEqual({ [IMG_A]: true, [IMG_B]: true, [IMG_C]: 'absent', [IMG_D]: true });
    for (const worker of ['worker-0', 'worker-1']) {
      expect(await criPins(node(worker), [IMG_A, IMG_B, IMG_C, IMG_D])).toEqual({ [IMG_A]: true, [IMG_B]: true, [IMG_C]: true, [IMG_D]: 'absent' });
      expect(await dropIn(node(worker))).toBe(renderPinDropIn([IMG_A, IMG_B, IMG_C]));
    }
    expect(await dropIn(node('master-0'))).toBe(renderPinDropIn([IMG_A, IMG_B, IMG_D]));
  });

  it('follows a new generation of a set', async () => {
    const current = (await objects.getClusterCustomObject({ ...setAddress, name: 'control-plane' })) as PinnedImageSet;
    await objects.replaceClusterCustomObject({ ...setAddress, name: 'control-plane', body: { ...current, spec: { ...current.spec, pinnedImages: [{ name: IMG_D }, { name: IMG_E }] } } });
    const set = await waitForSet('master-0', 'control-plane', (candidate) => candidate.desiredGeneration === 2 && isSetDone(candidate), 'generation 2 done');
    expect(set.images.map((image) => [image.name, image.state])).toEqual([[IMG_D, 'Pinned'], [IMG_E, 'Pinned']]);
    expect(await dropIn(node('master-0'))).toBe(renderPinDropIn([IMG_A, IMG_B, IMG_D, IMG_E]));
  });

  it('unpins a deleted set but keeps its images', async () => {
    await deleteSet('workers');
    for (const worker of ['worker-0', 'worker-1']) {
      await waitFor(`workers unpinned on ${worker}`, async () => ((await criPins(node(worker), [IMG_C]))[IMG_C] === false ? true : undefined), 30_000, 250);
      expect(await dropIn(node(worker))).toBe(renderPinDropIn([IMG_A, IMG_B]));
      expect(await criPins(node(worker), [IMG_A, IMG_B, IMG_C])).toEqual({ [IMG_A]: true, [IMG_B]: true, [IMG_C]: false });
      await waitFor(`workers gone from ${worker}'s status`, async () => ((await nodeStatus(worker))?.status?.pinnedImageSets?.some((set) => set.name === 'workers') ? undefined : true));
    }
  });

  it('re-evaluates selectors when a node gains a label', async () => {
    await createSet(pinnedImageSet('labelled', [IMG_F], { nodeSelector: { matchLabels: { 'prestage.dev/canary': 'true' } } }));
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const worker1 = await core.readNode({ name: 'worker-1' });
    await core.replaceNode({ name: 'worker-1', body: { ...worker1, metadata: { ...worker1.metadata, labels: { ...worker1.metadata?.labels, 'prestage.dev/canary': 'true' } } } });
    await waitForSet('worker-1', 'labelled', isSetDone, 'done');
    expect(await criPins(node('worker-1'), [IMG_F])).toEqual({ [IMG_F]: true });
    expect(await criPins(node('worker-0'), [IMG_F])).toEqual({ [IMG_F]: 'absent' });
    expect((await nodeStatus('worker-0'))?.status?.pinnedImageSets?.some((set) => set.name === 'labelled')).toBe(false);
  });

  it('turns a set not ready while an image removed by hand is missing, and repairs it on the next resync', async () => {
    const worker0 = node('worker-0');
    // Every status the agent writes, in order.
    const client = new KubeClient(cluster.kubeConfig);
    const path = `/apis/${GROUP}/${VERSION}/${NODE_PINNED_IMAGES}`;
    const before = await client.get<NodePinnedImages>(`${path}/worker-0`);
    const written: NodePinnedImages[] = [];
    const watching = new AbortController();
    const watch = client.watch(path, { fieldSelector: 'metadata.name=worker-0', resourceVersion: before.metadata.resourceVersion }, (event) => written.push(event.object as unknown as NodePinnedImages), watching.signal).catch(() => undefined);
    const allNodes = (status: NodePinnedImages) => status.status?.pinnedImageSets?.find((set) => set.name === 'all-nodes');
    const ready = (status: NodePinnedImages) => status.status?.conditions?.find((c) => c.type === 'Ready')?.status;
    expect(isSetDone(allNodes(before)!)).toBe(true);

    await withCri(worker0, (cri) => cri.removeImage(IMG_A));
    expect((await criPins(worker0, [IMG_A]))[IMG_A]).toBe('absent');
    await waitFor('IMG_A back and pinned on worker-0', async () => ((await criPins(worker0, [IMG_A]))[IMG_A] === true ? true : undefined), 30_000, 250);
    // Not ready from the first status written after the removal until the repair.
    const notReady = await waitFor('a status without the set done', async () => {
      const index = written.findIndex((status) => !isSetDone(allNodes(status)!));
      return index >= 0 ? index : undefined;
    });
    expect(allNodes(written[notReady]!)?.currentGeneration).toBeUndefined();
    expect(ready(written[notReady]!)).toBe('False');
    const repaired = await waitFor('a later status with the set done again', async () => written.slice(notReady).find((status) => isSetDone(allNodes(status)!)));
    expect(allNodes(repaired)?.images.map((image) => image.state)).toEqual(['Pinned', 'Pinned']);
    expect(ready(repaired)).toBe('True');
    watching.abort();
    await watch;
    // Its sibling stayed pinned throughout the repair.
    expect(await dropIn(worker0)).toBe(renderPinDropIn([IMG_A, IMG_B]));
  });

  it('starts over for a set deleted and created again under its name', async () => {
    const onWorker0 = { nodeSelector: { matchLabels: { 'kubernetes.io/hostname': 'worker-0' } } };
    await createSet(pinnedImageSet('recreated', [IMG_B], onWorker0));
    const first = await waitForSet('worker-0', 'recreated', isSetDone, 'done');
    await deleteSet('recreated');
    // Generation 1 again, of an image no registry has: the earlier object's done status must not carry over.
    const missing = IMG_B.replace(/@sha256:.*/, `@sha256:${'0'.repeat(64)}`);
    await createSet(pinnedImageSet('recreated', [missing], onWorker0));
    const again = await waitForSet('worker-0', 'recreated', (set) => set.uid !== first.uid && set.lastFailedGeneration === 1, 'failed');
    expect(first.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(again).toMatchObject({ desiredGeneration: 1, images: [{ name: missing, state: 'Failed' }] });
    expect(again.currentGeneration).toBeUndefined();
    await deleteSet('recreated');
  });

  it("keeps MCO's pins: the agent's drop-in sorts last and carries the pins of MCO's 50-pinned-images", async () => {
    const worker1 = node('worker-1');
    await withCri(worker1, (cri) => cri.pullImage(IMG_G));
    const mco = join(worker1.crio.confDir, '50-pinned-images');
    // What MCO writes and reloads; until the agent's next pass, the agent's older list (last) hides it.
    await writeFile(mco, `[crio.image]\npinned_images = [${JSON.stringify(IMG_G)}]\n`);
    await worker1.crio.reload();
    try {
      await waitFor("MCO's image pinned beside the agent's", async () => (Object.values(await criPins(worker1, [IMG_A, IMG_B, IMG_F, IMG_G])).every((pinned) => pinned === true) ? true : undefined), 30_000, 250);
      expect(await dropIn(worker1)).toBe(renderPinDropIn([IMG_A, IMG_B, IMG_F], new Map([[mco, [IMG_G]]])));
    } finally {
      await rm(mco);
      await worker1.crio.reload();
    }
    await waitFor('IMG_G unpinned once MCO no longer pins it', async () => ((await criPins(worker1, [IMG_G]))[IMG_G] === false ? true : undefined), 30_000, 250);
    expect(await dropIn(worker1)).toBe(renderPinDropIn([IMG_A, IMG_B, IMG_F]));
    expect(await criPins(worker1, [IMG_A, IMG_B, IMG_F])).toEqual({ [IMG_A]: true, [IMG_B]: true, [IMG_F]: true });
  });
});

describe('node agent faults', () => {
  it('fails a set that does not fit the free disk by exact size, with nothing pulled, and leaves other sets alone', async () => {
    // More reserve than any disk has: whatever the host's free space does meanwhile, nothing new fits.
    const reserve = 2 ** 50;
    await agents.get('worker-0')!.stop();
    await startAgent(node('worker-0'), reserve);
    try {
      // The plan's estimate (1 byte) would fit; the exact size decides.
      await createSet(pinnedImageSet('too-big', [IMG_C, IMG_E], { nodeSelector: { matchLabels: { 'kubernetes.io/hostname': 'worker-0' } } }, { [DISK_BYTES_ANNOTATION]: '1' }));
      const set = await waitForSet('worker-0', 'too-big', (candidate) => candidate.lastFailedGeneration === 1, 'failed');
      // IMG_C is stored (from the deleted "workers" set); IMG_E needs only its layers not stored yet with
      // the images of the sets selecting worker-0 (all-nodes: A, B; too-big: C).
      const truthOf = (pullSpec: string) => truth.components.find((candidate) => candidate.pullSpec === pullSpec)!;
      const stored = new Set([IMG_A, IMG_B, IMG_C].flatMap((image) => truthOf(image).layers.map((layer) => layer.digest)));
      const needed = truthOf(IMG_E).layers.filter((layer) => !stored.has(layer.digest));
      const neededBytes = needed.reduce((sum, layer) => sum + layer.uncompressedSize, 0);
      expect(set.lastFailedGenerationError).toBe(`not enough disk: 1 image needs ${neededBytes} bytes (exact, ${needed.length} ${needed.length === 1 ? 'layer' : 'layers'}), 0 free after the ${reserve}-byte reserve and earlier sets; nothing pulled`);
      // The restarted agent never tried either (IMG_C was pulled by the one before it).
      expect(set.images.map((image) => [image.state, image.attempts])).toEqual([['Pulled', 0], ['Pending', 0]]);
      expect((await criPins(node('worker-0'), [IMG_E]))[IMG_E]).toBe('absent');
      expect(isSetDone((await waitForSet('worker-0', 'all-nodes', () => true, 'listed')))).toBe(true);
      const status = await nodeStatus('worker-0');
      expect(status?.status?.conditions?.find((c) => c.type === 'Degraded')).toMatchObject({ status: 'True', reason: 'PrefetchFailed' });
      await deleteSet('too-big');
    } finally {
      await agents.get('worker-0')!.stop();
      await startAgent(node('worker-0'));
    }
  });

  it('restores the previous drop-in when the reload fails, and reports why', async () => {
    const master = node('master-0');
    // The earlier tests' sets done on master-0 first: its pin list is then what the failed reload must restore.
    await waitFor('master-0 done with the sets before', async () => ((await nodeStatus('master-0'))?.status?.pinnedImageSets?.every(isSetDone) ? true : undefined), 60_000, 250);
    const before = await dropIn(master);
    failReload.set('master-0', true);
    try {
      await createSet(pinnedImageSet('reload-fails', [IMG_F], { nodeSelector: { matchLabels: { 'kubernetes.io/hostname': 'master-0' } } }));
      const set = await waitForSet('master-0', 'reload-fails', (candidate) => candidate.lastFailedGeneration === 1, 'failed');
      expect(set.lastFailedGenerationError).toBe('CRI-O reload failed, previous pin list restored: injected: crio.service reload failed');
      const events = await waitFor('a Warning Event on master-0', async () => {
        const list = await cluster.kubeConfig.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: 'default', fieldSelector: 'involvedObject.name=master-0,reason=PinnedImageSetFailed' });
        const found = list.items.filter((event) => event.message?.startsWith('reload-fails generation 1: CRI-O reload failed'));
        return found.length > 0 ? found : undefined;
      });
      expect(events[0]).toMatchObject({ type: 'Warning', involvedObject: { kind: 'Node', name: 'master-0' }, source: { component: 'prestage-agent' } });
      expect(await dropIn(master)).toBe(before);
      expect((await criPins(master, [IMG_F]))[IMG_F]).toBe(false);
    } finally {
      failReload.set('master-0', false);
    }
    await waitForSet('master-0', 'reload-fails', isSetDone, 'done once reloads work again');
    expect((await criPins(master, [IMG_F]))[IMG_F]).toBe(true);
  });

  it('a restarted agent finishes from what CRI-O stores, without pulling again', async () => {
    const worker1 = node('worker-1');
    await agents.get('worker-1')!.stop();
    // What the previous agent got done before it died: one of the two images.
    await withCri(worker1, (cri) => cri.pullImage(IMG_D));
    await createSet(pinnedImageSet('after-restart', [IMG_D, IMG_E], { nodeSelector: { matchLabels: { 'kubernetes.io/hostname': 'worker-1' } } }));
    await startAgent(worker1);
    const set = await waitForSet('worker-1', 'after-restart', isSetDone, 'done');
    expect(set.images.map((image) => [image.name, image.state, image.attempts])).toEqual([[IMG_D, 'Pinned', 0], [IMG_E, 'Pinned', 1]]);
  });
});

describe('prestage agent (CLI)', () => {
  it('--once pulls and pins for its node with a SIGHUP-by-pid reload, logs JSON without credentials, and exits 0', async () => {
    const worker1 = node('worker-1');
    await agents.get('worker-1')!.stop();
    const pullSecret = join(cluster.dir, 'kubelet-config.json');
    const secretPassword = 'not-to-be-logged-9f1c';
    await writeFile(pullSecret, JSON.stringify({ auths: { 'quay.io': { auth: Buffer.from(`robot:${secretPassword}`).toString('base64') } } }));
    await createSet(pinnedImageSet('cli-once', [IMG_B, IMG_C], { nodeSelector: { matchLabels: { 'kubernetes.io/hostname': 'worker-1' } } }));
    await withCri(worker1, (cri) => cri.removeImage(IMG_C).catch(() => undefined));

    const stderr = new PassThrough();
    const logged: Buffer[] = [];
    stderr.on('data', (chunk: Buffer) => logged.push(chunk));
    const code = await main(
      [
        'agent', '--once', '--log-level', 'debug',
        '--node-name', 'worker-1',
        '--kubeconfig', cluster.kubeconfigPath,
        '--cri-socket', worker1.crio.socketPath,
        '--drop-in', join(worker1.crio.confDir, DROP_IN),
        '--reload', `pid:${worker1.crio.pid}`,
        '--pull-secret', pullSecret,
        '--registries-conf', registriesConfOf(worker1).registriesConf,
        '--registries-conf-dir', registriesConfOf(worker1).registriesConfDir,
        '--reserve', '1Mi',
      ],
      { stdout: new PassThrough(), stderr },
    );
    const log = Buffer.concat(logged).toString('utf8');
    expect(code, log).toBe(0);
    const set = await waitForSet('worker-1', 'cli-once', isSetDone, 'done');
    expect(set.images.map((image) => image.state)).toEqual(['Pinned', 'Pinned']);
    expect(await criPins(worker1, [IMG_B, IMG_C])).toEqual({ [IMG_B]: true, [IMG_C]: true });
    const lines = log.trim().split('\n').map((line) => JSON.parse(line) as { msg: string; image?: string });
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'pulled', image: IMG_C }));
    // The disk check read IMG_C's exact sizes through the node's mirror.
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'image sizes read', image: IMG_C, from: IMG_C.replace(/^quay\.io/, registry.host) }));
    expect(log).not.toContain(secretPassword);
    await startAgent(worker1);
  });

  it('rejects a missing node name and a bad reload method with exit 2', async () => {
    const stderr = new PassThrough();
    const errors: Buffer[] = [];
    stderr.on('data', (chunk: Buffer) => errors.push(chunk));
    const saved = process.env.NODE_NAME;
    delete process.env.NODE_NAME;
    try {
      expect(await main(['agent', '--once', '--node-name', ''], { stdout: new PassThrough(), stderr, scriptName: 'prestage' })).toBe(2);
      expect(
        await main(['agent', '--once', '--node-name', 'worker-0', '--kubeconfig', cluster.kubeconfigPath, '--cri-socket', node('worker-0').crio.socketPath, '--reload', 'sometimes'], { stdout: new PassThrough(), stderr, scriptName: 'prestage' }),
      ).toBe(2);
    } finally {
      if (saved !== undefined) process.env.NODE_NAME = saved;
    }
    expect(Buffer.concat(errors).toString('utf8')).toBe(
      'prestage: error: no node name: pass --node-name or set NODE_NAME (the DaemonSet sets it from spec.nodeName)\n' +
        'prestage: error: --reload must be sighup, systemctl, pid:<pid> or pidfile:<path>, got sometimes\n',
    );
  });

  it('serves Prometheus metrics and a health check that turns 503 when the loop stalls', async () => {
    const metrics = new AgentMetrics();
    metrics.pulls.inc({ outcome: 'ok' }, 3);
    let healthy = true;
    const server = await serveAgentHttp(metrics.registry, () => healthy, 0, '127.0.0.1');
    try {
      const base = `http://127.0.0.1:${server.port}`;
      expect(await (await fetch(`${base}/metrics`)).text()).toContain('prestage_agent_pulls_total{outcome="ok"} 3');
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      healthy = false;
      expect((await fetch(`${base}/healthz`)).status).toBe(503);
    } finally {
      await server.close();
    }
  });
});

describe('pacing across nodes', () => {
  it('lets at most one node pull at a time when there is one Lease slot, and every node finishes', async () => {
    const held: Array<{ node: string; from: number; to: number }> = [];
    await Promise.all([...agents.values()].map((running) => running.stop()));
    for (const testNode of cluster.nodes) {
      const leases = new LeasePacer(new KubeClient(cluster.kubeConfig), { namespace: 'default', slots: 1, holder: testNode.name, leaseDurationSeconds: 15, contentionJitterMs: 100, log });
      // Records when each node held the slot; the Lease alone decides who may.
      const recording: PullPacer = {
        acquire: async () => {
          const slot = await leases.acquire();
          const from = Date.now();
          return {
            held: () => slot.held(),
            release: async () => {
              held.push({ node: testNode.name, from, to: Date.now() });
              await slot.release();
            },
          };
        },
      };
      await startAgent(testNode, 0, recording);
    }
    await createSet(pinnedImageSet('paced', [IMG_G, IMG_H]));
    for (const testNode of cluster.nodes) await waitForSet(testNode.name, 'paced', isSetDone, 'done');

    expect(new Set(held.map((interval) => interval.node))).toEqual(new Set(cluster.nodes.map((testNode) => testNode.name)));
    const ordered = [...held].sort((a, b) => a.from - b.from);
    for (let i = 1; i < ordered.length; i++) expect(ordered[i]!.from).toBeGreaterThanOrEqual(ordered[i - 1]!.to);
    const lease = await cluster.kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: 'default', name: `${PULL_SLOT_PREFIX}0` });
    expect(lease.spec?.holderIdentity).toBeUndefined();
  });
});
