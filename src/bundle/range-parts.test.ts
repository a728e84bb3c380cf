import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, open, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DigestMismatchError } from '../errors.js';
import type { RegistryClient } from '../registry/client.js';
import type { Descriptor } from '../registry/manifest.js';
import { contiguousPrefix, fetchInParts, PartWriter, partBounds, rangeParts } from './range-parts.js';

const MiB = 1024 * 1024;

describe('range parts', () => {
  it('reads a blob in parts of at least 16 MiB, at most four', () => {
    expect(rangeParts(0)).toBe(1);
    expect(rangeParts(16 * MiB - 1)).toBe(1);
    expect(rangeParts(32 * MiB)).toBe(2);
    expect(rangeParts(63 * MiB)).toBe(3);
    expect(rangeParts(10_000 * MiB)).toBe(4);
  });

  it('cuts a blob in equal parts, the last one shorter, covering every byte once', () => {
    expect(partBounds(10, 3)).toEqual([[0, 4], [4, 8], [8, 10]]);
    expect(partBounds(8, 2)).toEqual([[0, 4], [4, 8]]);
    expect(partBounds(5, 1)).toEqual([[0, 5]]);
  });

  it('the bytes on disk without a gap end at the first part not fully written', () => {
    const bounds = partBounds(12, 3);
    expect(contiguousPrefix(bounds, [4, 8, 12])).toBe(12);
    expect(contiguousPrefix(bounds, [4, 6, 12])).toBe(6);
    expect(contiguousPrefix(bounds, [2, 8, 12])).toBe(2);
    expect(contiguousPrefix(bounds, [0, 8, 12])).toBe(0);
    expect(contiguousPrefix([], [])).toBe(0);
  });
});

describe('fetching in parts', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'prestage-parts-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('each part writes at its offset: the file holds the chunks in order, written counts what is on disk', async () => {
    const file = await open(join(dir, 'part'), 'w+');
    try {
      let wakes = 0;
      const second = new PartWriter(file, 3, () => wakes++);
      const first = new PartWriter(file, 0, () => wakes++);
      await second.add(Buffer.from('de'));
      await second.add(Buffer.from('f'));
      await first.add(Buffer.from('abc'));
      await Promise.all([first.flushed(), second.flushed()]);
      expect([first.written, second.written]).toEqual([3, 6]);
      expect(wakes).toBeGreaterThan(0);
    } finally {
      await file.close();
    }
    expect(await readFile(join(dir, 'part'), 'utf8')).toBe('abcdef');
  });

  /** A registry serving `bytes` in ranges, in chunks of `chunk`; `corrupt` flips a byte it sends, `failAt` fails the part holding it. */
  const serving = (bytes: Buffer, chunk: number, fault: { corrupt?: number; failAt?: number } = {}): RegistryClient => ({
    async *blobPart(_ref: unknown, _blob: unknown, start: number, end: number): AsyncGenerator<Buffer> {
      for (let at = start; at < end; at += chunk) {
        await new Promise((resolve) => setImmediate(resolve));
        const piece = Buffer.from(bytes.subarray(at, Math.min(end, at + chunk)));
        if (fault.failAt !== undefined && fault.failAt >= at && fault.failAt < at + piece.length) throw new Error('connection reset');
        if (fault.corrupt !== undefined && fault.corrupt >= at && fault.corrupt < at + piece.length) piece[fault.corrupt - at]! ^= 0xff;
        yield piece;
      }
    },
  }) as unknown as RegistryClient;

  const descriptorOf = (bytes: Buffer): Descriptor => ({ mediaType: 'application/octet-stream', digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, size: bytes.length });
  const from = { registry: 'quay.io', repository: 'x/y' };

  it('writes every part and checks the digest over every byte, in order', async () => {
    const bytes = randomBytes(300_000);
    let counted = 0;
    await fetchInParts(serving(bytes, 7_000), from, descriptorOf(bytes), 3, join(dir, 'blob'), new AbortController().signal, (n) => (counted += n));
    expect((await readFile(join(dir, 'blob'))).equals(bytes)).toBe(true);
    expect(counted).toBe(bytes.length);
  });

  it('a corrupted byte fails the digest', async () => {
    const bytes = randomBytes(300_000);
    const failing = fetchInParts(serving(bytes, 7_000, { corrupt: 250_000 }), from, descriptorOf(bytes), 3, join(dir, 'blob'), new AbortController().signal, () => undefined);
    await expect(failing).rejects.toBeInstanceOf(DigestMismatchError);
  });

  it('a part that fails leaves a prefix of the blob, hashed and on disk, for a rerun to continue', async () => {
    const bytes = randomBytes(300_000);
    const partial = join(dir, 'blob');
    const failing = fetchInParts(serving(bytes, 7_000, { failAt: 150_000 }), from, descriptorOf(bytes), 3, partial, new AbortController().signal, () => undefined);
    await expect(failing).rejects.toThrow('connection reset');
    const kept = (await stat(partial)).size;
    expect(kept).toBeLessThanOrEqual(150_000);
    expect((await readFile(partial)).equals(bytes.subarray(0, kept))).toBe(true);
  });
});
