/**
 * A bundle as numbered tar parts for media with a file size limit: one deterministic tar of
 * the layout, cut into `<name>.tar.000`, `.001`, ... of at most `--max-archive-size` bytes
 * (`cat <name>.tar.* | tar -x` restores the layout), and `parts.json` with each part's size
 * and sha256. Parts are written atomically; reading checks each part as it streams.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { writeFileAtomic } from '../atomic-file.js';
import { BadInputError, PrestageError } from '../errors.js';
import { PLAN_API_VERSION } from '../plan/types.js';
import { formatBytes } from '../units.js';
import { checkArchiveNames } from './bundle-names.js';
import { checkBound, openRegularFile, readBoundedFile, READ_BOUNDS } from './bundle-reads.js';
import { BLOBS_DIR, BUNDLE_FILE, INDEX_FILE, OCI_LAYOUT_FILE, PARTIAL_DIR, parseBundleFiles, type Bundle, type LayoutFiles } from './layout.js';
import type { BlobInventory } from './verify.js';

export const ARCHIVE_INDEX_FILE = 'parts.json';
export const LAYOUT_FILES = [OCI_LAYOUT_FILE, BUNDLE_FILE, INDEX_FILE] as const;
const TAR_BLOCK = 512;
/** Manifests are read back from an archive; registries cap them at 4 MiB. */
const MAX_MANIFEST_BYTES = READ_BOUNDS['small blob'];
/**
 * What verify keeps of an archive in memory, all together: manifests (~2 KiB), configs (5-40
 * KiB in real releases) and signatures. A 1000-image bundle keeps ≈ 50 MiB; the fixture's 185, 546 KiB.
 */
const MAX_KEPT_BYTES = 256 * 1024 * 1024;

export interface ArchivePart {
  readonly name: string;
  readonly size: number;
  readonly sha256: string;
}

export interface ArchiveIndex {
  readonly apiVersion: typeof PLAN_API_VERSION;
  readonly kind: 'BundleArchive';
  /** The layout directory's name; parts are `<layout>.tar.NNN`. */
  readonly layout: string;
  readonly maxPartBytes: number;
  readonly bytes: number;
  readonly parts: readonly ArchivePart[];
}

/** `500M`, `4G`, `4GiB`, `1.5g`, `1048576`: binary units. At least 1 MiB. */
/** Where `--max-archive-size` puts the parts of layout `dir`: beside it, `<dir>.parts`. */
export function archiveDirFor(layoutDir: string): string {
  return `${layoutDir.replace(/\/+$/, '')}.parts`;
}

/** An upper bound of the tar's size: headers and padding per file, and the end blocks. */
export function tarBytes(contentBytes: number, files: number): number {
  return contentBytes + files * 2 * TAR_BLOCK + 20 * TAR_BLOCK;
}

/** Write `dir` as tar parts into `archiveDir`; stale parts of an earlier, longer archive are removed. */
export async function writeArchive(dir: string, archiveDir: string, maxPartBytes: number): Promise<ArchiveIndex> {
  const name = basename(dir.replace(/\/+$/, ''));
  await mkdir(join(archiveDir, PARTIAL_DIR), { recursive: true });
  const parts = new PartWriter(archiveDir, name, maxPartBytes);
  const pack = tar.pack();
  const packing = pipeline(pack, parts);
  const blobs = (await readdir(join(dir, BLOBS_DIR))).sort();
  try {
    for (const file of LAYOUT_FILES) await addFile(pack, file, join(dir, file));
    for (const entry of ['blobs/', 'blobs/sha256/']) await addEntry(pack, { name: entry, type: 'directory', mode: 0o755 });
    for (const hex of blobs) await addFile(pack, `blobs/sha256/${hex}`, join(dir, BLOBS_DIR, hex));
    pack.finalize();
  } catch (err) {
    pack.destroy(err as Error);
  }
  await packing;

  const index: ArchiveIndex = {
    apiVersion: PLAN_API_VERSION,
    kind: 'BundleArchive',
    layout: name,
    maxPartBytes,
    bytes: parts.written.reduce((a, p) => a + p.size, 0),
    parts: parts.written,
  };
  const current = new Set(parts.written.map((p) => p.name));
  for (const file of await readdir(archiveDir)) {
    if (file.startsWith(`${name}.tar.`) && !current.has(file)) await rm(join(archiveDir, file), { force: true });
  }
  await writeFileAtomic(join(archiveDir, ARCHIVE_INDEX_FILE), `${JSON.stringify(index, null, 2)}\n`, join(archiveDir, PARTIAL_DIR));
  await rm(join(archiveDir, PARTIAL_DIR), { recursive: true, force: true });
  return index;
}

/** Same bytes for the same layout: no times, owners or modes from the machine that wrote it. */
const FIXED = { mtime: new Date(0), uid: 0, gid: 0, uname: '', gname: '' };

function addEntry(pack: tar.Pack, header: Partial<tar.Header> & Pick<tar.Header, 'name'>, body?: Readable): Promise<void> {
  return new Promise((resolve, reject) => {
    const sink = pack.entry({ ...FIXED, ...header }, (err) => (err ? reject(err) : resolve()));
    if (body) body.once('error', reject).pipe(sink);
  });
}

async function addFile(pack: tar.Pack, name: string, path: string): Promise<void> {
  const { size } = await stat(path);
  await addEntry(pack, { name, size, type: 'file', mode: 0o644 }, createReadStream(path));
}

/** Cuts one byte stream into files of at most `maxBytes`, each fsynced and renamed into place when full. */
class PartWriter extends Writable {
  readonly written: ArchivePart[] = [];
  private current: { handle: FileHandle; temp: string; name: string; size: number; hash: Hash } | undefined;

  constructor(private readonly dir: string, private readonly name: string, private readonly maxBytes: number) {
    super();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.append(chunk).then(() => done(), done);
  }

  override _final(done: (err?: Error | null) => void): void {
    this.close().then(() => done(), done);
  }

  private async append(chunk: Buffer): Promise<void> {
    for (let at = 0; at < chunk.length;) {
      const part = this.current ?? (await this.open());
      const piece = chunk.subarray(at, at + Math.min(chunk.length - at, this.maxBytes - part.size));
      await part.handle.write(piece);
      part.hash.update(piece);
      part.size += piece.length;
      at += piece.length;
      if (part.size === this.maxBytes) await this.close();
    }
  }

  private async open(): Promise<NonNullable<PartWriter['current']>> {
    const name = `${this.name}.tar.${String(this.written.length).padStart(3, '0')}`;
    const temp = join(this.dir, PARTIAL_DIR, name);
    this.current = { handle: await open(temp, 'w'), temp, name, size: 0, hash: createHash('sha256') };
    return this.current;
  }

  private async close(): Promise<void> {
    const part = this.current;
    if (!part) return;
    this.current = undefined;
    await part.handle.sync();
    await part.handle.close();
    await rename(part.temp, join(this.dir, part.name));
    this.written.push({ name: part.name, size: part.size, sha256: `sha256:${part.hash.digest('hex')}` });
  }
}

export interface OpenedArchive {
  readonly index: ArchiveIndex;
  /** The directory that holds the parts. */
  readonly dir: string;
}

/** `path` is an archive directory or its parts.json: read bounded, and every name it gives checked. */
export async function openArchive(path: string): Promise<OpenedArchive> {
  const file = (await stat(path)).isDirectory() ? join(path, ARCHIVE_INDEX_FILE) : path;
  let index: ArchiveIndex;
  try {
    index = JSON.parse((await readBoundedFile(file, 'parts.json', file)).toString('utf8')) as ArchiveIndex;
  } catch (err) {
    if (err instanceof BadInputError) throw err;
    throw new BadInputError(`cannot read bundle archive index ${file}: ${(err as NodeJS.ErrnoException).code ?? 'not JSON'}`);
  }
  if (!index || index.kind !== 'BundleArchive' || !Array.isArray(index.parts)) {
    throw new BadInputError(`${file} is not a ${PLAN_API_VERSION} BundleArchive index`);
  }
  checkArchiveNames(index, file);
  return { index, dir: dirname(file) };
}

/** The parts as one stream, each part checked against its size and sha256 as it ends. */
async function* archiveBytes(archive: OpenedArchive): AsyncGenerator<Buffer> {
  for (const part of archive.index.parts) {
    const path = join(archive.dir, part.name);
    const hash = createHash('sha256');
    let size = 0;
    let file: { handle: FileHandle };
    try {
      // A link is followed (parts gathered from several media), but only to a regular file.
      file = await openRegularFile(path, `bundle archive part ${part.name}`, { followLinks: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new BadInputError(`bundle archive part ${path} is missing; copy every part listed in ${ARCHIVE_INDEX_FILE}`);
      throw err;
    }
    try {
      for await (const chunk of file.handle.createReadStream({ start: 0, autoClose: false })) {
        hash.update(chunk as Buffer);
        size += (chunk as Buffer).length;
        yield chunk as Buffer;
      }
    } finally {
      await file.handle.close();
    }
    const digest = `sha256:${hash.digest('hex')}`;
    if (size !== part.size || digest !== part.sha256) {
      throw new BadInputError(`bundle archive part ${path} is corrupt (${size} bytes hashing to ${digest}, expected ${part.size} bytes ${part.sha256}); copy it again`);
    }
  }
}

export type ArchiveEntry = { kind: 'layout'; name: (typeof LAYOUT_FILES)[number] } | { kind: 'blob'; digest: string };

/**
 * Every file of the archive, in order; anything but a layout file or a blob is refused (no
 * path tricks), and a layout file over its bound before it is read.
 */
export async function walkArchive(archive: OpenedArchive, onEntry: (entry: ArchiveEntry, size: number, body: AsyncIterable<Buffer> & { resume(): unknown }) => Promise<void>): Promise<void> {
  const extract = tar.extract();
  const reading = pipeline(Readable.from(archiveBytes(archive)), extract);
  const walking = (async () => {
    for await (const entry of extract) {
      const { name, type, size = 0 } = entry.header;
      if (type === 'directory' && (name === 'blobs/' || name === 'blobs/sha256/')) {
        entry.resume();
        continue;
      }
      const blob = /^blobs\/sha256\/([a-f0-9]{64})$/.exec(name);
      const layoutFile = LAYOUT_FILES.find((f) => f === name);
      if (type !== 'file' || (!blob && !layoutFile)) throw new BadInputError(`bundle archive in ${archive.dir} holds an unexpected entry ${JSON.stringify(name)}; it was not written by prestage`);
      if (layoutFile) checkBound(layoutFile, size, `${layoutFile} in bundle archive ${join(archive.dir, ARCHIVE_INDEX_FILE)}`);
      await onEntry(blob ? { kind: 'blob', digest: `sha256:${blob[1]}` } : { kind: 'layout', name: layoutFile! }, size, entry as AsyncIterable<Buffer> & { resume(): unknown });
    }
  })();
  try {
    await Promise.all([reading.catch((err: unknown) => { throw notATar(err, archive); }), walking]);
  } catch (err) {
    extract.destroy();
    throw err;
  }
}

/** The tar parser's own errors (a truncated or garbled stream whose parts still hash as listed) are bad input. */
function notATar(err: unknown, archive: OpenedArchive): unknown {
  if (err instanceof PrestageError || (err as NodeJS.ErrnoException).code !== undefined || !(err instanceof Error)) return err;
  return new BadInputError(`bundle archive in ${archive.dir} is not a tar prestage wrote (${err.message}); copy its parts again`);
}

export async function readAll(body: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Re-hash every blob in the archive without unpacking it; manifests are kept in memory to walk. */
export async function inventoryOfArchive(archive: OpenedArchive): Promise<{ bundle: Omit<Bundle, 'dir'>; inventory: BlobInventory }> {
  const files: Record<string, string> = {};
  const verified = new Map<string, number>();
  const corrupt = new Set<string>();
  const small = new Map<string, Buffer>();
  let kept = 0;
  await walkArchive(archive, async (entry, size, body) => {
    if (entry.kind === 'layout') {
      files[entry.name] = (await readAll(body)).toString('utf8');
      return;
    }
    const hash = createHash('sha256');
    const keep: Buffer[] = [];
    for await (const chunk of body) {
      hash.update(chunk as Buffer);
      if (size <= MAX_MANIFEST_BYTES) keep.push(chunk as Buffer);
    }
    if (`sha256:${hash.digest('hex')}` !== entry.digest) {
      corrupt.add(entry.digest);
      return;
    }
    verified.set(entry.digest, size);
    const bytes = Buffer.concat(keep);
    // JSON (manifests, sigstore payloads) and the release's GPG signatures (OpenPGP packets: the
    // first byte's top bit is set) and keys (armored): what verify reads back.
    if (bytes[0] === 0x7b /* { */ || (bytes.length > 0 && (bytes[0]! & 0x80) !== 0) || bytes.subarray(0, 15).toString('latin1') === '-----BEGIN PGP ') {
      kept += bytes.length;
      if (kept > MAX_KEPT_BYTES) throw new BadInputError(`bundle archive ${join(archive.dir, ARCHIVE_INDEX_FILE)} holds more than ${formatBytes(MAX_KEPT_BYTES)} of manifests, configs and signatures, the bound verify keeps in memory; the bundle was altered: create it again`);
      small.set(entry.digest, bytes);
    }
  });
  const where = join(archive.dir, ARCHIVE_INDEX_FILE);
  return {
    bundle: parseBundleFiles(files as LayoutFiles, where),
    inventory: {
      verified,
      corrupt,
      read: async (digest) => {
        const bytes = small.get(digest);
        if (!bytes) throw new BadInputError(`${where}: blob ${digest} is named as a manifest or signature but is not one`);
        return bytes;
      },
    },
  };
}
