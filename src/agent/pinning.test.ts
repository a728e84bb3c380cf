import { describe, expect, it } from 'vitest';
import { API_VERSION, type PinnedImageSet } from '../api/prestage.js';
import type { RuntimeImage } from '../cri/client.js';
import { createLogger } from '../telemetry/log.js';
import { AgentMetrics } from './metrics.js';
import { imagesToPin, pinImages } from './pinning.js';
import type { ImageRuntime } from './runtime.js';

const image = (n: number) => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;
const stored = (n: number, pinned: boolean): RuntimeImage => ({ id: `id${n}`, repoDigests: [image(n)], repoTags: [], size: 1, pinned });
const set = (name: string, images: number[]): PinnedImageSet => ({ apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name }, spec: { pinnedImages: images.map((n) => ({ name: image(n) })) } });

describe('imagesToPin', () => {
  it('pins every image of a set whose images are all stored', () => {
    expect([...imagesToPin([set('a', [1, 2])], [stored(1, false), stored(2, true)], new Map())].sort()).toEqual([image(1), image(2)]);
  });

  it('a set repairing drift keeps only what is pinned already: one removed image never unpins its siblings, and pins nothing new', () => {
    const pins = imagesToPin([set('a', [1, 2, 3])], [stored(1, true), stored(2, false)], new Map());
    expect([...pins]).toEqual([image(1)]);
  });

  it('a set failed this pass is not satisfied, even with all its images stored; a satisfied set sharing an image pins it', () => {
    const failed = new Map([['a', 'not enough disk']]);
    expect([...imagesToPin([set('a', [1, 2])], [stored(1, true), stored(2, false)], failed)]).toEqual([image(1)]);
    expect([...imagesToPin([set('a', [1, 2]), set('b', [2])], [stored(1, true), stored(2, false)], failed)].sort()).toEqual([image(1), image(2)]);
  });

  it('unpins what no selecting set names', () => {
    expect([...imagesToPin([set('a', [1])], [stored(1, true), stored(9, true)], new Map())]).toEqual([image(1)]);
    expect(imagesToPin([], [stored(9, true)], new Map()).size).toBe(0);
  });
});

describe('pinImages', () => {
  const runtime = (pin: ImageRuntime['pin']): ImageRuntime => ({ pin, listImages: async () => [], pull: async () => undefined, imageFilesystem: async () => ({ mountpoint: '/', capacityBytes: 0, freeBytes: 0 }), close: () => undefined });

  it('pins through the runtime and counts the pins', async () => {
    const pinned: string[][] = [];
    const metrics = new AgentMetrics();
    const failure = await pinImages(runtime(async (images) => void pinned.push([...images])), new Set([image(1), image(2)]), createLogger('silent'), metrics);
    expect(failure).toBeUndefined();
    expect(pinned).toEqual([[image(1), image(2)]]);
    expect((await metrics.pinnedImages.get()).values[0]?.value).toBe(2);
  });

  it("answers the runtime's failure as one line (the previous pins are back in force), and counts nothing", async () => {
    const metrics = new AgentMetrics();
    const failure = await pinImages(runtime(async () => Promise.reject(new Error('reload failed:\n  crio exited'))), new Set([image(1)]), createLogger('silent'), metrics);
    expect(failure).toBe('reload failed: crio exited');
    expect((await metrics.pinnedImages.get()).values[0]?.value).toBe(0);
  });
});
