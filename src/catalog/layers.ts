/**
 * A catalog image's file-based catalog as its filesystem holds it: each layer streamed through
 * gunzip and tar (never to disk), its files under the catalog root parsed as they arrive, and the
 * layers applied in order with their whiteouts (`.wh.NAME`, `.wh..wh..opq`: oc-mirror's rebuilt
 * catalogs hide the old `/configs` under `.wh.configs`) and `.indexignore` files, as opm reads the
 * directory. One reader for every caller: image.ts parses each file into the compact model,
 * bundle/catalog-tree.ts keeps the documents themselves to write a filtered catalog.
 */
import { posix } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { BadInputError } from '../errors.js';

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';
const INDEX_IGNORE = '.indexignore';

/** Bounds of one catalog image's layers and files. */
export interface LayerLimits {
  /** Largest catalog file. */
  readonly maxFileBytes: number;
  /** Uncompressed bytes of one layer (gzip bombs). */
  readonly maxLayerBytes: number;
  /** Files under the catalog root. */
  readonly maxFiles: number;
}

/** A layer to read: its descriptor's facts and how to open its bytes (a registry, a bundle's blob). */
export interface LayerSource {
  readonly mediaType: string;
  readonly digest: string;
  open(): Readable | Promise<Readable>;
}

/** What one layer does to the catalog root (paths relative to the image root, without a leading `/`). */
export interface LayerChange<T> {
  /** Files under the root it adds, by path below the root, as `parse` gave them. */
  readonly files: Map<string, T>;
  /** Paths whose lower-layer content it deletes (`.wh.NAME`), subtrees too. */
  readonly hidden: string[];
  /** Directories whose lower-layer content it deletes (`.wh..wh..opq`). */
  readonly opaque: string[];
  readonly ignores: Map<string, string[]>;
}

/**
 * One layer's changes under `configsDir`: each regular file's text through `parse` (`rel` its path
 * below the root); links are skipped with a warning. `where` names the catalog in one-line errors.
 */
export async function readLayerChange<T>(layer: LayerSource, configsDir: string, limits: LayerLimits, where: string, parse: (text: string, rel: string) => T, warnings: string[] = []): Promise<LayerChange<T>> {
  if (/zstd/.test(layer.mediaType)) throw new BadInputError(`${where}: layer ${layer.digest} is zstd-compressed; prestage reads gzip and uncompressed layers (rebuild the catalog image with gzip layers)`);
  const root = configsDir.slice(1);
  const change: LayerChange<T> = { files: new Map(), hidden: [], opaque: [], ignores: new Map() };
  const tar = (await import('tar-stream')).default;
  const extract = tar.extract();
  const collect = (async () => {
    for await (const entry of extract) {
      const path = entryPath(entry.header.name, where);
      const base = posix.basename(path);
      const dir = posix.dirname(path);
      const type = entry.header.type;
      if (base === OPAQUE) {
        if (within(dir, root) || within(root, dir)) change.opaque.push(dir);
      } else if (base.startsWith(WHITEOUT)) {
        const hidden = posix.join(dir, base.slice(WHITEOUT.length));
        if (within(hidden, root) || within(root, hidden)) change.hidden.push(hidden);
      } else if (within(path, root) && path !== root) {
        const rel = path.slice(root.length + 1);
        if (type === 'symlink' || type === 'link') {
          warnings.push(`${where}: ${configsDir}/${rel} is a link; skipped (prestage reads only regular catalog files)`);
        } else if (type === 'file' || type === 'contiguous-file') {
          if ((entry.header.size ?? 0) > limits.maxFileBytes) throw new BadInputError(`${where}: ${configsDir}/${rel} is ${entry.header.size} bytes, over the ${limits.maxFileBytes}-byte limit for one catalog file`);
          if (change.files.size >= limits.maxFiles) throw new BadInputError(`${where}: over ${limits.maxFiles} files under ${configsDir}; not a sane catalog`);
          const text = await readText(entry as AsyncIterable<Buffer>);
          if (base === INDEX_IGNORE) change.ignores.set(posix.dirname(rel), text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#')));
          else change.files.set(rel, parse(text, rel));
        }
      }
      entry.resume();
    }
  })();
  collect.catch(() => undefined); // its error reaches the caller through Promise.all below
  try {
    const blob = await layer.open();
    const unpacked = /gzip/.test(layer.mediaType)
      ? pipeline(blob, createGunzip({ chunkSize: 256 * 1024 }), byteLimit(limits.maxLayerBytes, where), extract)
      : pipeline(blob, byteLimit(limits.maxLayerBytes, where), extract);
    await Promise.all([unpacked, collect]);
  } catch (error) {
    extract.destroy();
    if (isGzipOrTarError(error)) throw new BadInputError(`${where}: layer ${layer.digest} is not a valid tar (${(error as Error).message}); not a catalog image`);
    throw error;
  }
  return change;
}

/** Lower layers first: each layer's whiteouts delete what those below it put there, then its files land; sorted by path. */
export function applyLayers<T>(changes: readonly LayerChange<T>[], configsDir: string): Map<string, T> {
  const root = configsDir.slice(1);
  const files = new Map<string, T>();
  const ignores = new Map<string, string[]>();
  for (const change of changes) {
    for (const gone of [...change.hidden, ...change.opaque]) {
      const rel = within(root, gone) ? '' : gone.slice(root.length + 1);
      const below = (key: string): boolean => rel === '' || key === rel || key.startsWith(`${rel}/`);
      for (const key of [...files.keys()]) if (below(key)) files.delete(key);
      for (const key of [...ignores.keys()]) if (below(key) || key === rel) ignores.delete(key);
    }
    for (const [rel, file] of change.files) files.set(rel, file);
    for (const [dir, patterns] of change.ignores) ignores.set(dir, patterns);
  }
  for (const [dir, patterns] of ignores) for (const rel of [...files.keys()]) if (ignoredBy(rel, dir, patterns)) files.delete(rel);
  return new Map([...files].sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** `./configs/x` and `configs/x` alike; a path that climbs out of the image is refused. */
function entryPath(name: string, where: string): string {
  const trimmed = name.replace(/^(\.\/)+/, '').replace(/^\/+/, '');
  if (trimmed.split('/').includes('..')) throw new BadInputError(`${where}: a layer holds the path ${JSON.stringify(name)}, which climbs out of the image; refusing the catalog`);
  return posix.normalize(trimmed).replace(/\/+$/, '');
}

/** True when a path is, or is below, `root`. */
function within(path: string, root: string): boolean {
  return path === root || path.startsWith(`${root}/`);
}

/** A `.indexignore` pattern (gitignore's simple forms: a name or a glob, matched against the path below its directory or its last part). */
function ignoredBy(rel: string, dir: string, patterns: readonly string[]): boolean {
  const below = dir === '.' ? rel : rel.startsWith(`${dir}/`) ? rel.slice(dir.length + 1) : undefined;
  if (below === undefined) return false;
  return patterns.some((pattern) => {
    const glob = new RegExp(`^${pattern.replace(/^\//, '').replace(/\/$/, '').replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')}(/.*)?$`);
    return glob.test(below) || (!pattern.includes('/') && below.split('/').some((part) => glob.test(part)));
  });
}

async function readText(entry: AsyncIterable<Buffer>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of entry) parts.push(chunk);
  return Buffer.concat(parts).toString('utf8');
}

function byteLimit(max: number, where: string): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      seen += chunk.length;
      if (seen > max) done(new BadInputError(`${where}: a layer expands beyond ${max} bytes; refusing it as a possible gzip bomb`));
      else done(null, chunk);
    },
  });
}

function isGzipOrTarError(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? '';
  return code.startsWith('Z_') || /Invalid tar header|Unexpected end of data|unexpected end of file/i.test((error as Error | undefined)?.message ?? '');
}
