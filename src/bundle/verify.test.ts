import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PLAN_API_VERSION } from '../plan/types.js';
import { MediaType } from '../registry/manifest.js';
import { REF_NAME, type BundleMetadata, type LayoutIndex } from './layout.js';
import { checkBundle, describeProblem, type BlobInventory } from './verify.js';

const digestOf = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const blob = (text: string) => {
  const bytes = Buffer.from(text);
  return { bytes, digest: digestOf(bytes), size: bytes.length };
};
const json = (o: unknown) => blob(JSON.stringify(o));

const config = blob('{"config":1}');
const shared = blob('shared base layer');
const own = blob('own layer');
const armLayer = blob('arm64 layer');
const image = json({ schemaVersion: 2, mediaType: MediaType.dockerManifest, config: { digest: config.digest, size: config.size }, layers: [shared, own].map((l) => ({ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', digest: l.digest, size: l.size })) });
const armImage = json({ schemaVersion: 2, mediaType: MediaType.ociManifest, config: { digest: config.digest, size: config.size }, layers: [{ digest: armLayer.digest, size: armLayer.size }] });
const list = json({
  schemaVersion: 2,
  mediaType: MediaType.ociIndex,
  manifests: [
    { mediaType: MediaType.dockerManifest, digest: image.digest, size: image.size, platform: { architecture: 'amd64', os: 'linux' } },
    { mediaType: MediaType.ociManifest, digest: armImage.digest, size: armImage.size, platform: { architecture: 'arm64', os: 'linux' } },
  ],
});
const A = `quay.io/ns/a@${image.digest}`;
const B = `quay.io/ns/b@${list.digest}`;
const index: LayoutIndex = {
  schemaVersion: 2,
  mediaType: MediaType.ociIndex,
  manifests: [[A, image], [B, list]].map(([name, m]) => ({ mediaType: 'x', digest: (m as typeof image).digest, size: 1, annotations: { [REF_NAME]: name as string } })),
};
const metadata = (previous: string[] = []): BundleMetadata => ({
  apiVersion: PLAN_API_VERSION,
  kind: 'Bundle',
  release: { pullSpec: A, version: '4.16.3' },
  architecture: 'amd64',
  allPlatforms: false,
  ...(previous.length ? { previous: { source: 'old-bundle', blobs: previous.map((digest) => ({ digest, size: 1 })) } } : {}),
});

function inventory(blobs: Array<{ digest: string; bytes: Buffer }>, corrupt: string[] = []): BlobInventory {
  const byDigest = new Map(blobs.map((b) => [b.digest, b.bytes]));
  return {
    verified: new Map(blobs.map((b) => [b.digest, b.bytes.length])),
    corrupt: new Set(corrupt),
    read: async (d) => byDigest.get(d)!,
  };
}

describe('checking a bundle', () => {
  it('passes a complete bundle, needing only the planned platform of a list', async () => {
    const report = await checkBundle({ index, metadata: metadata() }, inventory([image, list, config, shared, own]));
    expect(report).toMatchObject({ images: 2, blobs: 5, problems: [], fromPrevious: 0 });
  });

  it('names each missing or corrupt blob once, with every image that needs it', async () => {
    const report = await checkBundle({ index, metadata: metadata() }, inventory([image, list, own], [shared.digest]));
    expect(report.problems.map(describeProblem).sort()).toEqual([
      `corrupt layer ${shared.digest} needed by ${A}, ${B}`,
      `missing config ${config.digest} needed by ${A}, ${B}`,
    ]);
  });

  it('counts blobs left to the previous bundle instead of calling them missing', async () => {
    const report = await checkBundle({ index, metadata: metadata([shared.digest, own.digest]) }, inventory([image, list, config]));
    expect(report.problems).toEqual([]);
    expect(report.fromPrevious).toBe(2);
  });

  it('reports a missing manifest and a damaged file no image needs', async () => {
    const stray = `sha256:${'f'.repeat(64)}`;
    const report = await checkBundle({ index, metadata: metadata() }, inventory([list, config, shared, own], [stray]));
    expect(report.problems.map(describeProblem)).toEqual([
      `missing manifest ${image.digest} needed by ${A}, ${B}`,
      `corrupt unreferenced blob ${stray}`,
    ]);
  });
});
