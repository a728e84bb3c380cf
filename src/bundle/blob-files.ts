/**
 * A layout's blob files as push and verify read them: never through a link, only regular
 * files, and checked against their digest before a byte of them is used or leaves the
 * machine. A missing or altered blob is one line naming it and the fix.
 */
import type { FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { BadInputError } from '../errors.js';
import { sha256 } from '../registry/client.js';
import type { Descriptor } from '../registry/manifest.js';
import { formatBytes } from '../units.js';
import { hashOpenFile, openRegularFile, readBoundedFile, readOpenFile } from './bundle-reads.js';
import { blobPath } from './layout.js';

/**
 * A small blob of the layout (a manifest, a release signature), bounded and checked against
 * its digest: `what` names it in the one line a missing or altered file gives.
 */
export async function readVerifiedBlob(dir: string, digest: string, what = `blob ${digest}`): Promise<Buffer> {
  let bytes: Buffer;
  try {
    bytes = await readBoundedFile(blobPath(dir, digest), 'small blob', `the bundle's ${what}`);
  } catch (err) {
    if (err instanceof BadInputError) throw err;
    throw corrupt(`${what} is missing`);
  }
  if (sha256(bytes) !== digest) throw corrupt(`${what} is corrupt`);
  return bytes;
}

/** A blob verified and held open: `stream()` gives its bytes from the start, as often as an upload asks. */
export interface VerifiedBlobFile {
  stream(): Readable;
  close(): Promise<void>;
}

/** Blobs up to this size are read once into memory and sent from there; bigger ones are read twice from disk. */
const IN_MEMORY_BYTES = 1024 * 1024;

/**
 * Open a blob, check it is a regular file of the descriptor's size, and hash it whole before
 * anything is sent. A small blob is then sent from the bytes hashed; a big one is read again
 * from the same descriptor (the page cache keeps the second read cheap), so the file checked
 * is the file uploaded.
 */
export async function openVerifiedBlob(dir: string, blob: Descriptor): Promise<VerifiedBlobFile> {
  let file: { handle: FileHandle; size: number };
  try {
    file = await openRegularFile(blobPath(dir, blob.digest), `the bundle's blob ${blob.digest}`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw corrupt(`blob ${blob.digest} is missing`);
    throw err;
  }
  const { handle } = file;
  try {
    if (file.size !== blob.size) throw corrupt(`blob ${blob.digest} is corrupt (${formatBytes(file.size)}, not ${formatBytes(blob.size)})`);
    if (blob.size <= IN_MEMORY_BYTES) {
      const bytes = await readOpenFile(handle, blob.size);
      await handle.close();
      checkDigest(blob, bytes.length, sha256(bytes));
      return { stream: () => Readable.from([bytes], { objectMode: false }), close: async () => undefined };
    }
    const { digest, size } = await hashOpenFile(handle);
    checkDigest(blob, size, digest);
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err;
  }
  return { stream: () => handle.createReadStream({ start: 0, autoClose: false }), close: () => handle.close() };
}

/** A big blob (a layer) as one verified stream, its file closed once the stream ends or fails. */
export async function verifiedBlobStream(dir: string, blob: Descriptor): Promise<Readable> {
  const file = await openVerifiedBlob(dir, blob);
  let closed = false;
  const close = (): void => {
    if (!closed) void file.close();
    closed = true;
  };
  return file.stream().once('end', close).once('error', close).once('close', close);
}

function checkDigest(blob: Descriptor, size: number, digest: string): void {
  if (size !== blob.size || digest !== blob.digest) throw corrupt(`blob ${blob.digest} is corrupt (${formatBytes(size)} hashing to ${digest})`);
}

export function corrupt(what: string): BadInputError {
  return new BadInputError(`the bundle's ${what}; \`prestage bundle verify\` lists every damaged blob: copy it again from the connected side, where \`prestage bundle create\` with the same arguments repairs it`);
}
