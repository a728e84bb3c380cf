/**
 * One blob into the layout: kept if an earlier run left it whole (re-hashed first), else
 * fetched, a partial download continued from its last byte. Small blobs are read into memory,
 * big ones streamed or read in Range parts (range-parts.ts); every digest is checked before
 * the file is renamed into blobs/. With `--link-rate`, every blob body of the run is read through
 * one StreamPacer (net/link-rate.ts): all connections together stay at the rate.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, renameSync, writeFileSync } from 'node:fs';
import { readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { DigestMismatchError } from '../errors.js';
import { pacedRead, type StreamPacer } from '../net/link-rate.js';
import { RangesRefused, type RegistryClient } from '../registry/client.js';
import type { Descriptor } from '../registry/manifest.js';
import type { ImageReference } from '../registry/reference.js';
import type { BundleManifest } from './content.js';
import { BLOBS_DIR, PARTIAL_DIR, blobFileName, blobPath, partialPath } from './layout.js';
import type { TransferProgress } from './progress.js';
import { fetchInParts, rangeParts } from './range-parts.js';
import type { SyncBehind } from './sync-behind.js';
import { hashBlobs } from './verify.js';

/**
 * Blobs up to this size (most of a release's, by count) are read into memory, verified, and
 * written at once; a crash loses at most these in flight, which a rerun fetches again.
 */
export const IN_MEMORY_BLOB = 64 * 1024;

/** What earlier runs left: the sizes of the files in blobs/ and in .partial/, by name. */
export interface Leftovers {
  readonly blobs: ReadonlyMap<string, number>;
  readonly partial: ReadonlyMap<string, number>;
}

export async function leftovers(dir: string): Promise<Leftovers> {
  const blobs = await fileSizes(join(dir, BLOBS_DIR));
  const partial = await fileSizes(join(dir, PARTIAL_DIR));
  return { blobs, partial };
}

/** Sizes of the files in a directory, by name; one stat per file that exists. */
async function fileSizes(path: string): Promise<Map<string, number>> {
  const names = await readdir(path).catch(() => [] as string[]);
  return new Map(await Promise.all(names.map(async (name) => [name, (await stat(join(path, name))).size] as const)));
}

/** What the transfers did, for the report. */
export interface TransferCounts {
  /** Blob bytes fetched in this run (resumed blobs count only their rest). */
  fetchedBytes: number;
  fetchedBlobs: number;
  resumedBlobs: number;
  /** Blobs kept from an earlier run that no longer matched their digest, fetched again. */
  repairedBlobs: number;
}

interface BlobTask {
  readonly descriptor: Descriptor;
  readonly from: ImageReference;
  /** Bytes already in `.partial/` from an earlier run. */
  readonly partialBytes: number;
}

/**
 * The layout's manifests and blobs as they come: each kept if the file an earlier run left is
 * whole (a file of the right size can still be damaged, and push and verify send users here to
 * repair it), else written; every file written handed to `written` to be synced.
 */
export class BlobTransfers {
  readonly counts: TransferCounts = { fetchedBytes: 0, fetchedBlobs: 0, resumedBlobs: 0, repairedBlobs: 0 };
  /** Registries that answered a Range request with a whole blob: big blobs from them in one stream. */
  private readonly rangesRefused = new Set<string>();

  constructor(
    private readonly client: RegistryClient,
    private readonly dir: string,
    private readonly left: Leftovers,
    private readonly progress: TransferProgress,
    private readonly written: SyncBehind,
    /**
     * `--link-rate`: the cap every blob body read by this run shares (with the manifests, paid
     * for as discovery.ts reads them).
     */
    private readonly pacer?: StreamPacer,
  ) {}

  /** A manifest (read and verified): kept if the file from an earlier run holds its bytes, else written. Whether it was written. */
  async manifest(manifest: BundleManifest): Promise<boolean> {
    const name = blobFileName(manifest.digest);
    if (this.left.blobs.has(name)) {
      if (this.left.blobs.get(name) === manifest.bytes.length && (await readFile(blobPath(this.dir, manifest.digest))).equals(manifest.bytes)) return false;
      this.counts.repairedBlobs++;
    }
    this.written.add(storeBlob(this.dir, manifest.digest, manifest.bytes), manifest.bytes.length);
    return true;
  }

  /** A config or layer: kept if the file from an earlier run hashes to it, else fetched (a partial one continued). Whether it was fetched. */
  async blob(descriptor: Descriptor, from: ImageReference, signal: AbortSignal, connections: number): Promise<boolean> {
    const { dir } = this;
    const name = blobFileName(descriptor.digest);
    if (this.left.blobs.has(name)) {
      if (this.left.blobs.get(name) === descriptor.size && (await hashBlobs(dir, [descriptor.digest])).verified.has(descriptor.digest)) return false;
      this.counts.repairedBlobs++;
      await rm(blobPath(dir, descriptor.digest), { force: true });
    }
    const task: BlobTask = { descriptor, from, partialBytes: await usablePartialBytes(dir, descriptor, this.left.partial.get(name) ?? 0) };
    this.counts.fetchedBlobs++;
    if (task.partialBytes > 0) this.counts.resumedBlobs++;
    this.progress.addTotal(descriptor.size);
    this.progress.addBytes(task.partialBytes);
    this.written.add(await fetchBlob(this.client, dir, task, signal, (n) => {
      this.counts.fetchedBytes += n;
      this.progress.addBytes(n);
    }, this.rangesRefused, connections, this.pacer), descriptor.size);
    return true;
  }
}

/** A partial file longer than its blob cannot be a prefix of it: start over. */
async function usablePartialBytes(dir: string, blob: Descriptor, size: number): Promise<number> {
  if (size <= blob.size) return size;
  await rm(partialPath(dir, blob.digest), { force: true });
  return 0;
}

/**
 * One blob into the layout: continue `.partial/<hex>` (hashing what it holds first), append
 * what the registry sends, and rename into blobs/ only once the digest matched; its path, to
 * be synced with the others. A partial file that turns out damaged is discarded and the blob
 * fetched again from byte 0.
 */
async function fetchBlob(client: RegistryClient, dir: string, task: BlobTask, signal: AbortSignal, onBytes: (n: number) => void, rangesRefused: Set<string>, connections: number, pacer: StreamPacer | undefined): Promise<string> {
  const { descriptor } = task;
  const partial = partialPath(dir, descriptor.digest);
  if (task.partialBytes === 0 && descriptor.size <= IN_MEMORY_BLOB) {
    // Most blobs of a release are a few KiB: one verified read into memory and one write cost
    // far less per blob than a stream pipeline, and per-blob cost is what bounds small blobs.
    // Paid before it is asked for: a small blob comes whole at once, before any pace could hold it.
    await pacer?.open(descriptor.size, signal);
    try {
      const bytes = await client.readBlob(task.from, descriptor, IN_MEMORY_BLOB);
      onBytes(bytes.length);
      return storeBlob(dir, descriptor.digest, bytes);
    } finally {
      pacer?.landed(descriptor.size);
    }
  }
  let offset = task.partialBytes;
  const parts = Math.min(connections, rangeParts(descriptor.size));
  if (offset === 0 && parts > 1 && !rangesRefused.has(task.from.registry)) {
    try {
      await fetchInParts(client, task.from, descriptor, parts, partial, signal, onBytes, pacer);
      const path = blobPath(dir, descriptor.digest);
      await rename(partial, path);
      return path;
    } catch (err) {
      if (err instanceof RangesRefused) rangesRefused.add(task.from.registry);
      else if (!(err instanceof DigestMismatchError)) throw err;
      // Not served in ranges, or damaged: one stream from byte 0 (a second mismatch is final).
      await rm(partial, { force: true });
    }
  }
  for (;;) {
    try {
      await appendBlob(client, task.from, descriptor, partial, offset, signal, onBytes, pacer);
      break;
    } catch (err) {
      if (!(err instanceof DigestMismatchError)) throw err;
      await rm(partial, { force: true });
      if (offset === 0) throw err;
      offset = 0;
    }
  }
  const path = blobPath(dir, descriptor.digest);
  await rename(partial, path);
  return path;
}

/**
 * Bytes already verified (a manifest, a small blob) into the layout: temp file, rename; synced
 * with the blobs. At most IN_MEMORY_BLOB bytes into the page cache: written synchronously, which
 * costs a fraction of the CPU of three thread-pool round trips and their promises per blob (the
 * sockets keep receiving meanwhile).
 */
export function storeBlob(dir: string, digest: string, bytes: Buffer): string {
  const partial = partialPath(dir, digest);
  writeFileSync(partial, bytes);
  const path = blobPath(dir, digest);
  renameSync(partial, path);
  return path;
}

/** Write buffer: large writes, few syscalls; the registry's chunks pass through uncopied. */
const WRITE_BUFFER = 4 * 1024 * 1024;

async function appendBlob(client: RegistryClient, from: ImageReference, blob: Descriptor, partial: string, offset: number, signal: AbortSignal, onBytes: (n: number) => void, pacer: StreamPacer | undefined): Promise<void> {
  const hash = createHash('sha256');
  if (offset > 0) {
    for await (const chunk of createReadStream(partial, { end: offset - 1, highWaterMark: WRITE_BUFFER })) hash.update(chunk as Buffer);
  }
  await pipeline(
    client.blobStream(from, blob, offset > 0 ? { offset, hash } : undefined),
    async function* counted(source: AsyncIterable<Buffer>) {
      for await (const chunk of pacer ? pacedRead(source, blob.size - offset, pacer, signal) : source) {
        onBytes(chunk.length);
        yield chunk;
      }
    },
    createWriteStream(partial, { flags: offset > 0 ? 'a' : 'w', highWaterMark: WRITE_BUFFER }),
    { signal },
  );
}
