/**
 * Reads of a bundle that may have been tampered with on its way across the air gap: every
 * file opened without following a link and only when it is a regular file (a symlink, FIFO,
 * device or directory in its place is refused, and a FIFO is never waited on), every
 * read into memory bounded by a size chosen for the file, refused before it is read.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { BadInputError } from '../errors.js';
import { formatBytes } from '../units.js';

/**
 * Bounds of the files read whole into memory. Measured on the fixture release's bundle (185
 * images); real releases have a few hundred images, so each bound holds a 1000-image bundle
 * with a sigstore attachment per image several times over.
 */
export const READ_BOUNDS = {
  /** `{"imageLayoutVersion":"1.0.0"}`: 31 bytes. */
  'oci-layout': 4 * 1024,
  /** ~390 bytes an entry (fixture: 185 entries, 71 KiB); 1000 images + 1000 attachments ≈ 780 KiB, 8 MiB is 10x that. */
  'index.json': 8 * 1024 * 1024,
  /**
   * 695 bytes in the fixture, but grows with `previous.blobs` (~110 bytes a blob): 1000 images
   * of ~10 unique blobs is ≈ 1.1 MiB, and a chain of `--since` bundles carries its predecessors' too.
   */
  'prestage-bundle.json': 16 * 1024 * 1024,
  /** ~140 bytes a part (fixture: 3 parts, 620 bytes); parts are at least 1 MiB, so 16 MiB lists a 100 GiB bundle cut into 1 MiB parts. */
  'parts.json': 16 * 1024 * 1024,
  /** Manifests, release signatures (50 KiB each in stores) and armored keys: registries cap manifests at 4 MiB. */
  'small blob': 4 * 1024 * 1024,
} as const;

export type BoundedFile = keyof typeof READ_BOUNDS;

/** Refused before it is read: one line naming the file and its bound. */
export function checkBound(kind: BoundedFile, size: number, where: string): void {
  const bound = READ_BOUNDS[kind];
  if (size > bound) {
    throw new BadInputError(`${where} is ${formatBytes(size)}, over the ${formatBytes(bound)} bound for a bundle's ${kind}; the bundle was altered or damaged: create it again`);
  }
}

export interface OpenFileOptions {
  /** Parts may be links (parts gathered from several media); a bundle's own files may not. */
  readonly followLinks?: boolean;
}

/**
 * Open `path` for reading if it is a regular file. O_NONBLOCK: opening a FIFO does not wait
 * for a writer (for a regular file the flag does nothing). ENOENT is passed on as is, for the
 * caller to name what is missing.
 */
export async function openRegularFile(path: string, what: string, opts: OpenFileOptions = {}): Promise<{ handle: FileHandle; size: number }> {
  const flags = constants.O_RDONLY | constants.O_NONBLOCK | (opts.followLinks ? 0 : constants.O_NOFOLLOW);
  let handle: FileHandle;
  try {
    handle = await open(path, flags);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw notAFile(what, path, 'a symbolic link');
    throw err;
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw notAFile(what, path, stat.isDirectory() ? 'a directory' : stat.isFIFO() ? 'a FIFO' : 'not a regular file');
    return { handle, size: stat.size };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

function notAFile(what: string, path: string, is: string): BadInputError {
  return new BadInputError(`${what} (${path}) is ${is}, not a file; a bundle holds only regular files: copy it again from where it was created`);
}

/** The whole of a regular file, refused before any read when it is over its bound. */
export async function readBoundedFile(path: string, kind: BoundedFile, what: string): Promise<Buffer> {
  const { handle, size } = await openRegularFile(path, what);
  try {
    checkBound(kind, size, what);
    return await readOpenFile(handle, size);
  } finally {
    await handle.close();
  }
}

/** The first `size` bytes of an open file: a file that shrank while read gives what it had; one that grew is cut at `size`. */
export async function readOpenFile(handle: FileHandle, size: number): Promise<Buffer> {
  const bytes = Buffer.alloc(size);
  let at = 0;
  while (at < size) {
    const { bytesRead } = await handle.read(bytes, at, size - at, at);
    if (bytesRead === 0) break;
    at += bytesRead;
  }
  return bytes.subarray(0, at);
}

/** An open file's sha256 digest and size, read from its start (the handle stays open). */
export async function hashOpenFile(handle: FileHandle): Promise<{ digest: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of handle.createReadStream({ start: 0, autoClose: false })) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { digest: `sha256:${hash.digest('hex')}`, size };
}
