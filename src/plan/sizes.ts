/**
 * Honest image sizes. Compressed bytes come from manifests. On-disk bytes come from each
 * unique gzip layer's ISIZE trailer, read with a 4-byte Range request instead of MCO's
 * "twice the compressed size" guess; the guess is used only where the trailer cannot be
 * trusted (multi-member gzip, layers over 4 GiB, zstd, registries without Range).
 */
import type { RegistryClient } from '../registry/client.js';
import type { Descriptor } from '../registry/manifest.js';
import type { ImageReference } from '../registry/reference.js';
import type { PlannedLayer } from './types.js';

export interface MeasuredImage {
  /** What the reference resolved to: a list digest for a manifest list. */
  readonly digest: string;
  readonly config: { readonly digest: string; readonly size: number };
  readonly layers: readonly PlannedLayer[];
}

/** Deflate cannot shrink data by more than about 1032:1. */
const MAX_DEFLATE_RATIO = 1032;

/**
 * Disk size of a gzip layer from its trailer, or undefined when the trailer is implausible:
 * stored blocks can grow data only slightly, and deflate shrinks it at most ~1032x, so an
 * ISIZE outside those bounds means several gzip members or a size wrapped at 4 GiB.
 */
export function diskBytesFromTrailer(compressedBytes: number, trailer: Buffer): number | undefined {
  if (trailer.length !== 4 || compressedBytes >= 2 ** 32) return undefined;
  const isize = trailer.readUInt32LE(0);
  const lowerBound = compressedBytes / 1.001 - 1024;
  if (isize < lowerBound || isize > compressedBytes * MAX_DEFLATE_RATIO) return undefined;
  return isize;
}

function layerKind(mediaType: string): 'gzip' | 'tar' | 'other' {
  if (/gzip/.test(mediaType)) return 'gzip';
  if (/(\.tar|diff\.tar|layer\.v1\.tar)$/.test(mediaType)) return 'tar';
  return 'other';
}

/** One size read per blob digest, shared by every image measured with it. */
export type LayerSizeCache = Map<string, Promise<LayerSize>>;

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
): Promise<MeasuredImage[]> {
  const layerSizes: LayerSizeCache = new Map();
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
    : `${n} layers: ${why}; disk sizes estimated as 2x compressed (-o json lists them)`;
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
      const disk = diskBytesFromTrailer(layer.size, trailer);
      if (disk === undefined) return estimate('the gzip trailer does not fit the layer size (several gzip members, or over 4 GiB)');
      return { diskBytes: disk, method: 'gzip-isize' };
    }
  }
}
