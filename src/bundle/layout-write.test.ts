import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PLAN_API_VERSION, type Plan, type PlanRelease } from '../plan/types.js';
import { MediaType } from '../registry/manifest.js';
import type { GatheredSignatures } from '../signatures/gather.js';
import { contentOf, type BundleImage } from './content.js';
import { blobPath, parseBundleFiles, REF_NAME } from './layout.js';
import {
  bundleMetadata, finishLayout, layoutFiles, layoutIndex, makeLayoutDirs, refuseOtherContent, releaseSignatureRecord, releaseTags, sizeOf, storeReleaseSignatures,
  writeMetadata, writeOciLayout,
} from './layout-write.js';
import { SyncBehind } from './sync-behind.js';

const digestOf = (text: string | Buffer): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;

const release = (architecture: string, multiArch = false): PlanRelease => ({
  pullSpec: `quay.io/openshift-release-dev/ocp-release@sha256:${'a'.repeat(64)}`,
  digest: `sha256:${'a'.repeat(64)}`,
  manifestDigest: `sha256:${'a'.repeat(64)}`,
  version: '4.16.3',
  architecture,
  multiArch,
  channels: [],
});

describe('release tags for the mirror', () => {
  it('spells the architecture as OpenShift release tags do, -multi for a multi-arch release', () => {
    expect(releaseTags(release('amd64'))).toEqual(['4.16.3-x86_64']);
    expect(releaseTags(release('arm64'))).toEqual(['4.16.3-aarch64']);
    expect(releaseTags(release('s390x'))).toEqual(['4.16.3-s390x']);
    expect(releaseTags(release('arm64', true))).toEqual(['4.16.3-multi']);
  });

  it('adds the tag the release was named by, once', () => {
    expect(releaseTags(release('amd64'), '4.16.3-x86_64')).toEqual(['4.16.3-x86_64']);
    expect(releaseTags(release('amd64'), 'latest-4.16')).toEqual(['4.16.3-x86_64', 'latest-4.16']);
  });
});

const plan = { release: release('amd64') } as unknown as Plan;
const sigstore = { copied: true, looked: 2, found: 1 };
const descriptor = (text: string) => ({ mediaType: 'application/octet-stream', digest: digestOf(text), size: text.length });

describe('prestage-bundle.json', () => {
  it('says whose bundle it is; the previous bundle and the blobs it relies on, sorted, only with --since', () => {
    expect(bundleMetadata(plan, { allPlatforms: false, releaseTag: 'latest-4.16' }, [], { sigstore })).toEqual({
      apiVersion: PLAN_API_VERSION,
      kind: 'Bundle',
      release: { pullSpec: plan.release.pullSpec, version: '4.16.3', tags: ['4.16.3-x86_64', 'latest-4.16'] },
      architecture: 'amd64',
      allPlatforms: false,
      signatures: { sigstore },
    });
    const [x, y] = [descriptor('x'), descriptor('y')].sort((a, b) => (a.digest < b.digest ? 1 : -1));
    const since = bundleMetadata(plan, { allPlatforms: true, previous: { source: 'old/' } }, [x!, y!], { sigstore });
    expect(since.previous).toEqual({ source: 'old/', blobs: [y, x].map((d) => ({ digest: d!.digest, size: d!.size })) });
  });
});

const gathered: GatheredSignatures = {
  digest: `sha256:${'a'.repeat(64)}`,
  signatures: [Buffer.from('signature one'), Buffer.from('signature two')],
  keysText: '-----BEGIN PGP PUBLIC KEY BLOCK-----',
  verifiedWith: ['Red Hat'],
  from: ['https://mirror.openshift.com/pub/openshift-v4/signatures'],
};

describe('the release signature record', () => {
  it('names each signature and the keys by digest, in order, and says where they came from', () => {
    const { record, blobs } = releaseSignatureRecord(gathered);
    const ref = (text: string) => ({ digest: digestOf(text), size: text.length });
    expect(record).toEqual({
      digest: gathered.digest,
      signatures: [ref('signature one'), ref('signature two')],
      keys: ref('-----BEGIN PGP PUBLIC KEY BLOCK-----'),
      verifiedWith: ['Red Hat'],
      from: gathered.from,
    });
    expect(blobs.map((b) => b.bytes.toString())).toEqual(['signature one', 'signature two', '-----BEGIN PGP PUBLIC KEY BLOCK-----']);
    expect(Object.keys(record)).not.toContain('unsigned');
  });

  it('an unsigned release records why, with no signature and no keys', () => {
    const { record, blobs } = releaseSignatureRecord({ digest: gathered.digest, signatures: [], verifiedWith: [], from: [], unsigned: 'no verification key was given (--allow-unsigned)' });
    expect(record).toEqual({ digest: gathered.digest, signatures: [], verifiedWith: [], from: [], unsigned: 'no verification key was given (--allow-unsigned)' });
    expect(blobs).toEqual([]);
  });
});

const image = (name: string, manifests: string[], blobs: string[]): BundleImage => ({
  pullSpec: `quay.io/x/${name}@${digestOf(manifests[0]!)}`,
  ref: { registry: 'quay.io', repository: `x/${name}`, digest: digestOf(manifests[0]!) },
  manifests: manifests.map((m) => ({ digest: digestOf(m), mediaType: MediaType.ociManifest, bytes: Buffer.from(m) })),
  blobs: blobs.map(descriptor),
});

describe('the layout files and index', () => {
  it('holds every manifest, config and layer once, but those left to the previous bundle; the index names each image by its top manifest', () => {
    const content = contentOf([image('a', ['list-a', 'ma'], ['c1', 'shared']), image('b', ['ma'], ['shared', 'old'])]);
    const files = layoutFiles(content, (d) => d === digestOf('old'));
    expect(files.map((f) => f.digest)).toEqual(['list-a', 'ma', 'c1', 'shared'].map(digestOf));
    expect(sizeOf(files)).toBe('list-a'.length + 'ma'.length + 'c1'.length + 'shared'.length);
    expect(layoutIndex(content).manifests).toEqual(content.images.map((i) => ({
      mediaType: MediaType.ociManifest, digest: i.manifests[0]!.digest, size: i.manifests[0]!.bytes.length, annotations: { [REF_NAME]: i.pullSpec },
    })));
  });
});

describe('writing the layout', () => {
  it('refuses a directory holding another layout; writes the files a bundle reads back; drops what other content left', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'prestage-layout-'));
    try {
      await refuseOtherContent(dir, plan);
      await makeLayoutDirs(dir);
      const stray = digestOf('stray');
      await writeFile(blobPath(dir, stray), 'stray');
      await expect(refuseOtherContent(dir, plan)).rejects.toThrow(/not a prestage bundle/);

      const { record, files } = storeReleaseSignatures(dir, gathered);
      expect(await readFile(blobPath(dir, files[0]!.digest), 'utf8')).toBe('signature one');
      await writeMetadata(dir, plan, { allPlatforms: false }, [], { release: record, sigstore });
      await refuseOtherContent(dir, plan);
      await expect(refuseOtherContent(dir, { release: { ...release('arm64') } } as unknown as Plan)).rejects.toThrow(/holds the bundle of release 4.16.3 amd64/);
      await writeOciLayout(dir);

      const index = `${JSON.stringify(layoutIndex(contentOf([])), null, 2)}\n`;
      await finishLayout(dir, files, index, [stray.slice('sha256:'.length), ...files.map((f) => f.digest.slice('sha256:'.length))], new SyncBehind());
      expect((await readdir(join(dir, 'blobs', 'sha256'))).sort()).toEqual(files.map((f) => f.digest.slice('sha256:'.length)).sort());
      await expect(stat(join(dir, '.partial'))).rejects.toMatchObject({ code: 'ENOENT' });
      const read = Object.fromEntries(await Promise.all(['oci-layout', 'index.json', 'prestage-bundle.json'].map(async (f) => [f, await readFile(join(dir, f), 'utf8')])));
      expect(parseBundleFiles(read, dir).metadata.signatures?.release).toEqual(record);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
