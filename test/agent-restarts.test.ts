/**
 * The node agent when a process dies mid-pull, on the real test bed: CRI-O on each worker mirrors
 * quay.io through the fault proxy, whose bandwidth cap keeps pulls in flight long enough to act.
 *
 * - worker-0 runs the real agent process (`prestage agent`), SIGKILLed while several
 *   images are pulling, then started again;
 * - worker-1 runs an in-process agent while its CRI-O is restarted under it;
 * - worker-2 runs the real agent process whose /healthz is polled through a pull longer than its
 *   stall window, and while its CRI-O is frozen (SIGSTOP).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ComponentTruth } from '../fixtures/release.js';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION, isSetDone, type NodePinnedImages, type PinnedImageSet, type PinnedImageSetStatus } from '../src/api/prestage.js';
import { CrioRuntime, renderPinDropIn } from '../src/agent/crio.js';
import { KubeAgentCluster } from '../src/agent/kube.js';
import { KubeClient } from '../src/kube/client.js';
import { NodeAgent } from '../src/agent/reconcile.js';
import { CriClient, type RuntimeImage } from '../src/cri/client.js';
import { createLogger } from '../src/telemetry/log.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { waitFor } from './cluster/processes.js';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle, type RequestRecord } from './harness/index.js';
import { startPrestageProcess } from './support/prestage-process.js';
import { installPrestageCrds } from './support/agent-bed.js';

const DROP_IN = '99-prestage-pinned-images';
/** Slow enough that the larger images stay in flight for many seconds. */
const SLOW_LINK_BYTES_PER_SECOND = 128 * 1024;

const truth = inject('fixtureTruth');
const component = (name: string): ComponentTruth => {
  const found = truth.components.find((candidate) => candidate.name === name);
  if (!found) throw new Error(`no fixture component ${name}`);
  return found;
};
const totalBytes = (image: ComponentTruth) => image.layers.reduce((sum, layer) => sum + layer.size, 0);
/** The base layer almost every component shares; its smallest sharers pull in a blink once it is stored. */
const BASE_LAYER = component('cli').layers[0]!.digest;
const SMALL = truth.components.filter((image) => image.layers[0]?.digest === BASE_LAYER).sort((a, b) => totalBytes(a) - totalBytes(b));
/** Images with hundreds of KiB to MiBs of their own layers: they take many seconds on the slow link. */
const LARGE = ['rhel-coreos', 'rhel-coreos-extensions', 'ironic-machine-os-downloader'].map(component);

let registry: RegistryHandle;
let proxy: FaultProxy;
let cluster: TestCluster;
let objects: CustomObjectsApi;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  proxy = await startFaultProxy({ upstream: registry.url });
  cluster = await startCluster({ workers: 3, registryMirrors: { 'quay.io': proxy.host }, insecureRegistries: [proxy.host] });
  objects = await installPrestageCrds(cluster);
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  await cluster?.stop();
  await proxy?.stop();
  await registry?.stop();
});

const node = (name: string): TestNode => {
  const found = cluster.nodes.find((candidate) => candidate.name === name);
  if (!found) throw new Error(`no node ${name}`);
  return found;
};

const setAddress = { group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS };
function createSet(name: string, nodeName: string, images: readonly ComponentTruth[]) {
  const body: PinnedImageSet = {
    apiVersion: API_VERSION,
    kind: 'PinnedImageSet',
    metadata: { name },
    spec: { pinnedImages: images.map((image) => ({ name: image.pullSpec })), nodeSelector: { matchLabels: { 'kubernetes.io/hostname': nodeName } } },
  };
  return objects.createClusterCustomObject({ ...setAddress, body });
}

async function setStatus(nodeName: string, setName: string): Promise<PinnedImageSetStatus | undefined> {
  const status = (await objects.getClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: nodeName }).catch(() => undefined)) as NodePinnedImages | undefined;
  return status?.status?.pinnedImageSets?.find((set) => set.name === setName);
}

const waitForSet = (nodeName: string, setName: string, until: (set: PinnedImageSetStatus) => boolean, what: string, timeoutMs = 120_000) =>
  waitFor(`${setName} on ${nodeName}: ${what}`, async () => {
    const set = await setStatus(nodeName, setName);
    return set && until(set) ? set : undefined;
  }, timeoutMs, 250);

async function listImages(testNode: TestNode): Promise<RuntimeImage[]> {
  const cri = await CriClient.connect(testNode.crio.socketPath);
  try {
    return await cri.listImages();
  } finally {
    cri.close();
  }
}

/** `pullSpec -> pinned` as CRI ListImages reports it; `absent` when not stored. */
async function criPins(testNode: TestNode, images: readonly ComponentTruth[]): Promise<Record<string, boolean | 'absent'>> {
  const listed = await listImages(testNode);
  return Object.fromEntries(images.map((image) => [image.pullSpec, listed.find((entry) => entry.repoDigests.includes(image.pullSpec))?.pinned ?? 'absent']));
}

const storedNames = async (testNode: TestNode) => new Set((await listImages(testNode)).flatMap((image) => image.repoDigests));

/** What a pull of `image` reads from the registry: its manifest, config and layers. */
const isManifestRead = (image: ComponentTruth) => (request: RequestRecord) => request.method === 'GET' && request.target.endsWith(`/manifests/${image.digest}`);
const blobsOf = (image: ComponentTruth) => new Set([image.config.digest, ...image.layers.map((layer) => layer.digest)]);
const blobOf = (request: RequestRecord) => /\/blobs\/(sha256:[a-f0-9]{64})$/.exec(request.target)?.[1];

/** In flight: manifest read, and bytes of at least one of its own blobs on the wire, while not stored. */
function inFlight(log: readonly RequestRecord[], image: ComponentTruth, stored: ReadonlySet<string>): boolean {
  const own = blobsOf(image);
  return !stored.has(image.pullSpec)
    && log.some((request) => isManifestRead(image)(request) && request.status === 200)
    && log.some((request) => request.bytesSent > 0 && !request.ended && own.has(blobOf(request) ?? ''));
}

/** Pre-load the shared base layer on a node, so small images pull in a blink and the slow link only delays the large ones. */
async function warmBaseLayer(testNode: TestNode): Promise<void> {
  const cri = await CriClient.connect(testNode.crio.socketPath);
  try {
    await cri.pullImage(SMALL[0]!.pullSpec);
  } finally {
    cri.close();
  }
}

describe('agent process killed mid-pull', () => {
  it('finishes after a restart, fetching again only what was in flight at the kill', async () => {
    const worker = node('worker-0');
    const done = SMALL.slice(1, 4);
    const later = SMALL.slice(4, 6);
    // Pulled in this order, three at a time: the small ones first, then the large ones crawl.
    const images = [...done, ...LARGE, ...later];
    await warmBaseLayer(worker);
    // CRI-O reads a manifest more than once per pull (to resolve it, then to copy): count one pull's reads.
    const readsPerPull = proxy.stats.log.filter(isManifestRead(SMALL[0]!)).length;
    expect(readsPerPull).toBeGreaterThan(0);
    let run = 0;
    const startAgent = async () => {
      run += 1;
      const agent = await startPrestageProcess({
        name: `prestage agent (worker-0, run ${run})`,
        args: [
          'agent', '--log-level', 'debug',
          '--node-name', worker.name,
          '--kubeconfig', cluster.kubeconfigPath,
          '--cri-socket', worker.crio.socketPath,
          '--drop-in', join(worker.crio.confDir, DROP_IN),
          '--reload', `pid:${worker.crio.pid}`,
          '--pull-secret', join(cluster.dir, 'no-pull-secret.json'),
          '--concurrency', '3',
          '--reserve', '0',
          '--resync', '2',
          '--port', '0',
        ],
        logPath: join(cluster.dir, `agent-worker-0-run-${run}.log`),
        readyWhen: 'agent started',
      });
      cleanups.push(() => agent.stop(5_000));
      return agent;
    };

    proxy.setBandwidth(SLOW_LINK_BYTES_PER_SECOND);
    const first = await startAgent();
    await createSet('killed-agent', worker.name, images);
    const atKill = await first.whileRunning(
      waitFor('the small images stored and every large one in flight', async () => {
        const stored = await storedNames(worker);
        const log = proxy.stats.log;
        return done.every((image) => stored.has(image.pullSpec)) && LARGE.every((image) => inFlight(log, image, stored)) ? stored : undefined;
      }, 60_000, 100),
    );
    const killedAt = proxy.stats.log.length;
    await first.kill();
    const completed = images.filter((image) => atKill.has(image.pullSpec));
    const started = images.filter((image) => proxy.stats.log.slice(0, killedAt).some(isManifestRead(image)));
    const interrupted = started.filter((image) => !completed.includes(image));
    const notStarted = images.filter((image) => !started.includes(image));
    expect(completed).toEqual(done);
    expect(interrupted).toEqual(LARGE);
    expect(notStarted).toEqual(later);

    // CRI-O abandons the pulls of a client that is gone: nothing stays on the wire.
    await waitFor('every registry response to end after the kill', async () => (proxy.stats.log.every((request) => request.ended) ? true : undefined), 30_000, 100);
    proxy.setBandwidth(null);

    const second = await startAgent();
    const set = await second.whileRunning(waitForSet(worker.name, 'killed-agent', isSetDone, 'done after the restart'));
    expect(set.images.map((image) => image.state)).toEqual(images.map(() => 'Pinned'));
    // The restarted agent pulled only what was missing: never the completed images again.
    expect(set.images.map((image) => [image.name, image.attempts])).toEqual(images.map((image) => [image.pullSpec, completed.includes(image) ? 0 : 1]));
    expect(await criPins(worker, images)).toEqual(Object.fromEntries(images.map((image) => [image.pullSpec, true])));
    expect(await readFile(join(worker.crio.confDir, DROP_IN), 'utf8')).toBe(renderPinDropIn(images.map((image) => image.pullSpec)));
    // The restarted agent found the set at once, before its Node: no pass ran without the Node (`node worker-0 not seen yet`).
    const restartLog = await readFile(join(cluster.dir, 'agent-worker-0-run-2.log'), 'utf8');
    expect(restartLog.split('\n').filter((line) => line.includes('reconcile failed'))).toEqual([]);

    // At the registry: after the kill, nothing of a completed image was read again (not even the
    // base layer the interrupted ones share); each interrupted or new image was pulled once.
    const after = proxy.stats.log.slice(killedAt);
    const completedBlobs = new Set(completed.flatMap((image) => [...blobsOf(image)]));
    for (const image of completed) expect(after.filter(isManifestRead(image)), image.name).toEqual([]);
    expect(after.filter((request) => completedBlobs.has(blobOf(request) ?? '')).map((request) => request.target)).toEqual([]);
    for (const image of [...interrupted, ...notStarted]) expect(after.filter(isManifestRead(image)).map((request) => request.status), image.name).toEqual(Array(readsPerPull).fill(200));
    // Every blob read after the kill belongs to an interrupted or a new image.
    const wanted = new Set([...interrupted, ...notStarted].flatMap((image) => [...blobsOf(image)]));
    expect(after.map(blobOf).filter((digest) => digest !== undefined && !wanted.has(digest))).toEqual([]);
    // Over the whole run, each image was pulled once, and twice for the interrupted ones.
    for (const image of images) {
      expect(proxy.stats.log.filter(isManifestRead(image)).length, image.name).toBe((interrupted.includes(image) ? 2 : 1) * readsPerPull);
    }
    const readAgain = new Set(after.map(blobOf).filter((digest) => digest !== undefined));
    const wasted = proxy.stats.log.slice(0, killedAt).filter((request) => readAgain.has(blobOf(request) ?? '')).reduce((sum, request) => sum + request.bytesSent, 0);
    console.log(`agent killed mid-pull: ${interrupted.length} images in flight; ${wasted} bytes read before the kill were read again after it`);
  });
});

describe('CRI-O restarted mid-pull', () => {
  it('fails the pulls in flight, then retries on the restarted CRI-O, finishes and pins', async () => {
    const worker = node('worker-1');
    const pinnedBefore = SMALL[6]!;
    const images = [...LARGE, SMALL[7]!];
    await warmBaseLayer(worker);
    const logged: string[] = [];
    const sink = new PassThrough();
    sink.on('data', (chunk: Buffer) => logged.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
    const log = createLogger('debug', sink);
    // Follows CRI-O across restarts, as `systemctl reload crio` would.
    const runtime = await CrioRuntime.connect({ socketPath: worker.crio.socketPath, dropInPath: join(worker.crio.confDir, DROP_IN), reload: () => worker.crio.reload() });
    let agent: NodeAgent | undefined;
    const view = new KubeAgentCluster(new KubeClient(cluster.kubeConfig), worker.name, log, () => agent?.trigger());
    agent = new NodeAgent({ nodeName: worker.name, runtime, cluster: view, log, concurrency: 3, reserveBytes: 0, resyncMs: 1_500, retry: { attempts: 3, initialDelayMs: 200, maxDelayMs: 1_000 } });
    await view.start();
    agent.start();
    cleanups.push(async () => {
      await agent.stop();
      await view.stop();
      runtime.close();
    });

    await createSet('pinned-before', worker.name, [pinnedBefore]);
    await waitForSet(worker.name, 'pinned-before', isSetDone, 'done');

    proxy.setBandwidth(SLOW_LINK_BYTES_PER_SECOND);
    const pid = worker.crio.pid;
    try {
      await createSet('crio-restart', worker.name, images);
      await waitFor('every large image in flight', async () => {
        const stored = await storedNames(worker);
        return LARGE.every((image) => inFlight(proxy.stats.log, image, stored)) ? true : undefined;
      }, 60_000, 100);
      // SIGTERM: CRI-O's graceful stop waits for the pulls in flight; after 2 s it is killed, as
      // systemd does after TimeoutStopSec. The pulls in flight fail.
      await worker.crio.restart({ graceMs: 2_000 });
    } finally {
      proxy.setBandwidth(null);
    }
    expect(worker.crio.pid).not.toBe(pid);

    const set = await waitForSet(worker.name, 'crio-restart', isSetDone, 'done after the CRI-O restart');
    expect(set.images.map((image) => image.state)).toEqual(images.map(() => 'Pinned'));
    const failures = logged.map((line) => JSON.parse(line) as { msg: string; image?: string; err?: string }).filter((line) => line.msg === 'pull failed');
    for (const image of LARGE) {
      // The attempt in flight at the restart failed; a later one succeeded.
      expect(set.images.find((entry) => entry.name === image.pullSpec)?.attempts, image.name).toBeGreaterThanOrEqual(2);
      expect(failures.some((line) => line.image === image.pullSpec), image.name).toBe(true);
    }
    console.log(`CRI-O restart: pull errors seen: ${[...new Set(failures.map((line) => line.err))].join(' | ')}`);
    const all = [pinnedBefore, ...images];
    expect(await criPins(worker, all)).toEqual(Object.fromEntries(all.map((image) => [image.pullSpec, true])));
    expect(await readFile(join(worker.crio.confDir, DROP_IN), 'utf8')).toBe(renderPinDropIn(all.map((image) => image.pullSpec)));
    expect(await setStatus(worker.name, 'pinned-before')).toMatchObject({ currentGeneration: 1, desiredGeneration: 1 });
  });
});

describe('liveness from progress', () => {
  it('answers 200 on /healthz all through a pull longer than the stall window, and 503 while CRI-O does not answer', async () => {
    const worker = node('worker-2');
    const stallSeconds = 2;
    await warmBaseLayer(worker);
    const agent = await startPrestageProcess({
      name: 'prestage agent (worker-2)',
      args: [
        'agent', '--log-level', 'debug',
        '--node-name', worker.name,
        '--kubeconfig', cluster.kubeconfigPath,
        '--cri-socket', worker.crio.socketPath,
        // The default reload: SIGHUP to the CRI-O that /proc shows reading this directory.
        '--drop-in', join(worker.crio.confDir, DROP_IN),
        '--pull-secret', join(cluster.dir, 'no-pull-secret.json'),
        '--reserve', '0',
        '--resync', '1',
        '--stall-timeout', String(stallSeconds),
        '--port', '0',
      ],
      logPath: join(cluster.dir, 'agent-worker-2.log'),
      readyWhen: 'agent started',
    });
    cleanups.push(() => agent.stop(5_000));
    const started = agent.logSince(0).split('\n').find((line) => line.includes('"agent started"')) as string;
    const url = `http://127.0.0.1:${(JSON.parse(started) as { port: number }).port}/healthz`;
    const healthz = async () => {
      const response = await fetch(url);
      return `${response.status} ${await response.text()}`;
    };

    const answers: string[] = [];
    const image = LARGE[0]!;
    // rhel-coreos, 4.7 MiB: about 9 s at 512 KiB/s.
    proxy.setBandwidth(4 * SLOW_LINK_BYTES_PER_SECOND);
    const pullStarted = Date.now();
    try {
      await createSet('slow-pull', worker.name, [image]);
      await agent.whileRunning(waitFor('the slow pull done and pinned', async () => {
        answers.push(await healthz());
        const set = await setStatus(worker.name, 'slow-pull');
        return set && isSetDone(set) ? set : undefined;
      }, 120_000, 200));
    } finally {
      proxy.setBandwidth(null);
    }
    const pullSeconds = (Date.now() - pullStarted) / 1000;
    // The premise: the pull outlasted the stall window several times over.
    expect(pullSeconds).toBeGreaterThan(3 * stallSeconds);
    expect(answers.length).toBeGreaterThan(15);
    expect(answers.map((answer, index) => `${index}: ${answer}`).filter((answer) => !answer.endsWith(': 200 ok\n'))).toEqual([]);

    // Frozen: the next pass hangs on ListImages, and nothing moves forward.
    process.kill(worker.crio.pid, 'SIGSTOP');
    try {
      await agent.whileRunning(waitFor('/healthz to answer 503', async () => ((await healthz()).startsWith('503') ? true : undefined), 30_000, 100));
      expect(await healthz()).toBe('503 no progress: the reconcile loop is stuck\n');
    } finally {
      process.kill(worker.crio.pid, 'SIGCONT');
    }
    await agent.whileRunning(waitFor('/healthz to answer 200 once CRI-O answers again', async () => ((await healthz()).startsWith('200') ? true : undefined), 60_000, 200));
    console.log(`liveness: a ${pullSeconds.toFixed(1)} s pull with a ${stallSeconds} s stall window, ${answers.length} /healthz answers, all 200`);
  }, 180_000);
});
