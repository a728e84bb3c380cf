/**
 * A big blob read in parallel Range parts, written at their offsets and hashed in order, so
 * the digest is still checked over every byte before the blob is renamed into the layout.
 */
import { createHash } from 'node:crypto';
import { open, type FileHandle } from 'node:fs/promises';
import { DigestMismatchError } from '../errors.js';
import { pacedRead, type StreamPacer } from '../net/link-rate.js';
import type { RegistryClient } from '../registry/client.js';
import type { Descriptor } from '../registry/manifest.js';
import { formatReference, type ImageReference } from '../registry/reference.js';

/** A big blob is read in parts of at least this size, ... */
const MIN_PART_BYTES = 16 * 1024 * 1024;
/** ... at most this many at once. */
const MAX_PARTS = 4;
/** Range parts a blob of `size` bytes is read in, where ranges are served and connections free. */
export function rangeParts(size: number): number {
  return Math.max(1, Math.min(MAX_PARTS, Math.floor(size / MIN_PART_BYTES)));
}

/** `[start, end)` of each of `parts` parts of a blob of `size` bytes: equal parts, the last one shorter. */
export function partBounds(size: number, parts: number): Array<readonly [number, number]> {
  const partSize = Math.ceil(size / parts);
  return Array.from({ length: parts }, (_, i) => [i * partSize, Math.min(size, (i + 1) * partSize)] as const);
}

/** Bytes the in-order hash reads back at a time. */
const HASH_READ_BYTES = 4 * 1024 * 1024;

/**
 * A big blob in parallel Range parts, where the registry serves ranges (one connection is often
 * held to a fraction of the link by its window, or by a CDN's per-connection limit). Each part
 * is written at its offset as it arrives, the chunks that came in while a write was on the
 * thread pool going in one writev. The digest is checked over every byte before the rename,
 * in order: a chunk that arrives exactly at the hash frontier is hashed from memory as it
 * comes (all of the first part, and each later part once the frontier reached it), the rest is
 * read back from the file behind the contiguous bytes written. A registry that answers the
 * first part with the whole blob raises RangesRefused at once. On failure the file is cut back
 * to a hashed prefix that is on disk, which a rerun continues from. With a `pacer` (`--link-rate`),
 * each part is a paced read (pacedRead), sharing the rate with every other read.
 */
export async function fetchInParts(client: RegistryClient, from: ImageReference, blob: Descriptor, parts: number, partial: string, signal: AbortSignal, onBytes: (n: number) => void, pacer?: StreamPacer): Promise<void> {
  const bounds = partBounds(blob.size, parts);
  /** Per part: the end of the bytes received (its writer holds the end of those written). */
  const received = bounds.map(([start]) => start);
  const hash = createHash('sha256');
  /** Every byte below it is hashed, in order. */
  let hashed = 0;
  /** A read-back is in flight: the frontier is about to move, no chunk may be hashed from memory. */
  let readingBack = false;
  let failed = false;
  let wake: (() => void) | undefined;
  const notify = (): void => {
    const waiting = wake;
    wake = undefined;
    waiting?.();
  };
  const file = await open(partial, 'w+');
  const readers = bounds.map(([start, end]) => (pacer ? pacedRead(client.blobPart(from, blob, start, end), end - start, pacer, signal) : client.blobPart(from, blob, start, end)));
  const writers = bounds.map(([start]) => new PartWriter(file, start, notify));
  const fill = async (i: number, first?: IteratorResult<Buffer>): Promise<void> => {
    const reader = readers[i]!;
    const writer = writers[i]!;
    try {
      for (let next = first ?? (await reader.next()); !next.done; next = await reader.next()) {
        if (failed || signal.aborted) return;
        const chunk = next.value;
        if (!readingBack && received[i] === hashed) {
          hash.update(chunk);
          hashed += chunk.length;
        }
        received[i]! += chunk.length;
        onBytes(chunk.length);
        await writer.add(chunk);
      }
      await writer.flushed();
    } finally {
      await reader.return(undefined);
    }
  };
  const hashInOrder = async (): Promise<string> => {
    const buffer = Buffer.allocUnsafe(HASH_READ_BYTES);
    for (const [i, [, end]] of bounds.entries()) {
      while (hashed < end) {
        if (failed || signal.aborted) throw signal.reason ?? new Error('a part failed');
        const ready = writers[i]!.written - hashed;
        if (ready <= 0) {
          await new Promise<void>((resolve) => (wake = resolve));
          continue;
        }
        readingBack = true;
        try {
          const { bytesRead } = await file.read(buffer, 0, Math.min(ready, buffer.length), hashed);
          hash.update(buffer.subarray(0, bytesRead));
          hashed += bytesRead;
        } finally {
          readingBack = false;
        }
      }
    }
    return `sha256:${hash.digest('hex')}`;
  };
  const onAbort = (): void => notify();
  signal.addEventListener('abort', onAbort);
  let error: unknown;
  try {
    // The first part's answer says whether ranges are served before the others are asked for.
    const first = await readers[0]!.next();
    const settled = await Promise.allSettled([
      ...bounds.map((_, i) => fill(i, i === 0 ? first : undefined).catch((err: unknown) => {
        failed = true;
        notify();
        throw err;
      })),
      hashInOrder(),
    ]);
    const rejected = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected' && !(failed && r.reason instanceof Error && r.reason.message === 'a part failed'));
    if (rejected) throw rejected.reason;
    const digest = (settled.at(-1) as PromiseFulfilledResult<string>).value;
    if (digest !== blob.digest) throw new DigestMismatchError(`${formatReference(from)}@${blob.digest}: content hashes to ${digest}; the registry or a proxy corrupted it`);
  } catch (err) {
    error = err;
    failed = true;
    await Promise.allSettled(readers.map((reader) => reader.return(undefined)));
    await Promise.allSettled(writers.map((writer) => writer.flushed()));
    // What was hashed and is on disk is a contiguous prefix of what the registry sent: a rerun continues there.
    await file.truncate(Math.min(hashed, contiguousPrefix(bounds, writers.map((writer) => writer.written)))).catch(() => undefined);
  } finally {
    signal.removeEventListener('abort', onAbort);
    await file.close();
  }
  if (error !== undefined) throw error;
}

/**
 * Bytes from 0 that are on disk without a gap: parts in order, up to the first one not fully
 * written. `written`: per part, the end of its bytes on disk.
 */
export function contiguousPrefix(bounds: ReadonlyArray<readonly [number, number]>, written: readonly number[]): number {
  for (const [i, [, end]] of bounds.entries()) if (written[i]! < end) return written[i]!;
  return bounds.at(-1)?.[1] ?? 0;
}

/** Chunks a part writer holds before its reader waits for the disk. */
const PART_BACKLOG_BYTES = 8 * 1024 * 1024;

/**
 * Writes one part's chunks at its offset, one write in flight: what arrives meanwhile goes in
 * the next writev, so the thread pool sees a few large writes instead of one per socket read.
 */
export class PartWriter {
  private queue: Buffer[] = [];
  private queued = 0;
  private writing: Promise<void> | undefined;
  private failure: unknown;
  private end: number;

  constructor(private readonly file: FileHandle, start: number, private readonly onWritten: () => void) {
    this.end = start;
  }

  /** The end of the bytes on disk, contiguous from the part's start. */
  get written(): number {
    return this.end;
  }

  /** Queues a chunk; waits only while the backlog is over PART_BACKLOG_BYTES. */
  async add(chunk: Buffer): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    this.queue.push(chunk);
    this.queued += chunk.length;
    this.writing ??= this.drain();
    if (this.queued >= PART_BACKLOG_BYTES) await this.writing;
  }

  /** Every queued chunk on disk (or the write's error). */
  async flushed(): Promise<void> {
    await this.writing;
    if (this.failure !== undefined) throw this.failure;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue;
        const bytes = this.queued;
        this.queue = [];
        this.queued = 0;
        let at = 0;
        // writev may write less than asked: go on from where it stopped.
        while (at < bytes) {
          const { bytesWritten } = await this.file.writev(at === 0 ? batch : [Buffer.concat(batch).subarray(at)], this.end);
          at += bytesWritten;
          this.end += bytesWritten;
          this.onWritten();
        }
      }
    } catch (err) {
      this.failure = err;
    } finally {
      this.writing = undefined;
    }
  }
}
