/**
 * Disk admission: which missing images of the selecting sets may be pulled given the image
 * filesystem's free space, from the exact layer sizes the registry gives (`disk.ts` decides).
 * It also keeps what it learnt of those layers, for the bytes the status reports.
 */
import type { Logger } from 'pino';
import type { LedgerMeter } from '../net/link-meter.js';
import type { PinnedImageSet } from '../api/prestage.js';
import { COMPRESSED_BYTES_ANNOTATION, DISK_BYTES_ANNOTATION } from '../api/set-metadata.js';
import type { PullSecret } from '../registry/credentials.js';
import { checkDisk, imageBytes } from './disk.js';
import { hasLayers, type ImageLayers, type ImageSizeSource, type SizeResult } from './image-sizes.js';
import { linkCharges } from './link-share.js';

/** An image whose sizes could not be read only for the status is asked about again after this. */
const STATUS_SIZE_RETRY_MS = 10 * 60_000;

export interface DiskAdmissionOptions {
  /** Bytes of the image filesystem that pre-loading must leave free. */
  readonly reserveBytes: number;
  /** Exact image sizes; without it, or where it cannot tell, a set's annotation is the estimate. */
  readonly imageSizes?: ImageSizeSource;
  readonly log: Logger;
  /** The clock (tests move it). */
  readonly now?: () => number;
}

export interface Admission {
  /** Image to pull → its size for the pull timeout (undefined: unknown). */
  readonly admitted: Map<string, number | undefined>;
  /** Set → why it does not fit on disk; nothing of it is admitted. */
  readonly failures: Map<string, string>;
  /** Admitted image → compressed bytes its pull moves over the link (layers new to the node, each once; config, manifests). */
  readonly linkBytes: Map<string, number>;
}

export class DiskAdmission {
  /** Layers with their uncompressed sizes of the selecting sets' images, for the status's bytes. */
  private readonly knownLayers = new Map<string, ImageLayers>();
  /** Images whose sizes could not be read: when to ask again just for the status. */
  private readonly sizesRetryAt = new Map<string, number>();
  private readonly now: () => number;

  constructor(private readonly options: DiskAdmissionOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Which missing images fit, set by set in name order: a set whose new layers do not fit in
   * what is left (free minus reserve minus earlier sets' needs) fails whole with nothing pulled.
   * Sizes are the exact uncompressed sizes of the layers not on the node yet (`disk.ts`); where
   * they cannot be found the set's annotation is the estimate, and the log and error say so.
   */
  async admit(
    sets: readonly PinnedImageSet[],
    present: ReadonlySet<string>,
    freeBytes: number,
    pullSecrets: readonly PullSecret[],
    arch: string,
    { shut = [], meter }: { readonly shut?: readonly PinnedImageSet[]; readonly meter?: () => LedgerMeter | undefined } = {},
  ): Promise<Admission> {
    const { imageSizes, log } = this.options;
    const wanted = new Set(sets.flatMap((set) => set.spec.pinnedImages.map((entry) => entry.name)));
    // Sets that may not pull now (paused, outside their windows) are neither checked nor sized:
    // no request crosses the link for them. What is known of their images is kept for the status.
    const kept = new Set([...wanted, ...shut.flatMap((set) => set.spec.pinnedImages.map((entry) => entry.name))]);
    for (const image of this.knownLayers.keys()) if (!kept.has(image)) this.knownLayers.delete(image);
    for (const image of this.sizesRetryAt.keys()) if (!kept.has(image)) this.sizesRetryAt.delete(image);
    if (![...wanted].some((image) => !present.has(image))) {
      // Nothing missing, nothing to check. Only the status's bytes may still lack sizes (after a
      // restart): look those up once; in the steady state there is no registry traffic.
      const unknown = [...wanted].filter((image) => !this.knownLayers.has(image) && (this.sizesRetryAt.get(image) ?? 0) <= this.now());
      if (imageSizes && unknown.length > 0) this.remember(await imageSizes.layers(unknown, { arch, pullSecrets, ...withMeter(meter?.()) }));
      return { admitted: new Map(), failures: new Map(), linkBytes: new Map() };
    }
    // Stored images are looked up too: their layers are on the node already.
    const sizes: Map<string, SizeResult> = imageSizes ? await imageSizes.layers([...wanted], { arch, pullSecrets, ...withMeter(meter?.()) }) : new Map();
    this.remember(sizes);
    const { admitted, failures, notExact } = checkDisk({
      sets: sets.map((set) => ({ name: set.metadata.name, images: set.spec.pinnedImages.map((entry) => entry.name), annotationBytes: annotationBytes(set) })),
      present,
      sizes,
      freeBytes,
      reserveBytes: this.options.reserveBytes,
    });
    for (const [name, why] of notExact) log.warn({ set: name, err: why }, 'no exact disk check for this set');
    for (const [name, error] of failures) log.warn({ set: name, err: error }, 'set does not fit on disk');
    // Where layers are unknown: the image's share of its set's compressed bytes.
    const perImage = new Map<string, number>();
    for (const set of sets) {
      const total = annotationBytes(set, COMPRESSED_BYTES_ANNOTATION);
      if (total !== undefined) for (const entry of set.spec.pinnedImages) perImage.set(entry.name, Math.ceil(total / set.spec.pinnedImages.length));
    }
    return { admitted, failures, linkBytes: linkCharges([...admitted.keys()], present, sizes, (image) => perImage.get(image)) };
  }

  /**
   * One unit whether stored or not: the image's unique layers, exact uncompressed sizes (not
   * CRI's size, which differs by runtime and storage driver); undefined when unknown.
   */
  imageBytes(image: string): number | undefined {
    return imageBytes(this.knownLayers.get(image));
  }

  /**
   * A set's bytes over its UNIQUE layers, exact uncompressed sizes (the plan's ON DISK figure):
   * all of them, and those of its images stored already. Unknown (undefined) unless every image's
   * layers are known: a partial sum would be a wrong number.
   */
  setBytes(images: readonly string[], stored: (image: string) => boolean): { bytes: number; pulledBytes: number } | undefined {
    const all = new Map<string, number>();
    const pulled = new Map<string, number>();
    for (const image of images) {
      const known = this.knownLayers.get(image);
      if (!known) return undefined;
      for (const layer of known.layers) {
        all.set(layer.digest, layer.diskBytes);
        if (stored(image)) pulled.set(layer.digest, layer.diskBytes);
      }
    }
    return { bytes: sum([...all.values()]), pulledBytes: sum([...pulled.values()]) };
  }

  private remember(sizes: ReadonlyMap<string, SizeResult>): void {
    for (const [image, result] of sizes) {
      if (hasLayers(result)) {
        this.knownLayers.set(image, result);
        this.sizesRetryAt.delete(image);
      } else {
        this.sizesRetryAt.set(image, this.now() + STATUS_SIZE_RETRY_MS);
      }
    }
  }
}

/** A byte count the set carries (default `prestage.dev/disk-bytes`, the plan's estimate of its total), when valid. */
export function annotationBytes(set: PinnedImageSet, annotation: string = DISK_BYTES_ANNOTATION): number | undefined {
  const total = Number(set.metadata.annotations?.[annotation]);
  return Number.isFinite(total) && total > 0 ? total : undefined;
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

function withMeter(meter: LedgerMeter | undefined): { meter?: LedgerMeter } {
  return meter ? { meter } : {};
}
