/**
 * Pin and reload, LAST in a pass: which images the runtime pins (for CRI-O the `pinned_images`
 * drop-in and a reload), written through the runtime, which puts the previous pin list back
 * in force when the reload fails.
 */
import type { Logger } from 'pino';
import type { PinnedImageSet } from '../api/prestage.js';
import type { RuntimeImage } from '../cri/client.js';
import type { AgentMetrics } from './metrics.js';
import { oneLine } from './one-line.js';
import { imageNames, presentNames, type ImageRuntime } from './runtime.js';

/**
 * Satisfied sets pin all their images; a set repairing drift (an image removed by hand) keeps
 * what is still pinned, so one removed image never unpins its siblings. A set that failed this
 * pass (disk, its Secret) is not satisfied either.
 */
export function imagesToPin(sets: readonly PinnedImageSet[], stored: readonly RuntimeImage[], failedSets: ReadonlyMap<string, string>): Set<string> {
  const present = presentNames(stored);
  const pinnedNow = new Set(stored.filter((image) => image.pinned).flatMap(imageNames));
  const pinList = new Set<string>();
  for (const set of sets) {
    const images = set.spec.pinnedImages.map((entry) => entry.name);
    const satisfied = !failedSets.has(set.metadata.name) && images.every((image) => present.has(image));
    for (const image of images) if (satisfied || (present.has(image) && pinnedNow.has(image))) pinList.add(image);
  }
  return pinList;
}

/**
 * Makes exactly `images` the pinned ones; resolves with why not (one line) when the runtime
 * could not, the previous pins being back in force then.
 */
export async function pinImages(runtime: ImageRuntime, images: ReadonlySet<string>, log: Logger, metrics?: AgentMetrics): Promise<string | undefined> {
  try {
    await runtime.pin([...images]);
    metrics?.pinnedImages.set(images.size);
    return undefined;
  } catch (error) {
    const message = oneLine((error as Error).message);
    log.error({ err: message }, 'pinning failed');
    return message;
  }
}
