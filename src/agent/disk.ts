/**
 * The node agent's disk check, pure: which missing images may be pulled, set by set in name
 * order, so that pre-loading leaves the reserve free. A set needs the uncompressed sizes of the
 * UNIQUE layers of its missing images, less the layers already on the node (layers of stored
 * images of any selecting set) and those admitted for earlier sets. Where some image's layers
 * are unknown, the set falls back to its `prestage.dev/disk-bytes` annotation and says so.
 */
import { DISK_BYTES_ANNOTATION } from '../api/set-metadata.js';
import { hasLayers, type SizedLayer, type SizeResult } from './image-sizes.js';
import { count, plural } from '../plural.js';

export interface DiskCheckSet {
  readonly name: string;
  readonly images: readonly string[];
  /** The set's `prestage.dev/disk-bytes` annotation (the plan's total), when valid. */
  readonly annotationBytes?: number;
}

export interface DiskCheckInput {
  /** The selecting sets, in the order they are admitted (name order). */
  readonly sets: readonly DiskCheckSet[];
  /** Names of the images stored on the node. */
  readonly present: ReadonlySet<string>;
  /** Layers (or why not) of the missing images and of the stored images of the sets. */
  readonly sizes: ReadonlyMap<string, SizeResult>;
  readonly freeBytes: number;
  readonly reserveBytes: number;
}

export interface DiskCheckResult {
  /** Image to pull → its size for the pull timeout (undefined: unknown). */
  readonly admitted: Map<string, number | undefined>;
  /** Set → one-line reason it does not fit; nothing of it is admitted. */
  readonly failures: Map<string, string>;
  /** Set → why its check was not exact (to log): the annotation was used, or no check at all. */
  readonly notExact: Map<string, string>;
}

const MAX_REASON = 300;

export function checkDisk({ sets, present, sizes, freeBytes, reserveBytes }: DiskCheckInput): DiskCheckResult {
  const admitted = new Map<string, number | undefined>();
  const failures = new Map<string, string>();
  const notExact = new Map<string, string>();
  let available = freeBytes - reserveBytes;

  // Layers on the node already: those of stored images any selecting set names.
  const counted = new Set<string>();
  for (const image of new Set(sets.flatMap((set) => set.images))) {
    const known = sizes.get(image);
    if (present.has(image) && hasLayers(known)) for (const layer of known.layers) counted.add(layer.digest);
  }

  for (const set of sets) {
    const missing = [...new Set(set.images)].filter((image) => !present.has(image) && !admitted.has(image));
    if (missing.length === 0) continue;
    const unknown = missing.filter((image) => !hasLayers(sizes.get(image)));
    let needed: number;
    let detail: string;
    const newLayers = new Map<string, SizedLayer>();
    if (unknown.length === 0) {
      for (const image of missing) {
        for (const layer of (sizes.get(image) as { layers: readonly SizedLayer[] }).layers) if (!counted.has(layer.digest)) newLayers.set(layer.digest, layer);
      }
      needed = sum([...newLayers.values()].map((layer) => layer.diskBytes));
      const estimated = [...newLayers.values()].filter((layer) => !layer.exact).length;
      detail = estimated === 0 ? `(exact, ${count(newLayers.size, 'layer')})` : `(${count(newLayers.size, 'layer')}, ${estimated} of them estimated as 2x compressed)`;
    } else {
      const first = unknown[0] as string;
      const result = sizes.get(first);
      const why = `exact sizes unknown for ${unknown.length === 1 ? first : `${count(unknown.length, 'image')}, e.g. ${first}`}: ${result && !hasLayers(result) ? result.error : 'not looked up'}`;
      const reason = why.length > MAX_REASON ? `${why.slice(0, MAX_REASON - 1)}…` : why;
      if (set.annotationBytes === undefined) {
        notExact.set(set.name, `pulled without a disk check: ${reason}, and no ${DISK_BYTES_ANNOTATION} annotation`);
        for (const image of missing) admitted.set(image, imageBytes(sizes.get(image)));
        continue;
      }
      const perImage = Math.ceil(set.annotationBytes / Math.max(set.images.length, 1));
      needed = perImage * missing.length;
      detail = `(estimated from the ${DISK_BYTES_ANNOTATION} annotation; ${reason})`;
      notExact.set(set.name, `disk check estimated from the ${DISK_BYTES_ANNOTATION} annotation: ${reason}`);
    }
    if (needed > available) {
      failures.set(
        set.name,
        `not enough disk: ${count(missing.length, 'image')} ${plural(missing.length, 'needs', 'need')} ${needed} bytes ${detail}, ${Math.max(available, 0)} free after the ${reserveBytes}-byte reserve and earlier sets; nothing pulled`,
      );
      continue;
    }
    available -= needed;
    for (const digest of newLayers.keys()) counted.add(digest);
    const fallback = set.annotationBytes === undefined ? undefined : Math.ceil(set.annotationBytes / Math.max(set.images.length, 1));
    for (const image of missing) admitted.set(image, imageBytes(sizes.get(image)) ?? fallback);
  }
  return { admitted, failures, notExact };
}

/** Everything an image's pull may write: all its unique layers (the pull timeout's basis). */
export function imageBytes(result: SizeResult | undefined): number | undefined {
  if (!hasLayers(result)) return undefined;
  return sum([...new Map(result.layers.map((layer) => [layer.digest, layer.diskBytes])).values()]);
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}
