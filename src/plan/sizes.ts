/**
 * Honest image sizes. Compressed bytes come from manifests. On-disk bytes come from each
 * unique gzip layer's ISIZE trailer, read with a 4-byte Range request instead of MCO's
 * "twice the compressed size" guess. ISIZE is the size mod 2^32: a layer that may hold 4 GiB
 * or more (big, or so compressible that a wrap is plausible) is read and inflated to count
 * its bytes instead. The guess is used only where the trailer cannot be trusted
 * (multi-member gzip, zstd, registries without Range).
 */
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { PrestageError, RegistryError } from '../errors.js';
import type { RegistryClient } from '../registry/client.js';
import type { Descriptor } from '../registry/manifest.js';
import { formatReference, type ImageReference } from '../registry/reference.js';
import type { PlannedLayer } from './types.js';
import { count } from '../plural.js';

export interface MeasuredImage {
  /** What the reference resolved to: a list digest for a manifest list. */
  readonly digest: string;
  readonly config: { readonly digest: string; readonly size: number };
  readonly layers: readonly PlannedLayer[];
  /** Bytes of the platform manifest as the registry sent it. */
  readonly manifestBytes?: number;
}

/** Deflate cannot shrink data by more than about 1032:1. */
const MAX_DEFLATE_RATIO = 1032;
/**
 * Container layers rarely compress better than this; past it (in the size a wrap would imply,
 * or in the ratio the trailer already shows) a wrapped ISIZE is plausible enough to count.
 */
const PLAUSIBLE_RATIO = 16;
const WRAP = 2 ** 32;

export type TrailerReading =
  /** ISIZE is the size: it cannot, or cannot plausibly, have wrapped. */
  | { readonly exact: number }
  /** The layer may hold 4 GiB or more: count it. */
  | { readonly count: string }
  /** ISIZE does not fit the layer (several gzip members, or a wrap past what counting is for). */
  | { readonly implausible: string };

/**
 * What a gzip trailer says about a layer of `compressedBytes`: stored blocks grow data only
 * slightly and deflate shrinks it at most ~1032x, so the true size is ISIZE + k * 2^32 within
 * those bounds.
 */
export function readTrailer(compressedBytes: number, trailer: Buffer): TrailerReading {
  if (trailer.length !== 4) return { implausible: 'the gzip trailer is not 4 bytes' };
  if (compressedBytes >= WRAP) return { count: 'the layer is over 4 GiB compressed' };
  const isize = trailer.readUInt32LE(0);
  const lowerBound = compressedBytes / 1.001 - 1024;
  if (isize < lowerBound || isize > compressedBytes * MAX_DEFLATE_RATIO) {
    return { implausible: 'the gzip trailer does not fit the layer size (several gzip members, or over 4 GiB)' };
  }
  const wrapPossible = isize + WRAP <= compressedBytes * MAX_DEFLATE_RATIO;
  if (wrapPossible && (isize + WRAP <= compressedBytes * PLAUSIBLE_RATIO || isize > compressedBytes * PLAUSIBLE_RATIO)) {
    return { count: `the layer may hold 4 GiB or more (ISIZE wraps there): ${isize} bytes from the trailer is a lower bound` };
  }
  return { exact: isize };
}

function layerKind(mediaType: string): 'gzip' | 'tar' | 'other' {
  if (/gzip/.test(mediaType)) return 'gzip';
  if (/(\.tar|diff\.tar|layer\.v1\.tar)$/.test(mediaType)) return 'tar';
  return 'other';
}

/** One size read per blob digest, shared by every image measured with it (a Map, or a longer-lived cache). */
export interface LayerSizeCache {
  get(digest: string): Promise<LayerSize> | undefined;
  set(digest: string, reading: Promise<LayerSize>): unknown;
  delete(digest: string): unknown;
}

/**
 * Resolve every image for `arch` and size each unique layer once; results in request order.
 * Trailer reads start as soon as each manifest arrives, so manifests and trailers overlap.
 */
export async function measureImages(
  client: RegistryClient,
  refs: readonly ImageReference[],
  arch: string,
  warnings: string[],
  onMeasured?: (done: number, total: number) => void,
  layerSizes: LayerSizeCache = new Map(),
): Promise<MeasuredImage[]> {
  let done = 0;
  return Promise.all(refs.map(async (ref) => {
    const measured = await measureImage(client, ref, arch, warnings, layerSizes);
    onMeasured?.(++done, refs.length);
    return measured;
  }));
}

/**
 * One image: its platform manifest for `arch` and the disk size of each layer, read through
 * `layerSizes` so layers shared with other images are read once. A failed read is not kept,
 * so another endpoint (the node agent tries mirrors in turn) can read it again.
 */
export async function measureImage(
  client: RegistryClient,
  ref: ImageReference,
  arch: string,
  warnings: string[],
  layerSizes: LayerSizeCache = new Map(),
): Promise<MeasuredImage> {
  // The media type stays each manifest's own (Docker and OCI images share blobs).
  const sizeOnce = async (layer: Descriptor): Promise<PlannedLayer> => {
    let sized = layerSizes.get(layer.digest);
    if (!sized) {
      const reading = sizeLayer(client, ref, layer, warnings);
      sized = reading;
      layerSizes.set(layer.digest, reading);
      reading.catch(() => {
        if (layerSizes.get(layer.digest) === reading) layerSizes.delete(layer.digest);
      });
    }
    return { digest: layer.digest, mediaType: layer.mediaType, compressedBytes: layer.size, ...(await sized) };
  };
  const img = await client.resolveImage(ref, arch);
  return {
    digest: img.listDigest ?? img.digest,
    config: { digest: img.manifest.config.digest, size: img.manifest.config.size },
    manifestBytes: img.manifestBytes,
    layers: await Promise.all(img.manifest.layers.map(sizeOnce)),
  };
}

export type LayerSize = Pick<PlannedLayer, 'diskBytes' | 'method'>;

/**
 * One warning line per cause, however many layers share it (a registry that ignores Range
 * would otherwise warn once per layer); the line is rewritten in place as layers join it.
 * Keyed by the caller's warnings list, so every caller keeps its own.
 */
const estimateLines = new WeakMap<string[], Map<string, { index: number; layers: string[] }>>();

function warnEstimate(warnings: string[], why: string, digest: string): void {
  let causes = estimateLines.get(warnings);
  if (!causes) estimateLines.set(warnings, (causes = new Map()));
  let cause = causes.get(why);
  if (!cause) causes.set(why, (cause = { index: warnings.push('') - 1, layers: [] }));
  cause.layers.push(digest);
  const n = cause.layers.length;
  warnings[cause.index] = n === 1
    ? `layer ${digest.slice(0, 19)}: ${why}; disk size estimated as 2x compressed`
    : `${count(n, 'layer')}: ${why}; disk sizes estimated as 2x compressed (-o json lists them)`;
}

async function sizeLayer(client: RegistryClient, ref: ImageReference, layer: Descriptor, warnings: string[]): Promise<LayerSize> {
  const estimate = (why: string): LayerSize => {
    warnEstimate(warnings, why, layer.digest);
    return { diskBytes: layer.size * 2, method: 'estimate-2x' };
  };
  switch (layerKind(layer.mediaType)) {
    case 'tar':
      return { diskBytes: layer.size, method: 'uncompressed' };
    case 'other':
      return estimate(`media type ${layer.mediaType} has no cheap size trailer`);
    case 'gzip': {
      const trailer = await client.readBlobTail(ref, layer, 4);
      if (!trailer) return estimate('the registry did not honour a Range request');
      const reading = readTrailer(layer.size, trailer);
      if ('implausible' in reading) return estimate(reading.implausible);
      if ('exact' in reading) return { diskBytes: reading.exact, method: 'gzip-isize' };
      return { diskBytes: await inflatedBytes(client, ref, layer), method: 'gzip-inflated' };
    }
  }
}

/**
 * The uncompressed size of a gzip layer, counted by inflating it as it streams (verified, never
 * stored: memory stays at a chunk or two however far it inflates). The work is bounded by the
 * download: deflate inflates at most ~1032x what it reads, what CRI-O does to the same layer
 * when it pulls it, and the registry's stall and rate floor bound the read. A stream that is not
 * valid gzip, or fails its CRC-32 or length check at the end, is the registry's bad answer:
 * one line naming the layer, exit 3.
 */
async function inflatedBytes(client: RegistryClient, ref: ImageReference, layer: Descriptor): Promise<number> {
  let bytes = 0;
  // Big output chunks: counting is per chunk, and a wrapped layer inflates to gigabytes.
  const count = new Writable({
    write(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      done();
    },
  });
  try {
    await pipeline(client.blobStream(ref, layer), createGunzip({ chunkSize: 1024 * 1024 }), count);
  } catch (err) {
    if (err instanceof PrestageError) throw err;
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (code.startsWith('Z_')) {
      throw new RegistryError(`${formatReference(ref)}: layer ${layer.digest} is not a valid gzip stream (${(err as Error).message}) after ${bytes} inflated bytes; the image is corrupt in the registry`, { cause: err });
    }
    throw err;
  }
  return bytes;
}
