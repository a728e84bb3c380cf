import { describe, expect, it, vi } from 'vitest';
import { API_VERSION, VERIFY_REQUESTED_ANNOTATION, type NodePinnedImagesStatus, type PinnedImageSet } from '../api/prestage.js';
import { DISK_BYTES_ANNOTATION } from '../api/set-metadata.js';
import { PAUSED_ANNOTATION, WINDOW_TZ_ANNOTATION, WINDOWS_ANNOTATION } from '../api/staging.js';
import type { RuntimeImage } from '../cri/client.js';
import { createLogger } from '../telemetry/log.js';
import { AgentMetrics } from './metrics.js';
import type { ImageSizeSource, SizeLookupOptions, SizeResult } from './image-sizes.js';
import { NodeAgent, type AgentCluster } from './reconcile.js';
import { image, MemoryRuntime, TableSizes } from '../../test/support/memory-runtime.js';

const MiB = 2 ** 20;

function fixedCluster(sets: PinnedImageSet[]): AgentCluster & { status?: NodePinnedImagesStatus } {
  const cluster: AgentCluster & { status?: NodePinnedImagesStatus } = {
    pinnedImageSets: () => sets,
    nodeLabels: () => ({ 'node-role.kubernetes.io/worker': '' }),
    readStatus: async () => cluster.status,
    writeStatus: async (status) => {
      cluster.status = status;
    },
  };
  return cluster;
}

const set = (name: string, images: string[], diskBytes: number): PinnedImageSet => ({
  apiVersion: API_VERSION,
  kind: 'PinnedImageSet',
  metadata: { name, generation: 1, annotations: { [DISK_BYTES_ANNOTATION]: String(diskBytes) } },
  spec: { pinnedImages: images.map((name) => ({ name })) },
});

describe('NodeAgent disk check', () => {
  it('counts needed bytes cumulatively across sets in name order, and shared images once', async () => {
    const runtime = new MemoryRuntime(10 * MiB);
    // a: 2 images × 3 MiB fits (4 MiB left); b shares image 2 and adds 2 × 3 MiB, which does not.
    const cluster = fixedCluster([set('b', [image(2), image(3), image(4)], 9 * MiB), set('a', [image(1), image(2)], 6 * MiB)]);
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 2, reserveBytes: MiB });
    const status = await agent.reconcile();

    expect(runtime.pulls.sort()).toEqual([image(1), image(2)]);
    const [a, b] = status.pinnedImageSets ?? [];
    expect(a).toMatchObject({ name: 'a', desiredGeneration: 1, currentGeneration: 1 });
    expect(b?.lastFailedGenerationError).toBe(
      `not enough disk: 2 images need ${6 * MiB} bytes (estimated from the prestage.dev/disk-bytes annotation; exact sizes unknown for 2 images, e.g. ${image(3)}: not looked up), ${3 * MiB} free after the ${MiB}-byte reserve and earlier sets; nothing pulled`,
    );
    expect(b?.images.map((entry) => entry.state)).toEqual(['Pinned', 'Pending', 'Pending']);
    expect(status.conditions?.map((condition) => [condition.type, condition.status])).toEqual([['Ready', 'False'], ['Progressing', 'False'], ['Degraded', 'True']]);
  });
});

describe('NodeAgent disk check with exact sizes', () => {

  it('uses exact layer sizes over the annotation: the shared base is counted once, and stored layers not at all', async () => {
    const runtime = new MemoryRuntime(6 * MiB);
    runtime.images.set(image(1), { pinned: false });
    // The annotation claims 30 MiB (would not fit); exactly, b needs image 2's own layer (1 MiB) + image 3's (2 MiB).
    const cluster = fixedCluster([set('a', [image(1)], 1), set('b', [image(2), image(3)], 30 * MiB)]);
    const sizes = new TableSizes();
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 2, reserveBytes: 3 * MiB, imageSizes: sizes });
    const status = await agent.reconcile();
    expect(runtime.pulls.sort()).toEqual([image(2), image(3)]);
    expect(status.pinnedImageSets?.map((entry) => entry.currentGeneration)).toEqual([1, 1]);
    // Stored images of selecting sets are looked up too; the node's arch label picks the platform (amd64 without one).
    expect(sizes.asked).toEqual([{ images: [image(1), image(2), image(3)], arch: 'amd64' }]);
  });

  it('fails a set that does not fit by exact size, with the exact figure, and pulls nothing of it', async () => {
    const runtime = new MemoryRuntime(6 * MiB - 1);
    const cluster = fixedCluster([set('b', [image(2), image(3)], 1)]);
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 2, reserveBytes: 0, imageSizes: new TableSizes() });
    const status = await agent.reconcile();
    expect(runtime.pulls).toEqual([]);
    const [b] = status.pinnedImageSets ?? [];
    expect(b?.lastFailedGenerationError).toBe(`not enough disk: 2 images need ${6 * MiB} bytes (exact, 3 layers), ${6 * MiB - 1} free after the 0-byte reserve and earlier sets; nothing pulled`);
    // Images not pulled yet report their exact size.
    expect(b?.images.map((entry) => entry.bytes)).toEqual([4 * MiB, 5 * MiB]);
  });

  it('falls back to the annotation for a set with an image of unknown size, and says so', async () => {
    const runtime = new MemoryRuntime(6 * MiB);
    const cluster = fixedCluster([set('c', [image(2), image(4)], 20 * MiB)]);
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 2, reserveBytes: 0, imageSizes: new TableSizes() });
    const status = await agent.reconcile();
    expect(runtime.pulls).toEqual([]);
    expect(status.pinnedImageSets?.[0]?.lastFailedGenerationError).toBe(
      `not enough disk: 2 images need ${20 * MiB} bytes (estimated from the prestage.dev/disk-bytes annotation; exact sizes unknown for ${image(4)}: manifest not found (404)), ${6 * MiB} free after the 0-byte reserve and earlier sets; nothing pulled`,
    );
  });

  it('when nothing is missing, looks up only what the status lacks, once: no registry traffic in the steady state', async () => {
    const runtime = new MemoryRuntime(6 * MiB);
    runtime.images.set(image(1), { pinned: true });
    runtime.images.set(image(4), { pinned: true });
    const sizes = new TableSizes();
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster: fixedCluster([set('a', [image(1), image(4)], 1)]), log: createLogger('silent'), concurrency: 1, reserveBytes: 0, imageSizes: sizes });
    // A restarted agent: everything stored, no sizes known yet. Image 4's cannot be read.
    const first = await agent.reconcile();
    expect(sizes.asked).toEqual([{ images: [image(1), image(4)], arch: 'amd64' }]);
    expect(first.pinnedImageSets?.[0]?.images.map((entry) => entry.bytes)).toEqual([4 * MiB, undefined]);
    await agent.reconcile();
    await agent.reconcile();
    // Known sizes are not asked again, nor (for a while) those that could not be read.
    expect(sizes.asked).toHaveLength(1);
  });
});

describe('NodeAgent outside the staging windows', () => {
  /** A one-hour window opening two hours from now (UTC): shut now. */
  function shutWindow(): string {
    const at = new Date(Date.now() + 2 * 3_600_000);
    const hh = (h: number) => String(h % 24).padStart(2, '0');
    return `${hh(at.getUTCHours())}:00-${hh(at.getUTCHours() + 1)}:00`;
  }

  it('sizes nothing of a set shut now (paused or outside its windows), pulls nothing of it, and says why it waits; an open set beside it is sized and pulled', async () => {
    const runtime = new MemoryRuntime(100 * MiB);
    const sizes = new TableSizes();
    const windowed = set('a-windowed', [image(1)], 1);
    windowed.metadata.annotations = { ...windowed.metadata.annotations, [WINDOWS_ANNOTATION]: shutWindow(), [WINDOW_TZ_ANNOTATION]: 'UTC' };
    const paused = set('b-paused', [image(4)], 1);
    paused.metadata.annotations = { ...paused.metadata.annotations, [PAUSED_ANNOTATION]: new Date().toISOString() };
    const open = set('c-open', [image(2)], 1);
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster: fixedCluster([windowed, paused, open]), log: createLogger('silent'), concurrency: 1, reserveBytes: 0, imageSizes: sizes });
    const status = await agent.reconcile();
    expect(sizes.asked.flatMap((ask) => ask.images)).toEqual([image(2)]);
    expect([...runtime.images.keys()]).toEqual([image(2)]);
    const waiting = Object.fromEntries((status.pinnedImageSets ?? []).map((entry) => [entry.name, entry.waiting]));
    expect(waiting['a-windowed']).toMatch(/^paused until \d\d:00 UTC \(staging windows /);
    expect(waiting['b-paused']).toMatch(/^paused by prestage pause at /);
    expect(waiting['c-open']).toBeUndefined();
  });
});

describe('NodeAgent status bytes', () => {

  it("reports a set's bytes over its unique layers (the plan's figure) and each image's own exact size, stored or not", async () => {
    const runtime = new MemoryRuntime(100 * MiB);
    runtime.images.set(image(1), { pinned: false });
    const cluster = fixedCluster([set('a', [image(1), image(2), image(3)], 1)]);
    const written: NodePinnedImagesStatus[] = [];
    const write = cluster.writeStatus.bind(cluster);
    cluster.writeStatus = async (status) => {
      written.push(structuredClone(status));
      await write(status);
    };
    let releasePulls: () => void = () => undefined;
    const pullsMayEnd = new Promise<void>((resolve) => (releasePulls = resolve));
    const pull = runtime.pull.bind(runtime);
    runtime.pull = async (name: string) => {
      await pullsMayEnd;
      await pull(name);
    };
    const metrics = new AgentMetrics();
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), metrics, concurrency: 2, reserveBytes: 0, imageSizes: new TableSizes() });
    const pass = agent.reconcile();
    // While images 2 and 3 pull: the base layer is counted once; stored = image 1's layers.
    await vi.waitFor(() => expect(written.at(-1)?.pinnedImageSets?.[0]?.images.map((entry) => entry.state)).toEqual(['Pulled', 'Pulling', 'Pulling']));
    expect(written.at(-1)?.pinnedImageSets?.[0]).toMatchObject({ bytes: 7 * MiB, pulledBytes: 4 * MiB });
    expect(written.at(-1)?.pinnedImageSets?.[0]?.images.map((entry) => [entry.bytes, entry.pulledBytes])).toEqual([[4 * MiB, 4 * MiB], [4 * MiB, undefined], [5 * MiB, undefined]]);
    releasePulls();
    const done = (await pass).pinnedImageSets?.[0];
    expect(done).toMatchObject({ currentGeneration: 1, bytes: 7 * MiB, pulledBytes: 7 * MiB });
    expect(done?.images.map((entry) => [entry.state, entry.bytes, entry.pulledBytes])).toEqual([['Pinned', 4 * MiB, 4 * MiB], ['Pinned', 4 * MiB, 4 * MiB], ['Pinned', 5 * MiB, 5 * MiB]]);
    // The total never moved while pulling.
    expect(new Set(written.map((status) => status.pinnedImageSets?.[0]?.bytes))).toEqual(new Set([7 * MiB]));
    // Images 2 and 3 were pulled, each counted whole.
    expect((await metrics.pulledBytes.get()).values[0]?.value).toBe(9 * MiB);
  });

  it("reports no set bytes when an image's layers are unknown, and never CRI's size or a share of the annotation", async () => {
    const runtime = new MemoryRuntime(100 * MiB);
    runtime.images.set(image(1), { pinned: true });
    const cluster = fixedCluster([set('a', [image(1), image(4)], 20 * MiB)]);
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 1, reserveBytes: 0, imageSizes: new TableSizes() });
    const status = (await agent.reconcile()).pinnedImageSets?.[0];
    expect(status?.bytes).toBeUndefined();
    expect(status?.pulledBytes).toBeUndefined();
    expect(status?.images.map((entry) => [entry.name, entry.bytes])).toEqual([[image(1), 4 * MiB], [image(4), undefined]]);
  });
});

describe('NodeAgent pull retries', () => {
  it("publishes an image's error after each failed attempt, while it still retries", async () => {
    const runtime = new MemoryRuntime(100 * MiB);
    let failures = 2;
    const pull = runtime.pull.bind(runtime);
    runtime.pull = async (name: string) => {
      if (failures-- > 0) throw new Error('registry said 503 Service Unavailable');
      await pull(name);
    };
    const cluster = fixedCluster([set('a', [image(1)], MiB)]);
    const written: NodePinnedImagesStatus[] = [];
    const write = cluster.writeStatus.bind(cluster);
    cluster.writeStatus = async (status) => {
      written.push(structuredClone(status));
      await write(status);
    };
    // Retries 1.1 s apart: progress is written at most once a second.
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 1, reserveBytes: 0, retry: { attempts: 3, initialDelayMs: 1_100, maxDelayMs: 1_100 } });
    const status = await agent.reconcile();
    expect(status.pinnedImageSets?.[0]?.images[0]).toMatchObject({ state: 'Pinned', attempts: 3 });
    const retrying = written.map((entry) => entry.pinnedImageSets?.[0]).filter((entry) => entry?.images[0]?.state === 'Pulling' && entry.images[0].lastError);
    // Seen after the first and the second failed attempt, each time before the next one.
    expect([...new Set(retrying.map((entry) => entry?.images[0]?.attempts))]).toEqual([1, 2]);
    // The set is degraded from the first failed attempt (not only once attempts run out) until one succeeds.
    for (const entry of retrying) {
      expect(entry).toMatchObject({ lastFailedGeneration: 1, lastFailedGenerationError: `image ${image(1)}: registry said 503 Service Unavailable` });
      expect(entry?.images[0]?.lastError).toBe('registry said 503 Service Unavailable');
    }
    // Pulled but not pinned yet is no failure while the pass goes on; the pass ends done.
    const pulled = written.filter((entry) => entry.pinnedImageSets?.[0]?.images[0]?.state === 'Pulled');
    expect(pulled.every((entry) => entry.pinnedImageSets?.[0]?.lastFailedGeneration === undefined)).toBe(true);
    expect(status.pinnedImageSets?.[0]?.lastFailedGeneration).toBeUndefined();
  });
});

describe('NodeAgent liveness', () => {
  it('is healthy while every pull is within its deadline and not past it; with none in flight, within the stall time and a resync', async () => {
    const runtime = new MemoryRuntime(100 * MiB);
    let release: () => void = () => undefined;
    const hanging = new Promise<void>((resolve) => (release = resolve));
    let started: () => void = () => undefined;
    const pulling = new Promise<void>((resolve) => (started = resolve));
    const pull = runtime.pull.bind(runtime);
    runtime.pull = async (name: string) => {
      started();
      await hanging;
      await pull(name);
    };
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster: fixedCluster([set('a', [image(1)], MiB)]), log: createLogger('silent'), concurrency: 1, reserveBytes: 0, minPullTimeoutMs: 1_000, stallMs: 2_000, resyncMs: 3_000 });
    const pass = agent.reconcile();
    await pulling;
    // A pull is progress until CRI's timeout and a grace of a minute are past, however long the pass.
    expect(agent.healthy(Date.now() + 60_000)).toBe(true);
    expect(agent.healthy(Date.now() + 62_000)).toBe(false);
    release();
    await pass;
    expect(agent.healthy(Date.now() + 4_000)).toBe(true);
    expect(agent.healthy(Date.now() + 5_100)).toBe(false);
  });
});

describe('NodeAgent progress writes', () => {
  it('writes the status at most once a second while pulls run, however many images finish', async () => {
    const runtime = new MemoryRuntime(1024 * MiB);
    // 40 pulls of 60 ms, 4 at a time: about 0.6 s of pulls poking the publisher 80 times.
    runtime.pull = async (name: string) => {
      await new Promise((resolve) => setTimeout(resolve, 60));
      runtime.images.set(name, { pinned: false });
    };
    const cluster = fixedCluster([set('many', Array.from({ length: 40 }, (_, index) => image(index + 1)), MiB)]);
    const writes: number[] = [];
    cluster.writeStatus = async (status) => {
      writes.push(Date.now());
      cluster.status = status;
    };
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 4, reserveBytes: 0 });
    const status = await agent.reconcile();
    expect(status.pinnedImageSets?.[0]?.currentGeneration).toBe(1);
    // Progress writes (all but the last, the pass's own) are 1 s apart at least.
    const progress = writes.slice(0, -1);
    expect(progress.length).toBeGreaterThanOrEqual(1);
    for (let index = 1; index < progress.length; index++) expect(progress[index]! - progress[index - 1]!).toBeGreaterThanOrEqual(1_000);
  });
});

describe('NodeAgent verify requests', () => {
  const requested = (name: string, images: string[], request: string, selector?: PinnedImageSet['spec']['nodeSelector']): PinnedImageSet => ({
    ...set(name, images, 1),
    metadata: { name, uid: `uid-${name}`, generation: 1, annotations: { [VERIFY_REQUESTED_ANNOTATION]: request } },
    spec: { pinnedImages: images.map((entry) => ({ name: entry })), ...(selector ? { nodeSelector: selector } : {}) },
  });

  it('answers from CRI as it is now (no pull, no pin), for the selecting sets that carry a request; later status writes keep the answer', async () => {
    const runtime = new MemoryRuntime(100 * MiB);
    const sets = [
      requested('a', [image(1), image(2)], 'r1'),
      set('b', [image(3)], 1),
      requested('cp', [image(4)], 'r1', { matchExpressions: [{ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists' }] }),
    ];
    const cluster = fixedCluster(sets);
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 2, reserveBytes: 0 });
    await agent.reconcile();
    expect(cluster.status?.pinnedImageSets?.every((entry) => entry.currentGeneration === 1)).toBe(true);

    // Image 2 removed by hand, image 1 unpinned: the answer says so, and repairs nothing.
    runtime.images.delete(image(2));
    runtime.images.get(image(1))!.pinned = false;
    const pulls = runtime.pulls.length;
    await agent.verify();
    expect(runtime.pulls).toHaveLength(pulls);
    expect(runtime.images.get(image(1))?.pinned).toBe(false);
    expect(cluster.status?.verified?.sets).toEqual([
      { name: 'a', uid: 'uid-a', request: 'r1', images: 2, missingCount: 1, missing: [image(2)], unpinnedCount: 1, unpinned: [image(1)] },
    ]);
    expect(cluster.status?.verified?.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    // The rest of the status is the one last written.
    expect(cluster.status?.pinnedImageSets?.map((entry) => entry.name)).toEqual(['a', 'b']);

    // A pass repairs and writes its own status: the answer stays until the next request.
    await agent.reconcile();
    expect(cluster.status?.pinnedImageSets?.[0]?.currentGeneration).toBe(1);
    expect(cluster.status?.verified?.sets[0]).toMatchObject({ request: 'r1', missingCount: 1 });
    sets[0] = requested('a', [image(1), image(2)], 'r2');
    await agent.verify();
    expect(cluster.status?.verified?.sets).toEqual([{ name: 'a', uid: 'uid-a', request: 'r2', images: 2, missingCount: 0, missing: [], unpinnedCount: 0, unpinned: [] }]);
  });

  it('a restarted agent carries the answer the previous one left', async () => {
    const runtime = new MemoryRuntime(100 * MiB);
    const cluster = fixedCluster([set('b', [image(3)], 1)]);
    const verified = { time: '2026-11-24T06:00:00Z', sets: [{ name: 'a', request: 'r0', images: 1, missingCount: 0, missing: [], unpinnedCount: 0, unpinned: [] }] };
    cluster.status = { verified };
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 2, reserveBytes: 0 });
    await agent.reconcile();
    expect(cluster.status?.verified).toEqual(verified);
    expect(cluster.status?.pinnedImageSets?.[0]?.currentGeneration).toBe(1);
  });
});
