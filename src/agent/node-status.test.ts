import { describe, expect, it } from 'vitest';
import { API_VERSION, type NodePinnedImagesStatus, type PinnedImageSet } from '../api/prestage.js';
import type { RuntimeImage } from '../cri/client.js';
import { buildStatus, failuresOf, isSetFailed, type PullHistory, type StatusInput } from './node-status.js';

const image = (n: number) => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;
const stored = (n: number, pinned: boolean): RuntimeImage => ({ id: `id${n}`, repoDigests: [image(n)], repoTags: [], size: 1, pinned });
const set = (name: string, images: number[], generation = 1, uid = `uid-${name}`): PinnedImageSet => ({
  apiVersion: API_VERSION,
  kind: 'PinnedImageSet',
  metadata: { name, uid, generation },
  spec: { pinnedImages: images.map((n) => ({ name: image(n) })) },
});

const input = (overrides: Partial<StatusInput>): StatusInput => ({
  sets: [],
  stored: [],
  filesystem: { capacityBytes: 100, freeBytes: 40 },
  previous: undefined,
  afterPin: true,
  setErrors: new Map(),
  history: () => undefined,
  imageBytes: () => undefined,
  setBytes: () => undefined,
  ...overrides,
});

describe('buildStatus: images', () => {
  it('states each image from the runtime first, then its pull history; an error shows only while it is not stored', () => {
    const history = new Map<string, PullHistory>([
      [image(2), { attempts: 1, pulling: true }],
      [image(3), { attempts: 3, pulling: false, lastError: 'i/o timeout' }],
      [image(4), { attempts: 2, pulling: false, lastError: 'old error' }],
    ]);
    const status = buildStatus(input({ sets: [set('a', [1, 2, 3, 4, 5])], stored: [stored(4, false), stored(5, true)], history: (name) => history.get(name), afterPin: false }));
    expect(status.pinnedImageSets?.[0]?.images).toEqual([
      { name: image(1), state: 'Pending', attempts: 0 },
      { name: image(2), state: 'Pulling', attempts: 1 },
      { name: image(3), state: 'Failed', attempts: 3, lastError: 'i/o timeout' },
      { name: image(4), state: 'Pulled', attempts: 2 },
      { name: image(5), state: 'Pinned', attempts: 0 },
    ]);
    expect(status.imageFilesystem).toEqual({ capacityBytes: 100, freeBytes: 40 });
  });

  it("carries the bytes disk admission knows: the image's whole, pulled once stored, and the set's over unique layers", () => {
    const status = buildStatus(input({ sets: [set('a', [1, 2])], stored: [stored(1, true)], imageBytes: (name) => (name === image(1) ? 10 : 20), setBytes: () => ({ bytes: 25, pulledBytes: 10 }) }));
    const [a] = status.pinnedImageSets ?? [];
    expect(a).toMatchObject({ bytes: 25, pulledBytes: 10 });
    expect(a?.images.map((entry) => [entry.bytes, entry.pulledBytes])).toEqual([[10, 10], [20, undefined]]);
  });
});

describe('buildStatus: sets and generations', () => {
  it('makes the desired generation current only while every image is pinned, and no set error', () => {
    const all = [stored(1, true), stored(2, true)];
    expect(buildStatus(input({ sets: [set('a', [1, 2])], stored: all })).pinnedImageSets?.[0]?.currentGeneration).toBe(1);
    const failed = buildStatus(input({ sets: [set('a', [1, 2])], stored: all, setErrors: new Map([['a', 'pinning failed']]) })).pinnedImageSets?.[0];
    expect(failed).toMatchObject({ lastFailedGeneration: 1, lastFailedGenerationError: 'pinning failed' });
    expect(failed?.currentGeneration).toBeUndefined();
  });

  it('fails a set from the first failed attempt of an image, while it is retried too', () => {
    const status = buildStatus(input({ sets: [set('a', [1, 2])], history: (name) => (name === image(2) ? { attempts: 1, pulling: true, lastError: 'reset' } : undefined), afterPin: false }));
    expect(status.pinnedImageSets?.[0]).toMatchObject({ lastFailedGeneration: 1, lastFailedGenerationError: `image ${image(2)}: reset` });
  });

  it('after pinning, an image pulled but not pinned means the reload did not take; before, it is progress', () => {
    const sets = [set('a', [1, 2])];
    const stores = [stored(1, true), stored(2, false)];
    expect(buildStatus(input({ sets, stored: stores })).pinnedImageSets?.[0]?.lastFailedGenerationError).toBe(`image ${image(2)} is not pinned after reloading the runtime`);
    expect(buildStatus(input({ sets, stored: stores, afterPin: false })).pinnedImageSets?.[0]?.lastFailedGeneration).toBeUndefined();
  });

  it('keeps an earlier current generation while a newer one is pulled, for the same set object only', () => {
    const previous: NodePinnedImagesStatus = { pinnedImageSets: [{ name: 'a', uid: 'uid-a', desiredGeneration: 1, currentGeneration: 1, images: [] }] };
    expect(buildStatus(input({ sets: [set('a', [1], 2)], previous })).pinnedImageSets?.[0]).toMatchObject({ desiredGeneration: 2, currentGeneration: 1 });
    expect(buildStatus(input({ sets: [set('a', [1], 2, 'uid-new')], previous })).pinnedImageSets?.[0]?.currentGeneration).toBeUndefined();
  });

  it('cuts a failure to 32 KiB', () => {
    const status = buildStatus(input({ sets: [set('a', [1])], setErrors: new Map([['a', 'x'.repeat(40_000)]]) }));
    expect(status.pinnedImageSets?.[0]?.lastFailedGenerationError).toHaveLength(32_768);
  });
});

describe('buildStatus: conditions', () => {
  it('counts sets done, progressing and failed; a transition time moves only when its status does', () => {
    const sets = [set('a', [1]), set('b', [2]), set('c', [3])];
    const first = buildStatus(input({ sets, stored: [stored(1, true)], setErrors: new Map([['c', 'no disk']]), afterPin: false }));
    expect(first.conditions?.map((entry) => [entry.type, entry.status, entry.reason, entry.message])).toEqual([
      ['Ready', 'False', 'SetsPending', '1/3 sets pulled and pinned'],
      ['Progressing', 'True', 'ImagePrefetch', '1 set in progress'],
      ['Degraded', 'True', 'PrefetchFailed', 'c: no disk'],
    ]);
    const old = '2020-01-01T00:00:00Z';
    const previous: NodePinnedImagesStatus = { conditions: (first.conditions ?? []).map((entry) => ({ ...entry, lastTransitionTime: old })) };
    const next = buildStatus(input({ sets, stored: [stored(1, true), stored(2, true)], setErrors: new Map([['c', 'no disk']]), previous }));
    expect(next.conditions?.map((entry) => [entry.type, entry.status, entry.lastTransitionTime === old])).toEqual([
      ['Ready', 'False', true],
      ['Progressing', 'False', false],
      ['Degraded', 'True', true],
    ]);
  });
});

describe('failuresOf and isSetFailed', () => {
  it('names the sets failed at their desired generation, with generation and error', () => {
    const status: NodePinnedImagesStatus = {
      pinnedImageSets: [
        { name: 'a', desiredGeneration: 2, lastFailedGeneration: 2, lastFailedGenerationError: 'boom', images: [] },
        { name: 'b', desiredGeneration: 3, lastFailedGeneration: 2, lastFailedGenerationError: 'old', images: [] },
        { name: 'c', desiredGeneration: 1, currentGeneration: 1, images: [] },
      ],
    };
    expect([...failuresOf(status)]).toEqual([['a', '2 boom']]);
    expect(status.pinnedImageSets?.map(isSetFailed)).toEqual([true, false, false]);
    expect(failuresOf(undefined).size).toBe(0);
  });
});

describe('the node\'s listing of stored images (status.held), for preflight', () => {
  it('names each stored image once by its first repo digest, sorted, counts those stored by tag only, and reports the reserve', () => {
    const byTag: RuntimeImage = { id: 'tagged', repoDigests: [], repoTags: ['quay.io/ns/repo:latest'], size: 1, pinned: false };
    const twoNames: RuntimeImage = { id: 'two', repoDigests: [image(1), `mirror.example/ns/repo@sha256:${String(1).padStart(64, '0')}`], repoTags: [], size: 1, pinned: false };
    const status = buildStatus(input({ stored: [stored(3, true), twoNames, byTag, stored(2, false)], reserveBytes: 16 }));
    expect(status.held).toEqual({ count: 4, images: [image(1), image(2), image(3)] });
    expect(status.imageFilesystem).toEqual({ capacityBytes: 100, freeBytes: 40, reserveBytes: 16 });
  });

  it('names at most MAX_HELD_IMAGES, and the count says how many more there are', () => {
    const many = Array.from({ length: 1100 }, (_, i) => stored(i, false));
    const status = buildStatus(input({ stored: many }));
    expect([status.held!.count, status.held!.images.length]).toEqual([1100, 1000]);
  });
});
