/**
 * What a bundle holds, found as it is read: every image the plan names (its manifests read and
 * verified), each manifest's sigstore attachment where the source has one, and which images
 * are complete as their parts land in the layout.
 */
import type { Plan } from '../plan/types.js';
import type { StreamPacer } from '../net/link-rate.js';
import type { RegistryClient } from '../registry/client.js';
import { bundledPullSpecs, collectImage, contentOf, type BundleContent, type BundleImage } from './content.js';
import type { TransferLanes } from './lanes.js';
import { collectSigstoreAttachment } from './signatures.js';

export interface DiscoveryOptions {
  readonly allPlatforms: boolean;
  /** Look for each manifest's sigstore attachment (`<repo>:sha256-<hex>.sig`). */
  readonly sigstore: boolean;
  /**
   * `--link-rate`: manifests are paid for once read (their size is unknown before), so the reads
   * after them wait their turn; the blobs' reads share the pacer.
   */
  readonly pacer?: StreamPacer;
}

export interface DiscoveryHooks {
  /** An image (or attachment) whose manifests were read and verified: its parts into the layout. */
  take(image: BundleImage): Promise<void>;
  /** Every manifest read: the whole content is known. */
  allRead(content: BundleContent): Promise<void>;
}

/**
 * Reads the plan's images as light work (lanes.ts), each handed on the moment its manifests
 * arrive, so the link carries blobs from the first manifest on instead of waiting for the last.
 */
export class Discovery {
  /** The images the bundle carries, by pullspec, in the plan's order. */
  readonly pullSpecs: readonly string[];
  private readonly images: BundleImage[] = [];
  /** Sigstore attachments found, in the order they were. */
  private readonly attachments: BundleImage[] = [];
  /** Image and attachment reads not yet done. */
  private reading: number;

  constructor(
    private readonly client: RegistryClient,
    private readonly plan: Plan,
    private readonly options: DiscoveryOptions,
    /** Digests looked up for attachments, and attachments found, as the metadata records them. */
    private readonly sigstore: { looked: number; found: number },
    private readonly hooks: DiscoveryHooks,
  ) {
    this.pullSpecs = bundledPullSpecs(plan);
    this.reading = this.pullSpecs.length;
  }

  /** Queue every image's read (a plan naming none is read at once). */
  async start(lanes: TransferLanes): Promise<void> {
    if (this.reading === 0) await this.allRead();
    for (const at of this.pullSpecs.keys()) lanes.add('light', 0, () => this.read(at, lanes));
  }

  private async read(at: number, lanes: TransferLanes): Promise<void> {
    const image = await collectImage(this.client, this.pullSpecs[at]!, this.plan.release.architecture, this.options.allPlatforms);
    await this.options.pacer?.pay(manifestBytes(image));
    this.images[at] = image;
    await this.hooks.take(image);
    if (this.options.sigstore) {
      // Each manifest kept has its own attachment: a list's and each platform's.
      this.reading += image.manifests.length;
      this.sigstore.looked += image.manifests.length;
      for (const manifest of image.manifests) lanes.add('light', 0, () => this.readAttachment(image, manifest.digest));
    }
    await this.done();
  }

  /** The attachment signing one of an image's manifests, if the source has one. */
  private async readAttachment(image: BundleImage, digest: string): Promise<void> {
    const attachment = await collectSigstoreAttachment(this.client, image.ref, digest);
    if (attachment) await this.options.pacer?.pay(manifestBytes(attachment));
    if (attachment) {
      this.attachments.push(attachment);
      await this.hooks.take(attachment);
    }
    await this.done();
  }

  private async done(): Promise<void> {
    if (--this.reading === 0) await this.allRead();
  }

  private async allRead(): Promise<void> {
    this.sigstore.found = this.attachments.length;
    // Attachments arrive in any order; the index lists them sorted, the same on every run.
    await this.hooks.allRead(contentOf([...this.images, ...this.attachments.sort((x, y) => (x.pullSpec < y.pullSpec ? -1 : 1))]));
  }
}

/** An image complete, and whether anything of its was written in this run. */
export interface CompleteImage {
  readonly image: BundleImage;
  readonly fetchedAny: boolean;
}

/**
 * Which images are complete as their manifests and blobs settle (stored, fetched, or found
 * held), in any order: an image's parts may settle before its own manifests were read.
 */
export class ImageTracker {
  private readonly waiting = new Map<BundleImage, { pending: Set<string>; fetchedAny: boolean }>();
  private readonly imagesOf = new Map<string, BundleImage[]>();
  /** Parts settled so far: whether each was written in this run. */
  private readonly done = new Map<string, boolean>();

  /**
   * An image whose manifests were read; its parts are the digests the layout holds for it.
   * Returned at once if complete already (other images brought all of its parts).
   */
  add(image: BundleImage, parts: readonly string[]): CompleteImage | undefined {
    const pending = new Set(parts.filter((d) => !this.done.has(d)));
    const fetchedAny = parts.some((d) => this.done.get(d) === true);
    if (pending.size === 0) return { image, fetchedAny };
    this.waiting.set(image, { pending, fetchedAny });
    for (const digest of pending) this.imagesOf.set(digest, [...(this.imagesOf.get(digest) ?? []), image]);
    return undefined;
  }

  /** A part settled; the images it completed, and whether anything of theirs was written in this run. */
  settled(digest: string, fetched: boolean): CompleteImage[] {
    this.done.set(digest, fetched);
    const complete: CompleteImage[] = [];
    for (const image of this.imagesOf.get(digest) ?? []) {
      const state = this.waiting.get(image)!;
      state.pending.delete(digest);
      state.fetchedAny ||= fetched;
      if (state.pending.size === 0) {
        this.waiting.delete(image);
        complete.push({ image, fetchedAny: state.fetchedAny });
      }
    }
    this.imagesOf.delete(digest);
    return complete;
  }
}

/** Bytes an image's manifests, configs and layers take. */
function manifestBytes(image: BundleImage): number {
  return image.manifests.reduce((total, manifest) => total + manifest.bytes.length, 0);
}

export function imageBytes(image: BundleImage): number {
  return image.manifests.reduce((a, m) => a + m.bytes.length, 0) + image.blobs.reduce((a, b) => a + b.size, 0);
}
