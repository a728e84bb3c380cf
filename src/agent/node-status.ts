/**
 * The node's NodePinnedImages status, pure: per set and per image from what the runtime stores,
 * the pull history and what failed this pass; the Ready, Progressing and Degraded conditions.
 */
import { DIGEST_PULLSPEC_PATTERN, isSetDone, MAX_HELD_IMAGES, type Condition, type ImageStatus, type NodePinnedImagesStatus, type PinnedImageSet, type PinnedImageSetStatus } from '../api/prestage.js';
import type { RuntimeImage } from '../cri/client.js';
import { imageNames } from './runtime.js';
import { count } from '../plural.js';

/** What the status says of an image's pulls (the pull executor's record). */
export interface PullHistory {
  readonly attempts: number;
  readonly lastError?: string;
  readonly pulling: boolean;
}

export interface StatusInput {
  readonly sets: readonly PinnedImageSet[];
  readonly stored: readonly RuntimeImage[];
  readonly filesystem: { readonly capacityBytes: number; readonly freeBytes: number };
  /** The space pre-loading leaves free (`--reserve`), reported beside the filesystem for preflight. */
  readonly reserveBytes?: number;
  /** The status as last written: the generations current before, the conditions' transition times. */
  readonly previous: NodePinnedImagesStatus | undefined;
  /** After this pass pinned: a pulled image that is not pinned now means the reload did not take. */
  readonly afterPin: boolean;
  /** Set failures of the current pass that are not per-image (disk, pinning, its Secret). */
  readonly setErrors: ReadonlyMap<string, string>;
  readonly history: (image: string) => PullHistory | undefined;
  /** An image's exact bytes over its unique layers; undefined when unknown. */
  readonly imageBytes: (image: string) => number | undefined;
  /** A set's bytes over its unique layers, and those stored; undefined unless all are known. */
  readonly setBytes: (images: readonly string[], stored: (image: string) => boolean) => { bytes: number; pulledBytes: number } | undefined;
  /** Set → why its missing images wait (paused, outside a window). */
  readonly waiting?: ReadonlyMap<string, string>;
  /** The link as this agent used it. */
  readonly link?: NodePinnedImagesStatus['link'];
  /** Where cached images come from (the cache tree's leaf, the root). */
  readonly cache?: NodePinnedImagesStatus['cache'];
}

export function buildStatus({ sets, stored, filesystem, reserveBytes, previous, afterPin, setErrors, history, imageBytes, setBytes, waiting, link, cache }: StatusInput): NodePinnedImagesStatus {
  const byName = new Map<string, RuntimeImage>();
  for (const image of stored) for (const name of imageNames(image)) byName.set(name, image);
  const previousSets = new Map((previous?.pinnedImageSets ?? []).map((set) => [set.name, set]));

  const setStatuses = sets.map((set): PinnedImageSetStatus => {
    const generation = set.metadata.generation ?? 1;
    const setError = setErrors.get(set.metadata.name);
    const images = set.spec.pinnedImages.map(({ name }): ImageStatus => {
      const record = history(name);
      const image = byName.get(name);
      const status: ImageStatus = { name, state: 'Pending', attempts: record?.attempts ?? 0 };
      // One unit whether stored or not: the image's unique layers, exact uncompressed sizes
      // (not CRI's size, which differs by runtime and storage driver); none when unknown.
      const bytes = imageBytes(name);
      if (bytes !== undefined) status.bytes = bytes;
      if (image) {
        if (bytes !== undefined) status.pulledBytes = bytes;
        status.state = image.pinned ? 'Pinned' : 'Pulled';
      } else {
        if (record?.pulling) status.state = 'Pulling';
        else if (record?.lastError) status.state = 'Failed';
      }
      if (record?.lastError && status.state !== 'Pinned' && status.state !== 'Pulled') status.lastError = record.lastError;
      return status;
    });
    // Status is per set object: one deleted and created again under its name starts over.
    const before = [previousSets.get(set.metadata.name)].find((entry) => entry && entry.uid === set.metadata.uid);
    const bytes = setBytes(
      images.map((image) => image.name),
      (image) => byName.has(image),
    );
    const result: PinnedImageSetStatus = { name: set.metadata.name, ...(set.metadata.uid ? { uid: set.metadata.uid } : {}), desiredGeneration: generation, ...bytes, images };
    // An earlier generation stays current while a newer one is pulled; the desired one counts
    // only while every image is pinned (below), so an image removed by hand makes it not ready.
    if (before?.currentGeneration && before.currentGeneration < generation) result.currentGeneration = before.currentGeneration;
    const failure =
      setError ??
      // An image whose last attempt failed fails the set while it is retried too (as MCO's
      // degraded-while-retrying): the failure stays visible from the first failed attempt until
      // one succeeds, instead of flipping back to progressing with every retry.
      firstFailure(images, (image) => image.lastError !== undefined && `image ${image.name}: ${image.lastError}`) ??
      // Pulled but CRI does not report the pin: the reload did not take.
      (afterPin && images.every((image) => image.state === 'Pulled' || image.state === 'Pinned')
        ? firstFailure(images, (image) => image.state === 'Pulled' && `image ${image.name} is not pinned after reloading the runtime`)
        : undefined);
    const allPinned = images.every((image) => image.state === 'Pinned');
    const why = waiting?.get(set.metadata.name);
    if (why && !allPinned) result.waiting = why;
    if (allPinned && !setError) {
      result.currentGeneration = generation;
    } else if (failure) {
      result.lastFailedGeneration = generation;
      result.lastFailedGenerationError = failure.slice(0, 32_768);
    }
    return result;
  });

  const done = setStatuses.filter(isSetDone).length;
  const failed = setStatuses.filter(isSetFailed);
  const progressing = setStatuses.length - done - failed.length;
  const conditions = [
    condition('Ready', done === setStatuses.length, done === setStatuses.length ? 'AllSetsPinned' : 'SetsPending', `${done}/${setStatuses.length} sets pulled and pinned`),
    condition('Progressing', progressing > 0, progressing > 0 ? 'ImagePrefetch' : 'Idle', `${count(progressing, 'set')} in progress`),
    condition('Degraded', failed.length > 0, failed.length > 0 ? 'PrefetchFailed' : 'AsExpected', failed.map((set) => `${set.name}: ${set.lastFailedGenerationError}`).join('; ')),
  ].map((next) => keepTransitionTime(next, previous?.conditions));
  return {
    conditions,
    pinnedImageSets: setStatuses,
    imageFilesystem: { capacityBytes: filesystem.capacityBytes, freeBytes: filesystem.freeBytes, ...(reserveBytes !== undefined ? { reserveBytes } : {}) },
    held: heldImages(stored),
    ...(link ? { link } : {}),
    ...(cache ? { cache } : {}),
  };
}

/** The CRD's pattern for a held image: a name it would refuse would refuse the whole status write. */
const DIGEST_PULLSPEC = new RegExp(DIGEST_PULLSPEC_PATTERN);

/** What the runtime stores, one digest pullspec per image, sorted and bounded (`status.held`). */
export function heldImages(stored: readonly RuntimeImage[]): { count: number; images: string[] } {
  const named = stored.flatMap((image) => image.repoDigests.filter((name) => DIGEST_PULLSPEC.test(name) && name.length <= 447).slice(0, 1));
  return { count: stored.length, images: [...new Set(named)].sort().slice(0, MAX_HELD_IMAGES) };
}

/** The set's last attempt, at its desired generation, failed. */
export function isSetFailed(set: PinnedImageSetStatus): boolean {
  return set.lastFailedGeneration === set.desiredGeneration;
}

/** Set → `generation error` of each set failed at its desired generation: what an Event announces. */
export function failuresOf(status: NodePinnedImagesStatus | undefined): Map<string, string> {
  const failed = (status?.pinnedImageSets ?? []).filter((set) => set.lastFailedGeneration !== undefined && set.lastFailedGeneration === set.desiredGeneration);
  return new Map(failed.map((set) => [set.name, `${set.desiredGeneration} ${set.lastFailedGenerationError}`]));
}

function firstFailure(images: readonly ImageStatus[], describe: (image: ImageStatus) => string | false): string | undefined {
  for (const image of images) {
    const text = describe(image);
    if (text) return text;
  }
  return undefined;
}

function condition(type: Condition['type'], value: boolean, reason: string, message: string): Condition {
  return { type, status: value ? 'True' : 'False', reason, message, lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') };
}

/** metav1.Condition semantics: the transition time moves only when the status does. */
function keepTransitionTime(next: Condition, previous: readonly Condition[] | undefined): Condition {
  const before = previous?.find((candidate) => candidate.type === next.type);
  return before && before.status === next.status ? { ...next, lastTransitionTime: before.lastTransitionTime } : next;
}
