/**
 * `bundle push`: copy a bundle into the site's mirror registry. Per image: its blobs (HEAD
 * first; mount from another repository of the target when this run already put the blob
 * there; else upload: the file hashed whole first, then streamed from the same descriptor), then its platform
 * manifests, then the list that names them, all by digest; last, the release image's tags,
 * so the release can be read from the mirror by its tag as from the source. A second push
 * finds everything and sends nothing.
 */
import pLimit from 'p-limit';
import { BadInputError, PrestageError, RegistryError } from '../errors.js';
import { parseManifest, type Descriptor, type ImageManifest, type Manifest } from '../registry/manifest.js';
import { isRepositoryPath, isTag, parseReference } from '../registry/reference.js';
import type { PushClient } from '../registry/upload.js';
import { signedDigestOfTag } from '../signatures/sigstore.js';
import { keptPlatforms, manifestBlobs } from './content.js';
import { openVerifiedBlob, readVerifiedBlob } from './blob-files.js';
import { REF_NAME, type Bundle, type CatalogRecord } from './layout.js';
import { withCatalogs } from './catalog-push.js';
import { mirroredImage, mirrorRepository, repositoryMirrors, type MirroredImage, type MirrorTarget } from './mirror.js';
import { TransferProgress, type ProgressMode } from './progress.js';

export interface PushOptions {
  /** Blob and manifest operations at once. */
  readonly concurrency: number;
  readonly progressTo: NodeJS.WritableStream;
  readonly tty?: boolean;
  /** What progress to write (progress.ts); default: by `tty`. */
  readonly progress?: ProgressMode;
  /** Leave the bundle's sigstore attachments out (`--remove-signatures`). */
  readonly removeSignatures?: boolean;
  /**
   * A registry has no server-side dry run. `server`: the mirror is only read (HEAD) and what it
   * lacks is counted as what would be sent; `client`: no request at all, everything counts.
   */
  readonly dryRun?: 'client' | 'server';
}

export interface PushReport {
  readonly images: readonly MirroredImage[];
  readonly blobs: { uploaded: number; mounted: number; present: number };
  readonly manifests: { pushed: number; present: number };
  /** The release image by tag in the mirror (`mirror/…/ocp-release:4.16.3-x86_64`), written or found there. */
  readonly releaseTags: readonly string[];
  readonly tags: { written: number; present: number };
  /** Sigstore attachments tagged next to their images, or found tagged there. */
  readonly signatures: { written: number; present: number };
  /** The operator catalogs in the mirror: by digest (what a CatalogSource names) and by tag. */
  readonly catalogs: ReadonlyArray<{ readonly record: CatalogRecord; readonly mirror: string; readonly tagged?: string }>;
  readonly bytesUploaded: number;
  readonly seconds: number;
}

interface ManifestToPush {
  readonly digest: string;
  readonly mediaType: string;
  readonly bytes: Buffer;
  /** A list whose platform manifests the bundle holds only in part. */
  readonly partialList: boolean;
}

interface ImageToPush {
  readonly pullSpec: string;
  readonly repository: string;
  /** Platform manifests first, the manifest the pullspec names last. */
  readonly manifests: readonly ManifestToPush[];
  readonly blobs: readonly Descriptor[];
  /** A sigstore attachment's tag (`sha256-<hex>.sig`), written once its manifest is there. */
  readonly tag?: string;
  /** An operator catalog, pushed where its record says (and tagged there), never in the mirror set. */
  readonly catalog?: CatalogRecord;
}

export async function pushBundle(bundle: Bundle, client: PushClient, target: MirrorTarget, opts: PushOptions): Promise<PushReport> {
  const images = withCatalogs(await readImages(bundle, target), bundle.metadata.operators?.catalogs ?? [], target).filter((i) => !(opts.removeSignatures && i.tag !== undefined));
  // Attachments share their images' repositories: the mirror set and mapping name images only.
  // A catalog is named by digest in its CatalogSource; a rebuilt one is at no source to mirror.
  const mirrored = images.filter((i) => i.tag === undefined && i.catalog === undefined).map((i) => mirroredImage(i.pullSpec, target));
  repositoryMirrors(mirrored);
  const external = new Set(bundle.metadata.previous?.blobs.map((b) => b.digest) ?? []);
  const report = { blobs: { uploaded: 0, mounted: 0, present: 0 }, manifests: { pushed: 0, present: 0 }, signatures: { written: 0, present: 0 }, catalogTags: { written: 0, present: 0 } };
  const repositories = [...new Set(images.map((i) => i.repository))];
  // Progress counts each blob once per repository: what the push checks, mounts or sends.
  const blobBytes = new Map(images.flatMap((i) => i.blobs.map((b) => [`${i.repository}@${b.digest}`, b.size] as const)));
  const progress = new TransferProgress(opts.progressTo, { verb: opts.dryRun ? 'checked' : 'pushed', totalBytes: [...blobBytes.values()].reduce((a, b) => a + b, 0), totalImages: images.length, ...(opts.tty !== undefined ? { tty: opts.tty } : {}), ...(opts.progress !== undefined ? { mode: opts.progress } : {}) });
  const limit = pLimit(Math.max(1, opts.concurrency));
  const dryRun = opts.dryRun;
  let bytesToUpload = 0;
  let failure: { error: unknown } | undefined;
  const running = new Set<Promise<unknown>>();
  /** One registry operation per limit slot; none starts after a failure. */
  const step = <T>(fn: () => Promise<T>): Promise<T> => {
    const op = limit(() => {
      if (failure) throw failure.error;
      return fn();
    });
    running.add(op);
    void op.then(() => running.delete(op), () => running.delete(op));
    return op;
  };

  /** Digest → a repository of the target that holds the blob (or will, once its upload ends). */
  const holders = new Map<string, Promise<string | undefined>>();
  const blobTasks = new Map<string, Promise<void>>();
  const ensureBlob = async (repository: string, blob: Descriptor): Promise<void> => {
    if (dryRun !== 'client' && (await step(() => client.hasBlob(repository, blob.digest)))) {
      if (!holders.has(blob.digest)) holders.set(blob.digest, Promise.resolve(repository));
      report.blobs.present++;
      return;
    }
    const holder = holders.get(blob.digest);
    let settle: ((repo: string | undefined) => void) | undefined;
    if (!holder) holders.set(blob.digest, new Promise((resolve) => (settle = resolve)));
    try {
      const from = holder ? await holder : undefined;
      if (external.has(blob.digest)) {
        // The previous bundle's push may have put it in another repository of the target.
        for (const other of from !== undefined ? [from] : repositories.filter((r) => r !== repository)) {
          // A dry run mounts nothing: a blob this run would put there, or one the mirror has there, would mount.
          const mounts = dryRun === 'client' || (dryRun === 'server' ? from !== undefined || (await step(() => client.hasBlob(other, blob.digest))) : await step(() => client.mountBlob(repository, blob.digest, other)));
          if (mounts) {
            report.blobs.mounted++;
            settle?.(repository);
            return;
          }
        }
        throw new BadInputError(`blob ${blob.digest} comes from the previous bundle (${bundle.metadata.previous!.source}), but ${target.registry}/${repository} does not have it; push the previous bundle first`);
      }
      if (dryRun) {
        // Another repository of this run would hold it by then: a mount, else an upload.
        if (from !== undefined) report.blobs.mounted++;
        else {
          report.blobs.uploaded++;
          bytesToUpload += blob.size;
        }
        settle?.(repository);
        return;
      }
      const how = await step(async () => {
        // Hashed whole before its upload starts: no byte of a file that is not the blob is sent.
        const file = await openVerifiedBlob(bundle.dir, blob);
        try {
          return await client.uploadBlob(repository, blob, file.stream, from);
        } finally {
          await file.close();
        }
      });
      report.blobs[how]++;
      settle?.(repository);
    } catch (err) {
      settle?.(undefined);
      throw err;
    }
  };
  const blobOnce = (repository: string, blob: Descriptor): Promise<void> => {
    const key = `${repository}@${blob.digest}`;
    let task = blobTasks.get(key);
    if (!task) {
      task = ensureBlob(repository, blob).then(() => progress.addBytes(blob.size));
      blobTasks.set(key, task);
    }
    return task;
  };
  const manifestTasks = new Map<string, Promise<void>>();
  const manifestOnce = (repository: string, m: ManifestToPush): Promise<void> => {
    const key = `${repository}@${m.digest}`;
    let task = manifestTasks.get(key);
    if (!task) {
      task = (async () => {
        if (dryRun !== 'client' && (await step(() => client.hasManifest(repository, m.digest)))) {
          report.manifests.present++;
          return;
        }
        if (dryRun) {
          report.manifests.pushed++;
          return;
        }
        try {
          await step(() => client.putManifest(repository, m.digest, m.bytes, m.mediaType));
        } catch (err) {
          // Most registries refuse a list whose platform manifests they do not all have.
          if (m.partialList && err instanceof RegistryError && /MANIFEST_(BLOB_)?UNKNOWN/.test(err.message)) {
            throw new RegistryError(`${target.registry} refuses manifest list ${m.digest} without all of its platforms; create the bundle with --all-platforms`, { cause: err });
          }
          throw err;
        }
        report.manifests.pushed++;
      })();
      manifestTasks.set(key, task);
    }
    return task;
  };

  await Promise.allSettled(images.map(async (image) => {
    try {
      await Promise.all(image.blobs.map((b) => blobOnce(image.repository, b)));
      // Registries check that a manifest's blobs and a list's manifests are there.
      for (const m of image.manifests) await manifestOnce(image.repository, m);
      if (image.tag !== undefined) await step(() => putTag(client, image, image.tag!, report.signatures, dryRun));
      if (image.catalog?.tag !== undefined) await step(() => putTag(client, image, image.catalog!.tag!, report.catalogTags, dryRun));
      progress.imageDone(image.pullSpec, image.blobs.reduce((a, b) => a + b.size, 0));
    } catch (error) {
      failure ??= { error };
      throw error;
    }
  }));
  // An image fails on its first error while its other operations still run: let them end
  // before the caller closes the connections under them.
  while (running.size > 0) await Promise.allSettled([...running]);
  progress.finish();
  if (failure) throw failure.error;
  const { catalogTags, ...counts } = report;
  const tags = await pushReleaseTags(bundle, images, client, dryRun);
  const catalogs = images.filter((i) => i.catalog !== undefined).map((i) => ({
    record: i.catalog!,
    mirror: `${client.registry}/${i.repository}@${i.manifests.at(-1)!.digest}`,
    ...(i.catalog!.tag !== undefined ? { tagged: `${client.registry}/${i.repository}:${i.catalog!.tag}` } : {}),
  }));
  const allTags = { written: tags.tags.written + catalogTags.written, present: tags.tags.present + catalogTags.present };
  return { images: mirrored, ...counts, ...tags, tags: allTags, catalogs, bytesUploaded: dryRun ? bytesToUpload : client.counters.bytesUploaded, seconds: progress.elapsedSeconds() };
}

/** A tag (an attachment's, a catalog's) is written unless the mirror has it on the same manifest. */
async function putTag(client: PushClient, image: ImageToPush, tag: string, counts: { written: number; present: number }, dryRun: PushOptions['dryRun']): Promise<void> {
  const manifest = image.manifests.at(-1)!;
  if (dryRun !== 'client' && (await client.manifestDigest(image.repository, tag)) === manifest.digest) {
    counts.present++;
    return;
  }
  if (!dryRun) await client.putManifest(image.repository, manifest.digest, manifest.bytes, manifest.mediaType, tag);
  counts.written++;
}

/** Tag the release image once everything it names is in the mirror; a tag already there is left as is. */
async function pushReleaseTags(bundle: Bundle, images: readonly ImageToPush[], client: PushClient, dryRun: PushOptions['dryRun']): Promise<Pick<PushReport, 'releaseTags' | 'tags'>> {
  const { release } = bundle.metadata;
  const image = images.find((i) => i.pullSpec === release.pullSpec);
  const tags = { written: 0, present: 0 };
  if (!image) return { releaseTags: [], tags };
  const top = image.manifests.at(-1)!;
  for (const tag of release.tags ?? []) {
    // Checked when the bundle was read; again here, where the tag becomes part of a request path.
    if (!isTag(tag)) throw new BadInputError(`the bundle's release tag ${JSON.stringify(tag)} is not a tag; the bundle was altered: create it again`);
    if (dryRun !== 'client' && (await client.manifestDigest(image.repository, tag)) === top.digest) {
      tags.present++;
    } else {
      if (!dryRun) await client.putManifest(image.repository, top.digest, top.bytes, top.mediaType, tag);
      tags.written++;
    }
  }
  return { releaseTags: (release.tags ?? []).map((tag) => `${client.registry}/${image.repository}:${tag}`), tags };
}

/** The bundle's images with their manifests (read and verified) and blobs, in the mirror's terms. */
async function readImages(bundle: Bundle, target: MirrorTarget): Promise<ImageToPush[]> {
  const { metadata } = bundle;
  const images: ImageToPush[] = [];
  for (const entry of bundle.index.manifests) {
    const pullSpec = entry.annotations[REF_NAME];
    const { manifest: top, bytes } = await readManifest(bundle.dir, entry.digest, pullSpec);
    const children: ManifestToPush[] = [];
    const imageManifests: ImageManifest[] = [];
    let partialList = false;
    if (top.kind === 'image') {
      imageManifests.push(top);
    } else {
      const kept = keptPlatforms(top, metadata.architecture, metadata.allPlatforms, pullSpec);
      partialList = kept.length < top.manifests.length;
      for (const child of kept) {
        const m = await readManifest(bundle.dir, child.digest, pullSpec);
        if (m.manifest.kind !== 'image') throw new BadInputError(`${pullSpec}: platform entry ${child.digest} is itself a list`);
        children.push({ digest: child.digest, mediaType: m.manifest.mediaType, bytes: m.bytes, partialList: false });
        imageManifests.push(m.manifest);
      }
    }
    const seen = new Set<string>();
    const ref = parseReference(pullSpec);
    const repository = mirrorRepository(ref, target);
    if (!isRepositoryPath(repository)) throw new BadInputError(`${pullSpec} would be pushed to ${JSON.stringify(repository)}, which is not a repository path`);
    images.push({
      pullSpec,
      ...(signedDigestOfTag(ref.tag) !== undefined ? { tag: ref.tag } : {}),
      repository,
      manifests: [...children, { digest: entry.digest, mediaType: top.mediaType, bytes, partialList }],
      blobs: imageManifests.flatMap(manifestBlobs).filter((b) => !seen.has(b.digest) && seen.add(b.digest)),
    });
  }
  return images;
}

/** A manifest's bytes from the layout, checked against its digest, and parsed: a bundle's manifest that does not parse is bad input. */
async function readManifest(dir: string, digest: string, pullSpec: string): Promise<{ bytes: Buffer; manifest: Manifest }> {
  const bytes = await readVerifiedBlob(dir, digest, `manifest ${digest} of ${pullSpec}`);
  try {
    return { bytes, manifest: parseManifest(bytes, undefined, `${pullSpec} manifest ${digest}`) };
  } catch (err) {
    throw err instanceof PrestageError ? new BadInputError(`the bundle's ${err.message}`) : err;
  }
}
