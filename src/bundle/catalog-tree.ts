/**
 * A catalog image's file-based catalog as its filesystem holds it, read from layer streams (the
 * bundle's own blobs, or the source registry for blobs a previous bundle carried): each layer
 * through gunzip and tar, never to disk, then applied in order with its whiteouts and
 * `.indexignore` files, as src/catalog/image.ts reads a catalog over the registry. Unlike that
 * reader, which keeps a compact model, this one keeps the documents themselves (a JSON document
 * as its own text), so a filtered catalog can be written from what the catalog said; only the
 * documents of the packages asked for are kept, so a large catalog costs little memory.
 */
import { posix } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { BadInputError } from '../errors.js';
import type { CatalogImageLimits } from '../catalog/image.js';
import { catalogDocuments } from '../catalog/load.js';

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';
const INDEX_IGNORE = '.indexignore';

/** One document of a catalog file: parsed, with its text when it was JSON. */
export interface CatalogDoc {
  readonly doc: { readonly [key: string]: unknown };
  readonly raw?: string;
}

/** What one layer does to the catalog root (paths relative to the image root, without a leading `/`). */
export interface LayerChange {
  /** Files under the root it adds, by path below the root: their kept documents. */
  readonly files: Map<string, CatalogDoc[]>;
  /** Paths whose lower-layer content it deletes (`.wh.NAME`), subtrees too. */
  readonly hidden: string[];
  /** Directories whose lower-layer content it deletes (`.wh..wh..opq`). */
  readonly opaque: string[];
  readonly ignores: Map<string, string[]>;
}

export interface LayerSource {
  readonly mediaType: string;
  readonly digest: string;
  open(): Promise<Readable>;
}

/** The package a document belongs to: an `olm.package`'s name, anything else's `package`. */
export function packageOf(doc: CatalogDoc['doc']): string | undefined {
  const name = doc.schema === 'olm.package' ? doc.name : doc.package;
  return typeof name === 'string' ? name : undefined;
}

/**
 * One layer's changes under `configsDir`; `keep` picks the packages whose documents are kept
 * (every document when absent). `where` names the catalog in one-line errors.
 */
export async function readLayerChange(layer: LayerSource, configsDir: string, limits: CatalogImageLimits, where: string, keep?: (pkg: string) => boolean): Promise<LayerChange> {
  if (/zstd/.test(layer.mediaType)) throw new BadInputError(`${where}: layer ${layer.digest} is zstd-compressed; prestage reads gzip and uncompressed layers`);
  const root = configsDir.slice(1);
  const change: LayerChange = { files: new Map(), hidden: [], opaque: [], ignores: new Map() };
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
      } else if (within(path, root) && path !== root && (type === 'file' || type === 'contiguous-file')) {
        const rel = path.slice(root.length + 1);
        if ((entry.header.size ?? 0) > limits.maxFileBytes) throw new BadInputError(`${where}: ${configsDir}/${rel} is ${entry.header.size} bytes, over the ${limits.maxFileBytes}-byte limit for one catalog file`);
        if (change.files.size >= limits.maxFiles) throw new BadInputError(`${where}: over ${limits.maxFiles} files under ${configsDir}; not a sane catalog`);
        const text = await readText(entry as AsyncIterable<Buffer>);
        if (base === INDEX_IGNORE) change.ignores.set(posix.dirname(rel), text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#')));
        else change.files.set(rel, keptDocuments(text, `${where}: ${configsDir}/${rel}`, limits, keep));
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
    if (isGzipOrTarError(error)) throw new BadInputError(`${where}: layer ${layer.digest} is not a valid tar (${(error as Error).message})`);
    throw error;
  }
  return change;
}

/** Lower layers first: each layer's whiteouts delete what those below it put there, then its files land. */
export function applyLayers(changes: readonly LayerChange[], configsDir: string): Map<string, CatalogDoc[]> {
  const root = configsDir.slice(1);
  const files = new Map<string, CatalogDoc[]>();
  const ignores = new Map<string, string[]>();
  for (const change of changes) {
    for (const gone of [...change.hidden, ...change.opaque]) {
      const rel = within(root, gone) ? '' : gone.slice(root.length + 1);
      const below = (key: string): boolean => rel === '' || key === rel || key.startsWith(`${rel}/`);
      for (const key of [...files.keys()]) if (below(key)) files.delete(key);
      for (const key of [...ignores.keys()]) if (below(key) || key === rel) ignores.delete(key);
    }
    for (const [rel, docs] of change.files) files.set(rel, docs);
    for (const [dir, patterns] of change.ignores) ignores.set(dir, patterns);
  }
  for (const [dir, patterns] of ignores) for (const rel of [...files.keys()]) if (ignoredBy(rel, dir, patterns)) files.delete(rel);
  return new Map([...files].sort(([a], [b]) => (a < b ? -1 : 1)));
}

function keptDocuments(text: string, where: string, limits: CatalogImageLimits, keep?: (pkg: string) => boolean): CatalogDoc[] {
  const kept: CatalogDoc[] = [];
  for (const { doc, index, raw } of catalogDocuments(text, where, limits)) {
    if (doc === null || doc === undefined) continue;
    if (typeof doc !== 'object' || Array.isArray(doc)) throw new BadInputError(`${where} document ${index + 1} is not an object`);
    const pkg = packageOf(doc);
    if (keep && (pkg === undefined || !keep(pkg))) continue;
    kept.push(raw !== undefined ? { doc, raw } : { doc });
  }
  return kept;
}

/** `./configs/x` and `configs/x` alike; a path that climbs out of the image is refused. */
function entryPath(name: string, where: string): string {
  const trimmed = name.replace(/^(\.\/)+/, '').replace(/^\/+/, '');
  if (trimmed.split('/').includes('..')) throw new BadInputError(`${where}: a layer holds the path ${JSON.stringify(name)}, which climbs out of the image`);
  return posix.normalize(trimmed).replace(/\/+$/, '');
}

function within(path: string, root: string): boolean {
  return path === root || path.startsWith(`${root}/`);
}

/** A `.indexignore` pattern, as catalog/image.ts matches it (gitignore's simple forms). */
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
