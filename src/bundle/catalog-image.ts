/**
 * The bytes of a rebuilt catalog image, from the source image's and the filtered catalog's.
 * As oc-mirror v2 rebuilds one (internal/pkg/imagebuilder): every layer of the source, then a
 * layer that only deletes (`.wh.configs` at the configs directory's parent), then a layer with
 * the filtered catalog (`configs/<package>/catalog.json`); Cmd `serve <configs>`, labels kept.
 * Two layers, not one: CRI-O's storage applies a layer's `.wh.configs` as an overlay whiteout
 * device, and a `configs/` directory entry later in the same layer replaces that device with a
 * plain directory, through which the old catalog shows again (containers/storage pkg/archive).
 *
 * opm's cache: the source's `--cache-dir` (`/tmp/cache`, built with `--cache-only` for the old
 * catalog) no longer matches, and opm given `--cache-dir` enforces it, failing with "cache
 * requires rebuild" (cmd/opm/serve/serve.go, pkg/cache: a FNV-64a digest over the catalog and
 * the pogreb database). The whiteout layer deletes it too, and Cmd carries no `--cache-dir`, so
 * opm builds its cache in a temporary directory at start (cache.LoadOrRebuild), the one thing
 * it accepts without a matching prebuilt cache. Pure: bytes in, bytes out, each with its digest.
 */
import { posix } from 'node:path';
import { gzipSync } from 'node:zlib';
import { BadInputError } from '../errors.js';
import { sha256 } from '../registry/client.js';
import { MediaType } from '../registry/manifest.js';

export interface Blob {
  readonly digest: string;
  readonly mediaType: string;
  readonly bytes: Buffer;
}

export interface Layer extends Blob {
  /** The uncompressed tar's digest: the config's `rootfs.diff_ids` entry. */
  readonly diffId: string;
}

type Json = { [key: string]: unknown };

const LAYER_TYPE: Readonly<Record<string, string>> = {
  [MediaType.ociManifest]: 'application/vnd.oci.image.layer.v1.tar+gzip',
  [MediaType.dockerManifest]: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
};

/** What a catalog image runs: its opm binary part, and the cache directory its `serve` names. */
export interface ServeCommand {
  readonly entrypoint: readonly string[];
  readonly cacheDir?: string;
  /** False for a binary-less catalog (OLM's extractContent serves it): its command is left as is. */
  readonly serves: boolean;
}

export function serveCommand(config: Json): ServeCommand {
  const inner = (config.config ?? {}) as Json;
  const argv = [...strings(inner.Entrypoint), ...strings(inner.Cmd)];
  const at = argv.indexOf('serve');
  if (at < 0) return { entrypoint: strings(inner.Entrypoint), serves: false };
  const args = argv.slice(at + 1);
  const flag = args.findIndex((a) => a === '--cache-dir' || a.startsWith('--cache-dir='));
  const cacheDir = flag < 0 ? undefined : args[flag]!.includes('=') ? args[flag]!.slice('--cache-dir='.length) : args[flag + 1];
  // Only an absolute path below `/` gets a whiteout: the layer's paths must stay inside the image.
  const inside = cacheDir !== undefined && cacheDir.startsWith('/') && !cacheDir.split('/').includes('..') && !/[\0\n]/.test(cacheDir) && posix.normalize(cacheDir) !== '/';
  return { entrypoint: argv.slice(0, at), serves: true, ...(inside ? { cacheDir: posix.normalize(cacheDir).replace(/\/+$/, '') } : {}) };
}

/** The two new layers: the deleting one, then the filtered catalog, gzip as the manifest's type names it. */
export async function catalogLayers(manifestType: string, configsDir: string, cacheDir: string | undefined, files: ReadonlyMap<string, string>, mtime: Date): Promise<[Layer, Layer]> {
  const mediaType = LAYER_TYPE[manifestType];
  if (!mediaType) throw new BadInputError(`catalog manifest type ${manifestType} is not an image manifest`);
  const whiteouts = [configsDir, ...(cacheDir ? [cacheDir] : [])].map((path) => {
    const rel = path.replace(/^\/+/, '');
    return { name: posix.join(posix.dirname(rel), `.wh.${posix.basename(rel)}`), type: 'file' as const, mode: 0o644 };
  });
  const root = configsDir.replace(/^\/+/, '');
  const dirs = new Set<string>([root]);
  for (const path of files.keys()) {
    const parts = posix.dirname(path).split('/').filter((p) => p !== '.');
    parts.forEach((_, i) => dirs.add(posix.join(root, ...parts.slice(0, i + 1))));
  }
  const entries = [
    ...[...dirs].sort().map((name) => ({ name: `${name}/`, type: 'directory' as const, mode: 0o755 })),
    ...[...files].sort(([a], [b]) => (a < b ? -1 : 1)).map(([path, text]) => ({ name: posix.join(root, path), type: 'file' as const, mode: 0o644, body: Buffer.from(text) })),
  ];
  return [layerOf(await tarOf(whiteouts, mtime), mediaType), layerOf(await tarOf(entries, mtime), mediaType)];
}

/** The source config with the new layers, `serve <configs>` without `--cache-dir`, and a history line per layer. */
export function rebuiltConfig(source: Buffer, layers: readonly Layer[], configsDir: string, what: string): Buffer {
  const config = JSON.parse(source.toString('utf8')) as Json;
  const rootfs = (config.rootfs ?? {}) as Json;
  if (!Array.isArray(rootfs.diff_ids)) throw new BadInputError(`${what}: its image config has no rootfs.diff_ids; not an image config`);
  const serve = serveCommand(config);
  const inner = { ...((config.config ?? {}) as Json) };
  if (serve.serves) {
    if (serve.entrypoint.length > 0) inner.Entrypoint = serve.entrypoint;
    inner.Cmd = ['serve', configsDir];
  }
  const history = Array.isArray(config.history)
    ? [...(config.history as unknown[]), ...[`delete ${configsDir}${serve.cacheDir ? ` and the stale opm cache ${serve.cacheDir}` : ''}`, `filtered catalog at ${configsDir}`].map((line) => ({ ...(config.created !== undefined ? { created: config.created } : {}), created_by: `prestage bundle create: ${line}` }))]
    : undefined;
  const out: Json = { ...config, config: inner, rootfs: { ...rootfs, diff_ids: [...(rootfs.diff_ids as unknown[]), ...layers.map((l) => l.diffId)] }, ...(history ? { history } : {}) };
  return Buffer.from(JSON.stringify(out));
}

/** The source platform manifest naming the new config and, after the source's layers, the new ones. */
export function rebuiltManifest(source: Buffer, config: Blob, layers: readonly Layer[]): Buffer {
  const manifest = JSON.parse(source.toString('utf8')) as Json;
  const oldConfig = (manifest.config ?? {}) as Json;
  const oldLayers = Array.isArray(manifest.layers) ? (manifest.layers as unknown[]) : [];
  return Buffer.from(JSON.stringify({
    ...manifest,
    config: { ...oldConfig, digest: config.digest, size: config.bytes.length },
    layers: [...oldLayers, ...layers.map((l) => ({ mediaType: l.mediaType, digest: l.digest, size: l.bytes.length }))],
  }));
}

/** A list naming the rebuilt platform manifests in place of the source's (platforms the bundle did not keep dropped). */
export function rebuiltList(source: Buffer, rebuilt: ReadonlyMap<string, Blob>): Buffer {
  const list = JSON.parse(source.toString('utf8')) as Json;
  const entries = (Array.isArray(list.manifests) ? (list.manifests as Json[]) : []).filter((e) => rebuilt.has(String(e.digest)));
  return Buffer.from(JSON.stringify({ ...list, manifests: entries.map((e) => ({ ...e, digest: rebuilt.get(String(e.digest))!.digest, size: rebuilt.get(String(e.digest))!.bytes.length })) }));
}

export function blobOf(bytes: Buffer, mediaType: string): Blob {
  return { digest: sha256(bytes), mediaType, bytes };
}

function layerOf(tar: Buffer, mediaType: string): Layer {
  // gzip with no name and mtime 0 in its header: the same input gives the same bytes on every run.
  return { ...blobOf(gzipSync(tar, { level: 9 }), mediaType), diffId: sha256(tar) };
}

interface TarEntry {
  readonly name: string;
  readonly type: 'file' | 'directory';
  readonly mode: number;
  readonly body?: Buffer;
}

async function tarOf(entries: readonly TarEntry[], mtime: Date): Promise<Buffer> {
  const tar = (await import('tar-stream')).default;
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (chunk: unknown) => chunks.push(chunk as Buffer));
  const ended = new Promise<void>((resolve, reject) => pack.on('end', resolve).on('error', reject));
  for (const e of entries) {
    const body = e.type === 'file' ? (e.body ?? Buffer.alloc(0)) : Buffer.alloc(0);
    pack.entry({ name: e.name, type: e.type, mode: e.mode, mtime, uid: 0, gid: 0, uname: '', gname: '', size: body.length }, body);
  }
  pack.finalize();
  await ended;
  return Buffer.concat(chunks);
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}
