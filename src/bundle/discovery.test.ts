import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Plan } from '../plan/types.js';
import { ManifestNotFoundError, type FetchedManifest, type RegistryClient } from '../registry/client.js';
import { MediaType, parseManifest } from '../registry/manifest.js';
import type { ImageReference } from '../registry/reference.js';
import { sigstoreTag } from '../signatures/sigstore.js';
import type { BundleContent, BundleImage } from './content.js';
import { Discovery, ImageTracker, imageBytes } from './discovery.js';
import { TransferLanes } from './lanes.js';

const digestOf = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;

const image = (name: string, manifests: string[], blobs: string[]): BundleImage => ({
  pullSpec: `quay.io/x/${name}@${digestOf(manifests[0]!)}`,
  ref: { registry: 'quay.io', repository: `x/${name}`, digest: digestOf(manifests[0]!) },
  manifests: manifests.map((m) => ({ digest: digestOf(m), mediaType: MediaType.ociManifest, bytes: Buffer.from(m) })),
  blobs: blobs.map((b) => ({ mediaType: 'application/octet-stream', digest: digestOf(b), size: b.length })),
});

describe('which images are complete', () => {
  it('completes an image when its last part settles, and says whether any of it was written in this run', () => {
    const tracker = new ImageTracker();
    const a = image('a', ['ma'], ['config', 'layer']);
    expect(tracker.add(a, ['m', 'c', 'l'])).toBeUndefined();
    expect(tracker.settled('m', false)).toEqual([]);
    expect(tracker.settled('c', true)).toEqual([]);
    expect(tracker.settled('l', false)).toEqual([{ image: a, fetchedAny: true }]);
  });

  it('counts parts that settled before the image was read, and completes every image sharing the last part', () => {
    const tracker = new ImageTracker();
    const a = image('a', ['ma'], []);
    const b = image('b', ['mb'], []);
    const c = image('c', ['mc'], []);
    tracker.settled('shared-kept', false);
    // Every part settled already (brought by other images): complete at once.
    expect(tracker.add(a, ['shared-kept'])).toEqual({ image: a, fetchedAny: false });
    tracker.settled('shared-fetched', true);
    expect(tracker.add(b, ['shared-fetched', 'last'])).toBeUndefined();
    expect(tracker.add(c, ['shared-kept', 'last'])).toBeUndefined();
    expect(tracker.settled('last', false)).toEqual([{ image: b, fetchedAny: true }, { image: c, fetchedAny: false }]);
    expect(tracker.settled('last', true)).toEqual([]);
  });

  it('an image with nothing left to the layout is complete and kept', () => {
    const a = image('a', ['ma'], []);
    expect(new ImageTracker().add(a, [])).toEqual({ image: a, fetchedAny: false });
  });

  it('an image weighs its manifests, configs and layers', () => {
    expect(imageBytes(image('a', ['12345'], ['123', '1234567']))).toBe(15);
  });
});

/** A registry of OCI image manifests by repository and digest or tag; the rest is not found. */
function fakeRegistry(manifests: Record<string, FetchedManifest>): RegistryClient {
  return {
    fetchManifest: async (ref: ImageReference, reference?: string): Promise<FetchedManifest> => {
      await new Promise((resolve) => setImmediate(resolve));
      const found = manifests[`${ref.repository}/${reference ?? ref.digest}`];
      if (!found) throw new ManifestNotFoundError(`${ref.repository} ${reference} not found`);
      return found;
    },
  } as unknown as RegistryClient;
}

function imageManifest(config: string, layers: string[]): FetchedManifest {
  const descriptor = (text: string) => ({ mediaType: 'application/octet-stream', digest: digestOf(text), size: text.length });
  const bytes = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MediaType.ociManifest, config: descriptor(config), layers: layers.map(descriptor) }));
  return { digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, bytes, manifest: parseManifest(bytes, MediaType.ociManifest, 'test') };
}

const planOf = (pullSpecs: string[], skipped: string[] = []): Plan => ({
  release: { architecture: 'amd64' },
  images: pullSpecs.map((pullSpec) => ({ pullSpec })),
  skipped: skipped.map((pullSpec) => ({ pullSpec })),
}) as unknown as Plan;

describe('reading what the plan names', () => {
  it('hands on each image and attachment as read, then the whole content once: images in plan order, attachments sorted', async () => {
    const one = imageManifest('config-1', ['layer-1']);
    const two = imageManifest('config-2', ['layer-1', 'layer-2']);
    const signsTwo = imageManifest('sig-config', ['sig-payload']);
    const client = fakeRegistry({ [`x/one/${one.digest}`]: one, [`x/two/${two.digest}`]: two, [`x/two/${sigstoreTag(two.digest)}`]: signsTwo });
    const taken: string[] = [];
    const contents: BundleContent[] = [];
    const sigstore = { looked: 0, found: 0 };
    const discovery = new Discovery(client, planOf([`quay.io/x/one@${one.digest}`], [`quay.io/x/two@${two.digest}`]), { allPlatforms: false, sigstore: true }, sigstore, {
      take: async (read) => void taken.push(read.pullSpec),
      allRead: async (content) => void contents.push(content),
    });
    expect(discovery.pullSpecs).toEqual([`quay.io/x/one@${one.digest}`, `quay.io/x/two@${two.digest}`]);
    const lanes = new TransferLanes(4, 1);
    await discovery.start(lanes);
    await lanes.drained();

    const attachment = `quay.io/x/two:${sigstoreTag(two.digest)}`;
    expect(taken.sort()).toEqual([attachment, ...discovery.pullSpecs].sort());
    expect(contents).toHaveLength(1);
    expect(contents[0]!.images.map((i) => i.pullSpec)).toEqual([...discovery.pullSpecs, attachment]);
    expect(contents[0]!.images[2]!.signs).toBe(two.digest);
    // Every config and layer once, first use first.
    expect([...contents[0]!.blobs.keys()]).toEqual(['config-1', 'layer-1', 'config-2', 'layer-2', 'sig-config', 'sig-payload'].map(digestOf));
    expect(sigstore).toEqual({ looked: 2, found: 1 });
  });

  it('without sigstore looks for no attachment; a plan naming nothing is read at once', async () => {
    const one = imageManifest('config-1', []);
    const sigstore = { looked: 0, found: 0 };
    const read: BundleContent[] = [];
    const hooks = { take: async () => undefined, allRead: async (content: BundleContent) => void read.push(content) };
    const lanes = new TransferLanes(2, 1);
    await new Discovery(fakeRegistry({ [`x/one/${one.digest}`]: one }), planOf([`quay.io/x/one@${one.digest}`]), { allPlatforms: false, sigstore: false }, sigstore, hooks).start(lanes);
    await lanes.drained();
    expect(read.map((c) => c.images.length)).toEqual([1]);
    expect(sigstore).toEqual({ looked: 0, found: 0 });

    await new Discovery(fakeRegistry({}), planOf([]), { allPlatforms: false, sigstore: true }, sigstore, hooks).start(new TransferLanes(2, 1));
    expect(read.map((c) => c.images.length)).toEqual([1, 0]);
  });
});
