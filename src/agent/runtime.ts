/**
 * What the node agent needs from a container runtime, whatever the runtime: pull by digest,
 * list what is stored (and whether it is pinned), report the image filesystem, and pin a set
 * of images so the kubelet's garbage collection keeps them. CRI-O implements it with CRI plus
 * a `pinned_images` drop-in; a containerd implementation would label images instead.
 */
import type { PullAuth, RuntimeImage } from '../cri/client.js';

export interface ImageFilesystem {
  readonly mountpoint: string;
  readonly capacityBytes: number;
  readonly freeBytes: number;
}

export interface RuntimePullOptions {
  readonly auth?: PullAuth;
  readonly timeoutMs?: number;
  /** Stops the pull (a strict staging window closed): the runtime's call is cancelled. */
  readonly signal?: AbortSignal;
}

export interface ImageRuntime {
  /** Every stored image with its names and pinned flag: the agent's only source of truth. */
  listImages(): Promise<RuntimeImage[]>;
  pull(image: string, options?: RuntimePullOptions): Promise<void>;
  imageFilesystem(): Promise<ImageFilesystem>;
  /**
   * Make exactly `images` the pinned ones (an empty list unpins all). Changes nothing when
   * already so; on failure the previous pin configuration is back in force.
   */
  pin(images: readonly string[]): Promise<void>;
  close(): void;
}

/** The names a stored image answers to: digest pullspecs and tags. */
export function imageNames(image: RuntimeImage): string[] {
  return [...image.repoDigests, ...image.repoTags];
}

/** Every name the stored images answer to. */
export function presentNames(stored: readonly RuntimeImage[]): Set<string> {
  return new Set(stored.flatMap(imageNames));
}
