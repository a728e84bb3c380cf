/**
 * What a bundle holds for a plan: for every planned image (the release image included) its
 * manifest bytes exactly as the registry served them, so digests survive the trip; for a
 * manifest list the list and the platform manifests kept; and each config and layer those
 * manifests name, once.
 */
import { BadInputError, RegistryError } from '../errors.js';
import type { RegistryClient } from '../registry/client.js';
import { listArchitectures, normaliseArch, selectPlatform, type Descriptor, type ImageManifest, type Manifest, type ManifestList } from '../registry/manifest.js';
import { parseReference, type ImageReference } from '../registry/reference.js';
import type { Plan } from '../plan/types.js';

export interface BundleManifest {
  readonly digest: string;
  readonly mediaType: string;
  readonly bytes: Buffer;
}

export interface BundleImage {
  /** The source pullspec by digest: the image's name in index.json and in the mirror mapping. */
  readonly pullSpec: string;
  readonly ref: ImageReference;
  /** The manifest the pullspec names first, then the platform manifests kept of a list. */
  readonly manifests: readonly BundleManifest[];
  /** Configs and layers of the image manifests, each once, in manifest order. */
  readonly blobs: readonly Descriptor[];
  /** A sigstore attachment (pullSpec `<repo>:sha256-<hex>.sig`): the image digest it signs. */
  readonly signs?: string;
}

export interface BundleContent {
  readonly images: readonly BundleImage[];
  /** Every config and layer once, in first-use order, with an image to fetch it through. */
  readonly blobs: ReadonlyMap<string, { readonly descriptor: Descriptor; readonly from: ImageReference }>;
}

/** The platform manifests of a list that a bundle keeps: the planned architecture's, or all. */
export function keptPlatforms(list: ManifestList, arch: string, allPlatforms: boolean, where: string): Descriptor[] {
  if (allPlatforms) return [...list.manifests];
  const entry = selectPlatform(list, arch);
  if (!entry) throw new BadInputError(`${where} has no linux/${normaliseArch(arch)} image (it has ${listArchitectures(list).join(', ') || 'no platforms'}); plan for one of those with --arch`);
  return [entry];
}

/** Configs and layers an image manifest names. */
export function manifestBlobs(manifest: ImageManifest): Descriptor[] {
  return [manifest.config, ...manifest.layers];
}

/**
 * The images a bundle carries, by pullspec. The mirror serves the whole release: images the
 * nodes never pin (skipped by the plan: other platforms, disabled capabilities, tools such as
 * must-gather) are pulled by digest from it all the same, so they travel too. Plans written
 * before skipped[] existed have none.
 */
export function bundledPullSpecs(plan: Plan): string[] {
  return [...plan.images, ...(plan.skipped ?? [])].map((image) => image.pullSpec);
}

/** Every config and layer of `images` once, in first-use order, with an image to fetch it through. */
export function contentOf(images: readonly BundleImage[]): BundleContent {
  const blobs = new Map<string, { descriptor: Descriptor; from: ImageReference }>();
  for (const image of images) {
    for (const descriptor of image.blobs) if (!blobs.has(descriptor.digest)) blobs.set(descriptor.digest, { descriptor, from: image.ref });
  }
  return { images, blobs };
}

/** One image's manifests (a list and the platform manifests kept of it), verified, and the blobs they name. */
export async function collectImage(client: RegistryClient, pullSpec: string, arch: string, allPlatforms: boolean): Promise<BundleImage> {
  const ref = parseReference(pullSpec);
  if (!ref.digest) throw new BadInputError(`plan image ${pullSpec} is not a digest pullspec; plan files name images by digest`);
  const top = await client.fetchManifest(ref);
  const manifests: BundleManifest[] = [toBundleManifest(top)];
  const imageManifests: ImageManifest[] = [];
  if (top.manifest.kind === 'image') {
    imageManifests.push(top.manifest);
  } else {
    for (const entry of keptPlatforms(top.manifest, arch, allPlatforms, pullSpec)) {
      const child = await client.fetchManifest(ref, entry.digest);
      if (child.manifest.kind !== 'image') throw new RegistryError(`${pullSpec}: platform entry ${entry.digest} is itself a list; nested lists are not supported`);
      manifests.push(toBundleManifest(child));
      imageManifests.push(child.manifest);
    }
  }
  const seen = new Set<string>();
  const blobs = imageManifests.flatMap(manifestBlobs).filter((d) => !seen.has(d.digest) && seen.add(d.digest));
  return { pullSpec, ref, manifests, blobs };
}

function toBundleManifest(fetched: { digest: string; bytes: Buffer; manifest: Manifest }): BundleManifest {
  return { digest: fetched.digest, mediaType: fetched.manifest.mediaType, bytes: fetched.bytes };
}
