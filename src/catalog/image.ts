/**
 * A file-based catalog read from its image over the registry API: the config's
 * `operators.operatorframework.io.index.configs.v1` label names the FBC root; every layer is
 * streamed through gunzip and tar (never to disk), the files under the root parsed as they arrive
 * (load.ts), and the layers applied in order with their whiteouts, as the image's filesystem
 * would hold them (oc-mirror's rebuilt catalogs hide the old `/configs` under `.wh.configs` and
 * add a new one above it). A SQLite catalog (the pre-FBC `index.database.v1` label) is refused.
 */
import { createGunzip } from 'node:zlib';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { posix } from 'node:path';
import { BadInputError } from '../errors.js';
import { ManifestNotFoundError, type RegistryClient } from '../registry/client.js';
import type { Descriptor } from '../registry/manifest.js';
import { digestReference, formatReference, parseReference } from '../registry/reference.js';
import type { Catalog, CatalogBundle, DeclarativeConfig } from './declcfg.js';
import { CATALOG_LIMITS, loadCatalogFile, type CatalogFile, type CatalogLimits } from './load.js';

export const CONFIGS_LABEL = 'operators.operatorframework.io.index.configs.v1';
export const DATABASE_LABEL = 'operators.operatorframework.io.index.database.v1';

/** Bounds of one catalog image beyond its documents'. */
export interface CatalogImageLimits extends CatalogLimits {
  /** Uncompressed bytes of one layer (gzip bombs); the base layers of opm's image are ~150 MB. */
  readonly maxLayerBytes: number;
  readonly maxLayers: number;
  /** Files under the catalog root. */
  readonly maxFiles: number;
}

export const CATALOG_IMAGE_LIMITS: CatalogImageLimits = { ...CATALOG_LIMITS, maxLayerBytes: 4 * 1024 ** 3, maxLayers: 128, maxFiles: 100_000 };

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';

/** What one layer does to the catalog root: files it adds, paths it hides from the layers below. */
interface LayerChange {
  readonly files: Map<string, CatalogFile>;
  /** Paths (relative to the image root) whose lower-layer content is deleted, subtrees too. */
  readonly hidden: string[];
  /** Directories whose lower-layer content is deleted (opaque whiteouts). */
  readonly opaque: string[];
  readonly ignores: Map<string, string[]>;
}

export async function readCatalog(client: RegistryClient, reference: string, arch: string, warnings: string[], limits: CatalogImageLimits = CATALOG_IMAGE_LIMITS): Promise<Catalog> {
  const ref = parseReference(reference);
  const named = formatReference(ref);
  let image;
  try {
    image = await client.resolveImage(ref, arch);
  } catch (error) {
    if (error instanceof ManifestNotFoundError) throw new BadInputError(`catalog image ${named} not found; check the reference (and --mirror when reading from a mirror)`);
    throw error;
  }
  const configsDir = await catalogRoot(client, reference, image.manifest.config, named);
  const layers = image.manifest.layers;
  if (layers.length > limits.maxLayers) throw new BadInputError(`catalog ${named} has ${layers.length} layers, over the limit of ${limits.maxLayers}; not a sane catalog image`);
  const documents = { count: 0 };
  const changes = await Promise.all(layers.map((layer) => readLayer(client, reference, layer, configsDir, named, limits, documents, warnings)));
  const files = applyLayers(changes, configsDir, limits, named);
  if (files.size === 0) throw new BadInputError(`catalog ${named}: its ${CONFIGS_LABEL} label names ${configsDir}, which holds no catalog files; is it a catalog image?`);
  const digest = image.listDigest ?? image.digest;
  return { reference, pullSpec: digestReference(ref, digest), digest, configsDir, config: assemble([...files.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, f]) => f), named) };
}

/** The FBC root the image's label names: an absolute path inside the image, or a one-line refusal. */
async function catalogRoot(client: RegistryClient, reference: string, config: Descriptor, named: string): Promise<string> {
  const bytes = await client.readBlob(parseReference(reference), config, 4 * 1024 * 1024);
  let labels: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(bytes.toString('utf8')) as { config?: { Labels?: Record<string, unknown> | null } };
    labels = parsed.config?.Labels ?? {};
  } catch {
    throw new BadInputError(`catalog ${named}: its image config is not JSON; not a catalog image`);
  }
  const root = labels[CONFIGS_LABEL];
  if (root === undefined && labels[DATABASE_LABEL] !== undefined) {
    throw new BadInputError(`catalog ${named} is a SQLite (pre-FBC) catalog (label ${DATABASE_LABEL}); OLM serves only file-based catalogs since OpenShift 4.11: use the FBC catalog of your release (v4.11 or later), or convert it with opm migrate`);
  }
  if (typeof root !== 'string' || root === '') throw new BadInputError(`catalog ${named} has no ${CONFIGS_LABEL} label; it is not a file-based catalog image`);
  const normal = posix.normalize(root);
  if (!root.startsWith('/') || root.split('/').includes('..') || normal === '/' || /[\0\n]/.test(root)) {
    throw new BadInputError(`catalog ${named}: its ${CONFIGS_LABEL} label ${JSON.stringify(root)} is not a directory inside the image (an absolute path below /, without ..)`);
  }
  return normal.replace(/\/+$/, '');
}

/** `./configs/x` and `configs/x` alike; a path that climbs out of the image is refused. */
function entryPath(name: string, named: string): string {
  const trimmed = name.replace(/^(\.\/)+/, '').replace(/^\/+/, '');
  if (trimmed.split('/').includes('..')) throw new BadInputError(`catalog ${named}: a layer holds the path ${JSON.stringify(name)}, which climbs out of the image; refusing the catalog`);
  return posix.normalize(trimmed).replace(/\/+$/, '');
}

/** `dir/.wh.name` hides `dir/name`; true when a path is, or is below, `root`. */
function within(path: string, root: string): boolean {
  return path === root || path.startsWith(`${root}/`);
}

async function readLayer(client: RegistryClient, reference: string, layer: Descriptor, configsDir: string, named: string, limits: CatalogImageLimits, documents: { count: number }, warnings: string[]): Promise<LayerChange> {
  const root = configsDir.slice(1);
  const change: LayerChange = { files: new Map(), hidden: [], opaque: [], ignores: new Map() };
  if (/zstd/.test(layer.mediaType)) throw new BadInputError(`catalog ${named}: layer ${layer.digest} is zstd-compressed; prestage reads gzip and uncompressed layers (rebuild the catalog image with gzip layers)`);
  const tar = (await import('tar-stream')).default;
  const extract = tar.extract();
  const collect = (async () => {
    for await (const entry of extract) {
      const path = entryPath(entry.header.name, named);
      const base = posix.basename(path);
      const dir = posix.dirname(path);
      if (base === OPAQUE) {
        if (within(dir, root) || within(root, dir)) change.opaque.push(dir);
      } else if (base.startsWith(WHITEOUT)) {
        const hidden = posix.join(dir, base.slice(WHITEOUT.length));
        if (within(hidden, root) || within(root, hidden)) change.hidden.push(hidden);
      } else if (within(path, root) && path !== root) {
        const rel = path.slice(root.length + 1);
        const type = entry.header.type;
        if (type === 'symlink' || type === 'link') {
          warnings.push(`catalog ${named}: ${configsDir}/${rel} is a link; skipped (prestage reads only regular catalog files)`);
        } else if (type === 'file' || type === 'contiguous-file') {
          if ((entry.header.size ?? 0) > limits.maxFileBytes) throw new BadInputError(`catalog ${named}: ${configsDir}/${rel} is ${entry.header.size} bytes, over the ${limits.maxFileBytes}-byte limit for one catalog file`);
          if (change.files.size >= limits.maxFiles) throw new BadInputError(`catalog ${named}: over ${limits.maxFiles} files under ${configsDir}; not a sane catalog`);
          const text = await readEntry(entry as AsyncIterable<Buffer>);
          if (base === '.indexignore') change.ignores.set(posix.dirname(rel), text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#')));
          else {
            const file = loadCatalogFile(text, `catalog ${named}: ${configsDir}/${rel}`, limits, documents.count);
            documents.count += file.documents;
            change.files.set(rel, file);
          }
        }
      }
      entry.resume();
    }
  })();
  try {
    const blob = client.blobStream(parseReference(reference), layer);
    const unpacked = /gzip/.test(layer.mediaType)
      ? pipeline(blob, createGunzip({ chunkSize: 256 * 1024 }), byteLimit(limits.maxLayerBytes, named), extract)
      : pipeline(blob, byteLimit(limits.maxLayerBytes, named), extract);
    await Promise.all([unpacked, collect]);
  } catch (error) {
    extract.destroy();
    if (isGzipOrTarError(error)) throw new BadInputError(`catalog ${named}: layer ${layer.digest} is not a valid tar (${(error as Error).message}); not a catalog image`);
    throw error;
  }
  return change;
}

async function readEntry(entry: AsyncIterable<Buffer>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of entry) parts.push(chunk);
  return Buffer.concat(parts).toString('utf8');
}

/** Lower layers first: each layer's whiteouts delete what those below it put there, then its files land. */
function applyLayers(changes: readonly LayerChange[], configsDir: string, limits: CatalogImageLimits, named: string): Map<string, CatalogFile> {
  const root = configsDir.slice(1);
  const files = new Map<string, CatalogFile>();
  const ignores = new Map<string, string[]>();
  for (const change of changes) {
    for (const gone of [...change.hidden, ...change.opaque]) {
      const rel = within(root, gone) ? '' : gone.slice(root.length + 1);
      for (const map of [files, ignores] as Map<string, unknown>[]) {
        for (const key of [...map.keys()]) if (rel === '' || key === rel || key.startsWith(`${rel}/`) || (posix.dirname(key) === rel && map === ignores)) map.delete(key);
      }
    }
    for (const [rel, file] of change.files) files.set(rel, file);
    for (const [dir, patterns] of change.ignores) ignores.set(dir, patterns);
  }
  for (const [dir, patterns] of ignores) {
    for (const rel of [...files.keys()]) if (ignoredBy(rel, dir, patterns)) files.delete(rel);
  }
  if (files.size > limits.maxFiles) throw new BadInputError(`catalog ${named}: over ${limits.maxFiles} files under ${configsDir}; not a sane catalog`);
  return files;
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

/** The files' parts as one model, checked as opm checks a catalog's references. */
function assemble(files: readonly CatalogFile[], named: string): DeclarativeConfig {
  const packages = files.flatMap((f) => f.packages);
  const channels = files.flatMap((f) => f.channels);
  const bundles = files.flatMap((f) => f.bundles);
  const deprecations = files.flatMap((f) => f.deprecations);
  const packageNames = new Set<string>();
  for (const p of packages) {
    if (packageNames.has(p.name)) throw new BadInputError(`catalog ${named}: package ${p.name} is declared twice; opm refuses such a catalog`);
    packageNames.add(p.name);
  }
  const bundleKeys = new Set<string>();
  for (const b of bundles) {
    if (!packageNames.has(b.package)) throw new BadInputError(`catalog ${named}: bundle ${b.name} names package ${b.package}, which the catalog does not declare`);
    const key = `${b.package}/${b.name}`;
    if (bundleKeys.has(key)) throw new BadInputError(`catalog ${named}: bundle ${b.name} of package ${b.package} is declared twice`);
    bundleKeys.add(key);
  }
  const channelKeys = new Set<string>();
  for (const c of channels) {
    if (!packageNames.has(c.package)) throw new BadInputError(`catalog ${named}: channel ${c.name} names package ${c.package}, which the catalog does not declare`);
    const key = `${c.package}/${c.name}`;
    if (channelKeys.has(key)) throw new BadInputError(`catalog ${named}: channel ${c.name} of package ${c.package} is declared twice`);
    channelKeys.add(key);
    for (const e of c.entries) if (!bundleKeys.has(`${c.package}/${e.name}`)) throw new BadInputError(`catalog ${named}: channel ${c.name} of package ${c.package} names bundle ${e.name}, which the catalog does not hold`);
  }
  return { packages, channels, bundles, deprecations };
}

/** Every image a bundle brings to a node: the bundle image (OLM's unpack Job), its related images and its CSV's. */
export function bundleImages(bundle: CatalogBundle): string[] {
  const images = new Set<string>();
  if (bundle.image !== '') images.add(bundle.image);
  for (const r of bundle.relatedImages) images.add(r.image);
  for (const d of bundle.deployments ?? []) for (const i of d.images) images.add(i);
  return [...images];
}

function byteLimit(max: number, named: string): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      seen += chunk.length;
      if (seen > max) done(new BadInputError(`catalog ${named}: a layer expands beyond ${max} bytes; refusing it as a possible gzip bomb`));
      else done(null, chunk);
    },
  });
}

function isGzipOrTarError(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? '';
  return code.startsWith('Z_') || /Invalid tar header|Unexpected end of data|unexpected end of file/i.test((error as Error | undefined)?.message ?? '');
}
