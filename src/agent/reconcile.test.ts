import { describe, expect, it } from 'vitest';
import { API_VERSION, DISK_BYTES_ANNOTATION, type NodePinnedImagesStatus, type PinnedImageSet } from '../api/prestage.js';
import type { RuntimeImage } from '../cri/client.js';
import { createLogger } from '../telemetry/log.js';
import { renderPinDropIn } from './crio.js';
import { NodeAgent, type AgentCluster } from './reconcile.js';
import type { ImageFilesystem, ImageRuntime } from './runtime.js';
import { selectorMatches } from './selector.js';

const image = (n: number) => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;
const MiB = 2 ** 20;

/** A runtime in memory: pulls always work, pins take effect at once. */
class MemoryRuntime implements ImageRuntime {
  readonly images = new Map<string, { pinned: boolean }>();
  readonly pulls: string[] = [];
  constructor(private readonly freeBytes: number) {}
  async listImages(): Promise<RuntimeImage[]> {
    return [...this.images].map(([name, { pinned }]) => ({ id: name, repoTags: [], repoDigests: [name], size: MiB, pinned }));
  }
  async pull(name: string): Promise<void> {
    this.pulls.push(name);
    this.images.set(name, { pinned: false });
  }
  async imageFilesystem(): Promise<ImageFilesystem> {
    return { mountpoint: '/var/lib/containers', capacityBytes: 100 * MiB, freeBytes: this.freeBytes };
  }
  async pin(names: readonly string[]): Promise<void> {
    for (const [name, entry] of this.images) entry.pinned = names.includes(name);
  }
  close(): void {}
}

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
    expect(b?.lastFailedGenerationError).toBe(`not enough disk: 2 images need ${6 * MiB} bytes, ${3 * MiB} free after the ${MiB}-byte reserve and earlier sets; nothing pulled`);
    expect(b?.images.map((entry) => entry.state)).toEqual(['Pinned', 'Pending', 'Pending']);
    expect(status.conditions?.map((condition) => [condition.type, condition.status])).toEqual([['Ready', 'False'], ['Progressing', 'False'], ['Degraded', 'True']]);
  });
});

describe('selectorMatches', () => {
  const labels = { 'node-role.kubernetes.io/worker': '', zone: 'a' };
  it('selects every node with an empty or absent selector', () => {
    expect(selectorMatches(undefined, labels)).toBe(true);
    expect(selectorMatches({}, labels)).toBe(true);
  });
  it('applies matchLabels and every matchExpressions operator', () => {
    expect(selectorMatches({ matchLabels: { zone: 'a' } }, labels)).toBe(true);
    expect(selectorMatches({ matchLabels: { zone: 'b' } }, labels)).toBe(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a', 'b'] }] }, labels)).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }, labels)).toBe(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'node-role.kubernetes.io/worker', operator: 'Exists' }] }, labels)).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'node-role.kubernetes.io/master', operator: 'DoesNotExist' }] }, labels)).toBe(true);
  });
  it('selects nothing with an operator it does not know', () => {
    expect(selectorMatches({ matchExpressions: [{ key: 'zone', operator: 'Gt', values: ['1'] }] }, labels)).toBe(false);
  });
});

describe('renderPinDropIn', () => {
  it('sorts and deduplicates, so equal pin lists give equal bytes', () => {
    expect(renderPinDropIn([image(2), image(1), image(2)])).toBe(renderPinDropIn([image(1), image(2)]));
    expect(renderPinDropIn([image(1)])).toContain(`[crio.image]\npinned_images = [\n  "${image(1)}",\n]\n`);
  });
});
