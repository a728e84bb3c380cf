import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RegistryClient } from '../registry/client.js';
import type { Descriptor } from '../registry/manifest.js';
import { MediaType } from '../registry/manifest.js';
import { blobPath, partialPath } from './layout.js';
import { TransferProgress } from './progress.js';
import { SyncBehind } from './sync-behind.js';
import { BlobTransfers, IN_MEMORY_BLOB, leftovers, storeBlob } from './transfer.js';

const digestOf = (bytes: Buffer): string => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
const descriptorOf = (bytes: Buffer): Descriptor => ({ mediaType: 'application/octet-stream', digest: digestOf(bytes), size: bytes.length });
const from = { registry: 'quay.io', repository: 'x/y' };

/** A registry holding `blobs`, counting what it is asked for. */
function serving(blobs: readonly Buffer[]) {
  const byDigest = new Map(blobs.map((b) => [digestOf(b), b]));
  const asked: string[] = [];
  const client = {
    readBlob: async (_ref: unknown, blob: Descriptor): Promise<Buffer> => {
      asked.push(`read ${blob.digest}`);
      return byDigest.get(blob.digest)!;
    },
    blobStream: (_ref: unknown, blob: Descriptor, resume?: { offset: number }): Readable => {
      asked.push(`stream ${blob.digest} from ${resume?.offset ?? 0}`);
      return Readable.from([byDigest.get(blob.digest)!.subarray(resume?.offset ?? 0)]);
    },
  } as unknown as RegistryClient;
  return { client, asked };
}

describe('blobs into the layout', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'prestage-transfer-'));
    await mkdir(join(dir, 'blobs', 'sha256'), { recursive: true });
    await mkdir(join(dir, '.partial'), { recursive: true });
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const progress = (): TransferProgress => new TransferProgress(new Writable({ write: (_c, _e, done) => done() }), { verb: 'bundled', totalBytes: 0, totalImages: 1, tty: false });

  it('stores verified bytes under blobs/ by digest, by way of .partial/', async () => {
    const bytes = Buffer.from('{"config":true}');
    const path = storeBlob(dir, digestOf(bytes), bytes);
    expect(path).toBe(blobPath(dir, digestOf(bytes)));
    expect(await readFile(path, 'utf8')).toBe('{"config":true}');
    await expect(stat(partialPath(dir, digestOf(bytes)))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('keeps what an earlier run left whole, fetches what is damaged again, and continues a partial download', async () => {
    const manifest = Buffer.from('{"schemaVersion":2}');
    const damagedManifest = Buffer.from('{"schemaVersion":3}');
    const kept = randomBytes(1000);
    const damaged = randomBytes(1000);
    const small = randomBytes(2000);
    const resumed = randomBytes(IN_MEMORY_BLOB + 100_000);
    const tooLong = randomBytes(IN_MEMORY_BLOB + 10);
    await writeFile(blobPath(dir, digestOf(manifest)), manifest);
    await writeFile(blobPath(dir, digestOf(damagedManifest)), '{"schemaVersion":4}');
    await writeFile(blobPath(dir, digestOf(kept)), kept);
    await writeFile(blobPath(dir, digestOf(damaged)), randomBytes(1000));
    await writeFile(partialPath(dir, digestOf(resumed)), resumed.subarray(0, 30_000));
    await writeFile(partialPath(dir, digestOf(tooLong)), randomBytes(tooLong.length + 1));
    const left = await leftovers(dir);
    expect(left.blobs.size).toBe(4);
    expect(left.partial.get(digestOf(resumed).slice('sha256:'.length))).toBe(30_000);

    const { client, asked } = serving([damaged, small, resumed, tooLong]);
    const written = new SyncBehind();
    const transfers = new BlobTransfers(client, dir, left, progress(), written);
    const signal = new AbortController().signal;
    const manifestOf = (bytes: Buffer) => ({ digest: digestOf(bytes), mediaType: MediaType.ociManifest, bytes });
    expect(await transfers.manifest(manifestOf(manifest))).toBe(false);
    expect(await transfers.manifest(manifestOf(damagedManifest))).toBe(true);
    expect(await transfers.blob(descriptorOf(kept), from, signal, 1)).toBe(false);
    expect(await transfers.blob(descriptorOf(damaged), from, signal, 1)).toBe(true);
    expect(await transfers.blob(descriptorOf(small), from, signal, 1)).toBe(true);
    expect(await transfers.blob(descriptorOf(resumed), from, signal, 1)).toBe(true);
    expect(await transfers.blob(descriptorOf(tooLong), from, signal, 1)).toBe(true);
    await written.finish();

    for (const bytes of [manifest, damagedManifest, kept, damaged, small, resumed, tooLong]) {
      expect((await readFile(blobPath(dir, digestOf(bytes)))).equals(bytes)).toBe(true);
    }
    // Small blobs are read into memory; a partial one continues from its last byte; one longer than its blob starts over.
    expect(asked).toEqual([
      `read ${digestOf(damaged)}`,
      `read ${digestOf(small)}`,
      `stream ${digestOf(resumed)} from 30000`,
      `stream ${digestOf(tooLong)} from 0`,
    ]);
    expect(transfers.counts).toEqual({
      fetchedBytes: damaged.length + small.length + resumed.length - 30_000 + tooLong.length,
      fetchedBlobs: 4,
      resumedBlobs: 1,
      repairedBlobs: 2,
    });
  });
});
