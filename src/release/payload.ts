/**
 * Reading an OpenShift release payload over the registry API: resolve the release image,
 * stream its LAST layer (the one that holds `release-manifests/`) through gunzip and tar
 * without buffering it or writing anything to disk, and collect what planning needs.
 */
import { createGunzip } from 'node:zlib';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { posix } from 'node:path';
import { BadInputError } from '../errors.js';
import { ManifestNotFoundError, type RegistryClient } from '../registry/client.js';
import { normaliseArch, type Descriptor } from '../registry/manifest.js';
import { digestReference, formatReference, parseReference, type ImageReference } from '../registry/reference.js';
import type { ManifestDocument, ParsedFile } from './documents.js';
import { parseImageReferences, parseReleaseMetadata, type ComponentImage } from './image-references.js';

/** The release a plan is for (the plan contract's `release`): pullspec, digests, version, architecture, channels. */
export interface PlanRelease {
  readonly pullSpec: string;
  readonly digest: string;
  readonly manifestDigest: string;
  readonly version: string;
  readonly architecture: string;
  readonly multiArch: boolean;
  readonly channels: readonly string[];
}

/** The release as planned, plus what planning does not publish. */
export interface ReleaseInfo extends PlanRelease {
  readonly previous: readonly string[];
}

export interface ReleaseFacts {
  readonly release: ReleaseInfo;
  readonly components: readonly ComponentImage[];
  readonly documents: readonly ManifestDocument[];
  readonly warnings: readonly string[];
}

export interface PayloadLimits {
  /** Largest single file accepted from the manifests layer. */
  readonly maxEntryBytes: number;
  /** Largest uncompressed size of the whole layer (gzip bombs). */
  readonly maxLayerBytes: number;
}

export const DEFAULT_LIMITS: PayloadLimits = { maxEntryBytes: 32 * 1024 * 1024, maxLayerBytes: 512 * 1024 * 1024 };

const PREFIX = 'release-manifests/';
/** Bytes gunzip hands on at a time (zlib's default is 16 KiB). */
const GUNZIP_CHUNK = 256 * 1024;

/** The architectures OpenShift releases are built for (Go names; x86_64 and aarch64 are accepted too). */
export const RELEASE_ARCHITECTURES = ['amd64', 'arm64', 'ppc64le', 's390x'];

type TarStream = typeof import('tar-stream');

/**
 * tar-stream (and the stream modules under it), loaded while the release's manifest is fetched:
 * the CPU is idle during those round trips, and busy with every module loaded before them.
 */
function loadTar(): Promise<TarStream> {
  return import('tar-stream').then((m) => m.default);
}

export async function readRelease(client: RegistryClient, pullSpec: string, arch: string, limits: PayloadLimits = DEFAULT_LIMITS): Promise<ReleaseFacts> {
  if (!RELEASE_ARCHITECTURES.includes(normaliseArch(arch))) {
    throw new BadInputError(`--arch ${arch} is not an OpenShift architecture; use one of ${RELEASE_ARCHITECTURES.join(', ')}`);
  }
  const tar = loadTar();
  const documents = import('./documents.js');
  for (const loading of [tar, documents]) loading.catch(() => undefined);
  const ref = parseReference(pullSpec);
  const named = formatReference(ref);
  let image;
  try {
    image = await client.resolveImage(ref, arch);
  } catch (err) {
    if (err instanceof ManifestNotFoundError) throw new BadInputError(`release image ${named} not found; check the pullspec (and --mirror when reading from a mirror)`);
    throw err;
  }
  const last = image.manifest.layers.at(-1);
  if (!last) throw new BadInputError(`${named} is not an OpenShift release image: it has no layers`);
  if (!/gzip/.test(last.mediaType)) {
    throw new BadInputError(`${named} is not an OpenShift release image: its last layer is ${last.mediaType || 'of unknown type'}, not a gzip tar`);
  }

  const warnings: string[] = [];
  // The config (architecture check) and the payload layer are read at once, not one after
  // the other; a wrong architecture is the error that counts.
  const reading = readManifestsLayer({ client, ref, layer: last, named, limits, tar, documents }, warnings);
  reading.catch(() => undefined);
  if (image.listDigest === undefined) await checkSingleArch(client, ref, image.manifest.config, arch, named);
  const { files, parsed } = await reading;
  const refsText = files.get('image-references');
  if (refsText === undefined) {
    throw new BadInputError(`${named} is not an OpenShift release image: its last layer has no release-manifests/image-references`);
  }
  const refs = parseImageReferences(refsText, named);
  warnings.push(...refs.warnings);
  const metaText = files.get('release-metadata');
  const meta = metaText !== undefined ? parseReleaseMetadata(metaText, warnings) : { channels: [], previous: [] };
  if (metaText === undefined) warnings.push('release has no release-metadata; channels unknown');
  if (meta.version && meta.version !== refs.version) warnings.push(`release-metadata version ${meta.version} differs from image-references ${refs.version}`);

  const topDigest = image.listDigest ?? image.digest;
  return {
    release: {
      pullSpec: digestReference(ref, topDigest),
      digest: topDigest,
      manifestDigest: image.digest,
      version: refs.version,
      architecture: normaliseArch(arch),
      multiArch: image.listDigest !== undefined || meta.architecture === 'multi',
      channels: meta.channels,
      previous: meta.previous,
    },
    components: refs.components,
    documents: (await documents).collectDocuments(parsed, warnings),
    warnings,
  };
}

/**
 * A single-arch release (`4.16.3-x86_64`) serves one architecture, named in its config; planning
 * it for another would pin images no node of that architecture can run.
 */
async function checkSingleArch(client: RegistryClient, ref: ImageReference, config: Descriptor, arch: string, named: string): Promise<void> {
  if (config.size > 1024 * 1024) return;
  const parts: Buffer[] = [];
  for await (const chunk of client.blobStream(ref, config) as AsyncIterable<Buffer>) parts.push(chunk);
  let architecture: unknown;
  try {
    architecture = (JSON.parse(Buffer.concat(parts).toString('utf8')) as { architecture?: unknown }).architecture;
  } catch {
    return;
  }
  if (typeof architecture === 'string' && architecture !== '' && normaliseArch(architecture) !== normaliseArch(arch)) {
    throw new BadInputError(`${named} is a single-architecture release for ${architecture}, not ${arch}; plan it with --arch ${architecture}, or plan the -multi release`);
  }
}

/** Where the manifests layer comes from, and how much of it to accept. */
interface ManifestsLayer {
  readonly client: RegistryClient;
  readonly ref: ImageReference;
  readonly layer: Descriptor;
  /** The release as the user named it, for messages. */
  readonly named: string;
  readonly limits: PayloadLimits;
  readonly tar: Promise<TarStream>;
  readonly documents: Promise<typeof import('./documents.js')>;
}

/** The layer's `release-manifests/` files, and each one's documents, parsed as it arrived. */
interface ManifestFiles {
  readonly files: Map<string, string>;
  readonly parsed: Map<string, ParsedFile>;
}

/**
 * Stream the layer; keep `release-manifests/*` file contents (bounded), skip everything else.
 * Corrupted bytes break gunzip before the digest can be checked, so a gzip or tar error is
 * followed by a verifying read: a digest mismatch is reported as such, a clean blob is parsed
 * once more (the first read was damaged in transit), and a second failure means the image
 * really is not a release.
 */
async function readManifestsLayer(source: ManifestsLayer, warnings: string[]): Promise<ManifestFiles> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await extractManifestFiles(source, attempt === 1 ? warnings : []);
    } catch (err) {
      if (!isGzipOrTarError(err)) throw err;
      if (attempt > 1) throw new BadInputError(`${source.named}: the last layer is not a valid gzip tar (${(err as Error).message}); not a release payload`);
      await drain(source.client.blobStream(source.ref, source.layer));
    }
  }
}

async function extractManifestFiles({ client, ref, layer, named, limits, tar, documents }: ManifestsLayer, warnings: string[]): Promise<ManifestFiles> {
  const files = new Map<string, string>();
  const parsed = new Map<string, ParsedFile>();
  const extract = (await tar).extract();
  const { parseFile } = await documents;
  const collect = (async () => {
    for await (const entry of extract) {
      const rel = manifestPath(entry.header.name, warnings);
      if (rel === undefined || entry.header.type !== 'file') {
        entry.resume();
        continue;
      }
      if ((entry.header.size ?? 0) > limits.maxEntryBytes) {
        throw new BadInputError(`${named}: release-manifests/${rel} is ${entry.header.size} bytes, over the ${limits.maxEntryBytes}-byte limit for one manifest file; not a sane release payload`);
      }
      const parts: Buffer[] = [];
      for await (const chunk of entry as AsyncIterable<Buffer>) parts.push(chunk);
      const text = Buffer.concat(parts).toString('utf8');
      files.set(rel, text);
      // Parsed now, while the rest of the layer is on its way: the CPU would wait for it anyway.
      parsed.set(rel, parseFile(rel, text));
    }
  })();
  try {
    await Promise.all([
      // Big output chunks: every chunk costs a thread-pool round trip and a pass through the
      // stream stages, and a release's manifests inflate to megabytes.
      pipeline(client.blobStream(ref, layer), createGunzip({ chunkSize: GUNZIP_CHUNK }), byteLimit(limits.maxLayerBytes, named), extract),
      collect,
    ]);
  } catch (err) {
    extract.destroy();
    throw err;
  }
  return { files, parsed };
}

/** `release-manifests/x` → `x`; absolute and `..` paths are refused so nothing can escape. */
function manifestPath(name: string, warnings: string[]): string | undefined {
  if (name.startsWith('/') || name.split('/').includes('..')) {
    warnings.push(`ignored unsafe tar entry ${JSON.stringify(name)} in the release layer`);
    return undefined;
  }
  const normal = posix.normalize(name).replace(/^\.\//, '');
  if (!normal.startsWith(PREFIX)) return undefined;
  const rel = normal.slice(PREFIX.length);
  return rel === '' || rel.includes('/') ? undefined : rel;
}

function byteLimit(max: number, named: string): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      seen += chunk.length;
      if (seen > max) {
        done(new BadInputError(`${named}: the last layer expands beyond ${max} bytes; refusing it as a possible gzip bomb (not a sane release payload)`));
        return;
      }
      done(null, chunk);
    },
  });
}

/** Read a stream to its end for its side effect: the client's digest check. */
async function drain(stream: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of stream) {
    // discard
  }
}

function isGzipOrTarError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code ?? '';
  return code.startsWith('Z_') || /Invalid tar header|Unexpected end of data|unexpected end of file/i.test((err as Error | undefined)?.message ?? '');
}
