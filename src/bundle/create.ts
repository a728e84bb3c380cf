/**
 * `bundle create`: write everything a plan needs into an OCI layout, each blob once, each
 * digest verified as written. Resumable: blobs kept from an earlier run are re-hashed (a
 * damaged one is fetched again), partial ones continue with a Range request from their last
 * byte. A directory holding another release's bundle is left alone unless forced.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, renameSync, writeFileSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import pLimit from 'p-limit';
import { writeFileAtomic } from '../atomic-file.js';
import { BadInputError, DigestMismatchError } from '../errors.js';
import { PLAN_API_VERSION, type Plan } from '../plan/types.js';
import { RangesRefused, sha256, type RegistryClient } from '../registry/client.js';
import { MediaType, type Descriptor } from '../registry/manifest.js';
import { formatReference, type ImageReference } from '../registry/reference.js';
import { bundledPullSpecs, collectImage, contentOf, type BundleContent, type BundleImage, type BundleManifest } from './content.js';
import { freeSpaceCheck, type StatFs } from './disk-space.js';
import { planBlobSizes } from './inputs.js';
import { TransferLanes } from './lanes.js';
import {
  BLOBS_DIR, BUNDLE_FILE, INDEX_FILE, OCI_LAYOUT, OCI_LAYOUT_FILE, PARTIAL_DIR, REF_NAME,
  blobFileName, blobPath, partialPath, type BundleBlobRef, type BundleMetadata, type BundleSignatures, type LayoutIndex, type ReleaseSignatureRecord,
} from './layout.js';
import { TransferProgress } from './progress.js';
import type { GatheredSignatures } from '../signatures/gather.js';
import { collectSigstoreAttachment } from './signatures.js';
import { hashBlobs } from './verify.js';

export interface PreviousBundle {
  /** What `--since` named, recorded in the bundle. */
  readonly source: string;
  /** Configs and layers it carries, by digest. */
  readonly blobs: ReadonlySet<string>;
}

export interface CreateOptions {
  readonly dir: string;
  /** Replace a bundle of another release (or a layout prestage did not write) in `dir`. */
  readonly force: boolean;
  /** The tag the release was named by, if any; pushed with the release's conventional tag. */
  readonly releaseTag?: string;
  readonly allPlatforms: boolean;
  readonly previous?: PreviousBundle;
  /** Connections at once for manifests and blobs (a big blob in Range parts takes one per part). */
  readonly concurrency: number;
  /** Bytes to reserve beyond the layout, given its size (the tar parts of `--max-archive-size`). */
  readonly extraBytes?: (layout: { bytes: number; files: number }) => number;
  readonly progressTo: NodeJS.WritableStream;
  readonly tty?: boolean;
  readonly statFs?: StatFs;
  /** Copy each image's sigstore attachment (`<repo>:sha256-<hex>.sig`) where the source has one. */
  readonly sigstore: boolean;
  /** The release's GPG signatures, gathered and verified before (signatures/gather.ts). */
  readonly releaseSignatures?: GatheredSignatures;
}

export interface CreateReport {
  readonly images: number;
  /** Manifests, configs and layers the layout holds. */
  readonly blobs: number;
  readonly bytes: number;
  /** Blob bytes fetched in this run (resumed blobs count only their rest). */
  readonly fetchedBytes: number;
  readonly fetchedBlobs: number;
  readonly resumedBlobs: number;
  /** Blobs kept from an earlier run that no longer matched their digest, fetched again. */
  readonly repairedBlobs: number;
  readonly previousBlobs: number;
  readonly seconds: number;
  readonly signatures: BundleSignatures;
}

interface BlobTask {
  readonly descriptor: Descriptor;
  readonly from: ImageReference;
  /** Bytes already in `.partial/` from an earlier run. */
  readonly partialBytes: number;
}

/**
 * Manifests and blobs are read side by side: each image's manifests are read as light work
 * (lanes.ts), and queue the blobs they name the moment they arrive, so the link carries blobs
 * from the first manifest on instead of waiting for the last.
 */
export async function createBundle(client: RegistryClient, plan: Plan, opts: CreateOptions): Promise<CreateReport> {
  const { dir } = opts;
  if (!opts.force) await refuseOtherContent(dir, plan);
  await mkdir(join(dir, BLOBS_DIR), { recursive: true });
  await mkdir(join(dir, PARTIAL_DIR), { recursive: true });
  // What earlier runs left: files in blobs/ (each re-hashed before it is kept: a file of the
  // right size can still be damaged, and push and verify send users here to repair it) and
  // partial downloads, continued where they stopped.
  const onDisk = await fileSizes(join(dir, BLOBS_DIR));
  const partial = await fileSizes(join(dir, PARTIAL_DIR));
  // The release's signatures are small: into the layout first (after the look at what earlier
  // runs left, which they are not), named by digest like any blob.
  const release = opts.releaseSignatures ? storeReleaseSignatures(dir, opts.releaseSignatures) : undefined;
  const signatures = { ...(release ? { release: release.record } : {}), sigstore: { copied: opts.sigstore, looked: 0, found: 0 } };
  // Written before any blob, so an interrupted run still says whose bundle this is; again with
  // the previous bundle's blobs it relies on once every manifest is read.
  await writeMetadata(dir, plan, opts, [], signatures);
  if (onDisk.size > 0) opts.progressTo.write(`checking the ${onDisk.size} blobs an earlier run left as their images are read\n`);
  const external = (digest: string): boolean => opts.previous?.blobs.has(digest) === true;
  /** Bytes a blob still needs on disk: none if held, or left to the previous bundle. */
  const missingBytes = (digest: string, size: number): number => {
    if (external(digest) || onDisk.get(blobFileName(digest)) === size) return 0;
    const held = partial.get(blobFileName(digest)) ?? 0;
    return held <= size ? size - held : size;
  };
  const fits = await freeSpaceCheck(dir, 'or choose another --to', opts.statFs);
  // Before any read, the configs and layers the plan names must fit; everything else (the
  // manifests, images only the mirror serves) once every manifest is read.
  fits([...planBlobSizes(plan)].reduce((a, [digest, size]) => a + missingBytes(digest, size), 0));
  await writeFileAtomic(join(dir, OCI_LAYOUT_FILE), `${JSON.stringify(OCI_LAYOUT)}\n`, join(dir, PARTIAL_DIR));

  const pullSpecs = bundledPullSpecs(plan);
  const images: BundleImage[] = [];
  /** Sigstore attachments found, in the order they were. */
  const attachments: BundleImage[] = [];
  /** Once every manifest is read: the content, the files the layout holds, and its index.json. */
  let collected: { content: BundleContent; layout: LayoutFile[]; index: string } | undefined;
  let collecting = pullSpecs.length;
  const progress = new TransferProgress(opts.progressTo, { verb: 'bundled', totalBytes: 0, totalImages: pullSpecs.length, ...(opts.tty !== undefined ? { tty: opts.tty } : {}) });
  const tracker = new ImageTracker();
  const report = { fetchedBytes: 0, fetchedBlobs: 0, resumedBlobs: 0, repairedBlobs: 0 };
  /** Manifests and blobs already taken care of (stored, queued, or left to the previous bundle). */
  const seen = new Set<string>();
  // Blobs are renamed into blobs/ as they verify; none waits for its fsync (that would stall
  // the link): big ones are synced behind the transfer, small ones together at the end. A blob
  // a crash left short is re-hashed and fetched again on the rerun like any damaged one.
  const written = new SyncBehind();
  for (const file of release?.files ?? []) written.add(blobPath(dir, file.digest), file.size);
  /** Registries that answered a Range request with a whole blob: big blobs from them in one stream. */
  const rangesRefused = new Set<string>();
  const lanes = new TransferLanes(opts.concurrency, bulkSlots(opts.concurrency));

  const complete = ({ image, fetchedAny }: { image: BundleImage; fetchedAny: boolean }): void => {
    if (image.signs !== undefined) return;
    if (fetchedAny) progress.imageDone(image.pullSpec, imageBytes(image));
    else progress.imageKept();
  };
  const settled = (digest: string, fetched: boolean): void => tracker.settled(digest, fetched).forEach(complete);

  /** A manifest (read and verified): kept if the file from an earlier run holds its bytes, else written. */
  const storeManifest = async (manifest: BundleManifest): Promise<void> => {
    if (onDisk.has(blobFileName(manifest.digest))) {
      if (onDisk.get(blobFileName(manifest.digest)) === manifest.bytes.length && (await readFile(blobPath(dir, manifest.digest))).equals(manifest.bytes)) {
        return settled(manifest.digest, false);
      }
      report.repairedBlobs++;
    }
    written.add(storeBlob(dir, manifest.digest, manifest.bytes), manifest.bytes.length);
    settled(manifest.digest, true);
  };

  /** A config or layer: kept if the file from an earlier run hashes to it, else fetched (a partial one continued). */
  const transferBlob = async (descriptor: Descriptor, from: ImageReference, signal: AbortSignal, connections: number): Promise<void> => {
    const name = blobFileName(descriptor.digest);
    if (onDisk.has(name)) {
      if (onDisk.get(name) === descriptor.size && (await hashBlobs(dir, [descriptor.digest])).verified.has(descriptor.digest)) {
        return settled(descriptor.digest, false);
      }
      report.repairedBlobs++;
      await rm(blobPath(dir, descriptor.digest), { force: true });
    }
    const task: BlobTask = { descriptor, from, partialBytes: await usablePartialBytes(dir, descriptor, partial.get(name) ?? 0) };
    report.fetchedBlobs++;
    if (task.partialBytes > 0) report.resumedBlobs++;
    progress.addTotal(descriptor.size);
    progress.addBytes(task.partialBytes);
    written.add(await fetchBlob(client, dir, task, signal, (n) => {
      report.fetchedBytes += n;
      progress.addBytes(n);
    }, rangesRefused, connections), descriptor.size);
    settled(descriptor.digest, true);
  };

  /** Every manifest read: the whole content is known; check it fits, and record it. */
  const allCollected = async (): Promise<void> => {
    // Attachments arrive in any order; the index lists them sorted, the same on every run.
    const content = contentOf([...images, ...attachments.sort((x, y) => (x.pullSpec < y.pullSpec ? -1 : 1))]);
    const layout = [...layoutFiles(content, external), ...(release?.files ?? [])];
    collected = { content, layout, index: `${JSON.stringify(layoutIndex(content), null, 2)}\n` };
    fits(layout.reduce((a, f) => a + missingBytes(f.digest, f.size), 0) + (opts.extraBytes?.({ bytes: sizeOf(layout), files: layout.length }) ?? 0));
    signatures.sigstore.found = attachments.length;
    await writeMetadata(dir, plan, opts, [...content.blobs.values()].map((b) => b.descriptor).filter((d) => external(d.digest)), signatures);
    // A layout with an index is complete: an index for other content goes until this run ends.
    if ((await readFile(join(dir, INDEX_FILE), 'utf8').catch(() => undefined)) !== collected.index) await rm(join(dir, INDEX_FILE), { force: true });
  };

  /** Manifests, configs and layers of an image (or attachment) into the layout. */
  const take = async (image: BundleImage): Promise<void> => {
    const already = tracker.add(image, [...image.manifests, ...image.blobs].map((d) => d.digest).filter((d) => !external(d)));
    if (already) complete(already);
    for (const manifest of image.manifests) {
      if (seen.has(manifest.digest)) continue;
      seen.add(manifest.digest);
      await storeManifest(manifest);
    }
    for (const descriptor of image.blobs) {
      if (seen.has(descriptor.digest) || external(descriptor.digest)) continue;
      seen.add(descriptor.digest);
      lanes.add(descriptor.size > IN_MEMORY_BLOB ? 'bulk' : 'light', descriptor.size, (signal, connections) => transferBlob(descriptor, image.ref, signal, connections), rangeParts(descriptor.size));
    }
  };
  /** The attachment signing one of an image's manifests, if the source has one. */
  const collectAttachment = async (image: BundleImage, digest: string): Promise<void> => {
    const attachment = await collectSigstoreAttachment(client, image.ref, digest);
    if (attachment) {
      attachments.push(attachment);
      await take(attachment);
    }
    if (--collecting === 0) await allCollected();
  };
  const collect = async (at: number): Promise<void> => {
    const image = await collectImage(client, pullSpecs[at]!, plan.release.architecture, opts.allPlatforms);
    images[at] = image;
    await take(image);
    if (opts.sigstore) {
      // Each manifest kept has its own attachment: a list's and each platform's.
      collecting += image.manifests.length;
      signatures.sigstore.looked += image.manifests.length;
      for (const manifest of image.manifests) lanes.add('light', 0, () => collectAttachment(image, manifest.digest));
    }
    if (--collecting === 0) await allCollected();
  };

  if (collecting === 0) await allCollected();
  for (const at of pullSpecs.keys()) lanes.add('light', 0, () => collect(at));
  try {
    await lanes.drained();
  } finally {
    progress.finish();
    await written.settled();
  }
  if (!collected) throw new Error('bundle create: the transfers ended before every manifest was read');
  const { content, layout, index } = collected;
  // The layout holds this plan's content only: drop what an earlier run for other content left.
  const wanted = new Set(layout.map((f) => blobFileName(f.digest)));
  for (const name of onDisk.keys()) if (!wanted.has(name)) await rm(join(dir, BLOBS_DIR, name), { force: true });
  await written.finish();
  await syncDir(join(dir, BLOBS_DIR));

  await writeFileAtomic(join(dir, INDEX_FILE), index, join(dir, PARTIAL_DIR));
  // Everything in .partial/ was either renamed into blobs/ or is a leftover temp file.
  await rm(join(dir, PARTIAL_DIR), { recursive: true, force: true });

  return {
    images: content.images.filter((i) => i.signs === undefined).length,
    blobs: layout.length,
    bytes: sizeOf(layout),
    ...report,
    previousBlobs: [...content.blobs.keys()].filter(external).length,
    seconds: progress.elapsedSeconds(),
    signatures,
  };
}

/** Connections big blobs hold while small work is left: a quarter (each keeps the link busy). */
function bulkSlots(concurrency: number): number {
  return Math.max(1, Math.ceil(concurrency / 4));
}

function layoutIndex(content: BundleContent): LayoutIndex {
  return {
    schemaVersion: 2,
    mediaType: MediaType.ociIndex,
    manifests: content.images.map((image) => {
      // An attachment is named by its tag (`<repo>:sha256-<hex>.sig`), which push writes in the mirror.
      const top = image.manifests[0]!;
      return { mediaType: top.mediaType, digest: top.digest, size: top.bytes.length, annotations: { [REF_NAME]: image.pullSpec } };
    }),
  };
}

/**
 * Refuse to turn `dir` into this release's bundle when that would delete another one: a
 * bundle of another release or architecture, or an OCI layout prestage did not write.
 */
async function refuseOtherContent(dir: string, plan: Plan): Promise<void> {
  const text = await readFile(join(dir, BUNDLE_FILE), 'utf8').catch(() => undefined);
  const wanted = `${plan.release.version} ${plan.release.architecture} (${plan.release.pullSpec})`;
  if (text === undefined) {
    const blobs = await readdir(join(dir, BLOBS_DIR)).catch(() => []);
    if (blobs.length > 0 || (await stat(join(dir, INDEX_FILE)).catch(() => undefined))) {
      throw new BadInputError(`${dir} holds an OCI layout that is not a prestage bundle; creating release ${wanted} there would delete its blobs: choose another --to, or pass --force to replace it`);
    }
    return;
  }
  let held: Partial<BundleMetadata>;
  try {
    held = JSON.parse(text) as Partial<BundleMetadata>;
  } catch {
    throw new BadInputError(`${join(dir, BUNDLE_FILE)} is not JSON, so whose bundle ${dir} holds is unknown: choose another --to, or pass --force to replace it`);
  }
  if (held.release?.pullSpec === plan.release.pullSpec && held.architecture === plan.release.architecture) return;
  throw new BadInputError(`${dir} holds the bundle of release ${held.release?.version} ${held.architecture} (${held.release?.pullSpec}); creating release ${wanted} there would delete it: choose another --to, or pass --force to replace it`);
}

/**
 * The release's tags for the mirror: the one it was named by, and OpenShift's own
 * `<version>-<arch>` (`-multi` for a multi-arch release) that `plan RELEASE:TAG --mirror` reads.
 */
export function releaseTags(release: Plan['release'], namedBy?: string): string[] {
  const arch = release.multiArch ? 'multi' : (OPENSHIFT_ARCH[release.architecture] ?? release.architecture);
  return [...new Set([`${release.version}-${arch}`, ...(namedBy !== undefined ? [namedBy] : [])])];
}

/** Go architecture names as OpenShift's release tags spell them. */
const OPENSHIFT_ARCH: Readonly<Record<string, string>> = { amd64: 'x86_64', arm64: 'aarch64' };

/** prestage-bundle.json: whose bundle this is, and the previous bundle's blobs it relies on. */
async function writeMetadata(dir: string, plan: Plan, opts: CreateOptions, external: readonly Descriptor[], signatures: BundleSignatures): Promise<void> {
  const previousBlobs: BundleBlobRef[] = [...external].sort((a, b) => (a.digest < b.digest ? -1 : 1)).map((d) => ({ digest: d.digest, size: d.size }));
  const metadata: BundleMetadata = {
    apiVersion: PLAN_API_VERSION,
    kind: 'Bundle',
    release: { pullSpec: plan.release.pullSpec, version: plan.release.version, tags: releaseTags(plan.release, opts.releaseTag) },
    architecture: plan.release.architecture,
    allPlatforms: opts.allPlatforms,
    ...(opts.previous ? { previous: { source: opts.previous.source, blobs: previousBlobs } } : {}),
    signatures,
  };
  await writeFileAtomic(join(dir, BUNDLE_FILE), `${JSON.stringify(metadata, null, 2)}\n`, join(dir, PARTIAL_DIR));
}

/** The release's signatures and keys written as blobs, and what the metadata says of them. */
function storeReleaseSignatures(dir: string, given: GatheredSignatures): { record: ReleaseSignatureRecord; files: LayoutFile[] } {
  const store = (bytes: Buffer): BundleBlobRef => {
    const digest = sha256(bytes);
    storeBlob(dir, digest, bytes);
    return { digest, size: bytes.length };
  };
  const signatures = given.signatures.map(store);
  const keys = given.keysText !== undefined ? store(Buffer.from(given.keysText)) : undefined;
  const record: ReleaseSignatureRecord = {
    digest: given.digest,
    signatures,
    ...(keys ? { keys } : {}),
    verifiedWith: given.verifiedWith,
    from: given.from,
    ...(given.unsigned !== undefined ? { unsigned: given.unsigned } : {}),
  };
  return { record, files: [...signatures, ...(keys ? [keys] : [])] };
}

interface LayoutFile {
  readonly digest: string;
  readonly size: number;
}

/** The files the layout holds: every manifest, config and layer once, but those left to the previous bundle. */
function layoutFiles(content: BundleContent, external: (digest: string) => boolean): LayoutFile[] {
  return [
    ...uniqueManifests(content).map((m) => ({ digest: m.digest, size: m.bytes.length })),
    ...[...content.blobs.values()].map((b) => b.descriptor).filter((d) => !external(d.digest)),
  ];
}

function sizeOf(files: readonly LayoutFile[]): number {
  return files.reduce((a, f) => a + f.size, 0);
}

function uniqueManifests(content: BundleContent): BundleManifest[] {
  const seen = new Map<string, BundleManifest>();
  for (const image of content.images) for (const m of image.manifests) if (!seen.has(m.digest)) seen.set(m.digest, m);
  return [...seen.values()];
}

function imageBytes(image: BundleImage): number {
  return image.manifests.reduce((a, m) => a + m.bytes.length, 0) + image.blobs.reduce((a, b) => a + b.size, 0);
}

/**
 * Which images are complete as their manifests and blobs settle (stored, fetched, or found
 * held), in any order: an image's parts may settle before its own manifests were read.
 */
class ImageTracker {
  private readonly waiting = new Map<BundleImage, { pending: Set<string>; fetchedAny: boolean }>();
  private readonly imagesOf = new Map<string, BundleImage[]>();
  /** Parts settled so far: whether each was written in this run. */
  private readonly done = new Map<string, boolean>();

  /**
   * An image whose manifests were read; its parts are the digests the layout holds for it.
   * Returned at once if complete already (other images brought all of its parts).
   */
  add(image: BundleImage, parts: readonly string[]): { image: BundleImage; fetchedAny: boolean } | undefined {
    const pending = new Set(parts.filter((d) => !this.done.has(d)));
    const fetchedAny = parts.some((d) => this.done.get(d) === true);
    if (pending.size === 0) return { image, fetchedAny };
    this.waiting.set(image, { pending, fetchedAny });
    for (const digest of pending) this.imagesOf.set(digest, [...(this.imagesOf.get(digest) ?? []), image]);
    return undefined;
  }

  /** A part settled; the images it completed, and whether anything of theirs was written in this run. */
  settled(digest: string, fetched: boolean): Array<{ image: BundleImage; fetchedAny: boolean }> {
    this.done.set(digest, fetched);
    const complete: Array<{ image: BundleImage; fetchedAny: boolean }> = [];
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

/** Sizes of the files in a directory, by name; one stat per file that exists. */
async function fileSizes(path: string): Promise<Map<string, number>> {
  const names = await readdir(path).catch(() => [] as string[]);
  return new Map(await Promise.all(names.map(async (name) => [name, (await stat(join(path, name))).size] as const)));
}

/** A partial file longer than its blob cannot be a prefix of it: start over. */
async function usablePartialBytes(dir: string, blob: Descriptor, size: number): Promise<number> {
  if (size <= blob.size) return size;
  await rm(partialPath(dir, blob.digest), { force: true });
  return 0;
}

/**
 * One blob into the layout: continue `.partial/<hex>` (hashing what it holds first), append
 * what the registry sends, and rename into blobs/ only once the digest matched; its path, to
 * be synced with the others. A partial file that turns out damaged is discarded and the blob
 * fetched again from byte 0.
 */
async function fetchBlob(client: RegistryClient, dir: string, task: BlobTask, signal: AbortSignal, onBytes: (n: number) => void, rangesRefused: Set<string>, connections: number): Promise<string> {
  const { descriptor } = task;
  const partial = partialPath(dir, descriptor.digest);
  if (task.partialBytes === 0 && descriptor.size <= IN_MEMORY_BLOB) {
    // Most blobs of a release are a few KiB: one verified read into memory and one write cost
    // far less per blob than a stream pipeline, and per-blob cost is what bounds small blobs.
    const bytes = await client.readBlob(task.from, descriptor, IN_MEMORY_BLOB);
    onBytes(bytes.length);
    return storeBlob(dir, descriptor.digest, bytes);
  }
  let offset = task.partialBytes;
  const parts = Math.min(connections, rangeParts(descriptor.size));
  if (offset === 0 && parts > 1 && !rangesRefused.has(task.from.registry)) {
    try {
      await fetchInParts(client, task.from, descriptor, parts, partial, signal, onBytes);
      const path = blobPath(dir, descriptor.digest);
      await rename(partial, path);
      return path;
    } catch (err) {
      if (err instanceof RangesRefused) rangesRefused.add(task.from.registry);
      else if (!(err instanceof DigestMismatchError)) throw err;
      // Not served in ranges, or damaged: one stream from byte 0 (a second mismatch is final).
      await rm(partial, { force: true });
    }
  }
  for (;;) {
    try {
      await appendBlob(client, task.from, descriptor, partial, offset, signal, onBytes);
      break;
    } catch (err) {
      if (!(err instanceof DigestMismatchError)) throw err;
      await rm(partial, { force: true });
      if (offset === 0) throw err;
      offset = 0;
    }
  }
  const path = blobPath(dir, descriptor.digest);
  await rename(partial, path);
  return path;
}

/**
 * Bytes already verified (a manifest, a small blob) into the layout: temp file, rename; synced
 * with the blobs. At most IN_MEMORY_BLOB bytes into the page cache: written synchronously, which
 * costs a fraction of the CPU of three thread-pool round trips and their promises per blob (the
 * sockets keep receiving meanwhile).
 */
function storeBlob(dir: string, digest: string, bytes: Buffer): string {
  const partial = partialPath(dir, digest);
  writeFileSync(partial, bytes);
  const path = blobPath(dir, digest);
  renameSync(partial, path);
  return path;
}

/**
 * Blobs up to this size (most of a release's, by count) are read into memory, verified, and
 * written at once; a crash loses at most these in flight, which a rerun fetches again.
 */
const IN_MEMORY_BLOB = 64 * 1024;

/** A big blob is read in parts of at least this size, ... */
const MIN_PART_BYTES = 16 * 1024 * 1024;
/** ... at most this many at once. */
const MAX_PARTS = 4;
/** Range parts a blob of `size` bytes is read in, where ranges are served and connections free. */
function rangeParts(size: number): number {
  return Math.max(1, Math.min(MAX_PARTS, Math.floor(size / MIN_PART_BYTES)));
}

/** Bytes the in-order hash reads back at a time. */
const HASH_READ_BYTES = 4 * 1024 * 1024;

/**
 * A big blob in parallel Range parts, where the registry serves ranges (one connection is often
 * held to a fraction of the link by its window, or by a CDN's per-connection limit). Each part
 * is written at its offset as it arrives, the chunks that came in while a write was on the
 * thread pool going in one writev. The digest is checked over every byte before the rename,
 * in order: a chunk that arrives exactly at the hash frontier is hashed from memory as it
 * comes (all of the first part, and each later part once the frontier reached it), the rest is
 * read back from the file behind the contiguous bytes written. A registry that answers the
 * first part with the whole blob raises RangesRefused at once. On failure the file is cut back
 * to a hashed prefix that is on disk, which a rerun continues from.
 */
async function fetchInParts(client: RegistryClient, from: ImageReference, blob: Descriptor, parts: number, partial: string, signal: AbortSignal, onBytes: (n: number) => void): Promise<void> {
  const partSize = Math.ceil(blob.size / parts);
  const bounds = Array.from({ length: parts }, (_, i) => [i * partSize, Math.min(blob.size, (i + 1) * partSize)] as const);
  /** Per part: the end of the bytes received (its writer holds the end of those written). */
  const received = bounds.map(([start]) => start);
  const hash = createHash('sha256');
  /** Every byte below it is hashed, in order. */
  let hashed = 0;
  /** A read-back is in flight: the frontier is about to move, no chunk may be hashed from memory. */
  let readingBack = false;
  let failed = false;
  let wake: (() => void) | undefined;
  const notify = (): void => {
    const waiting = wake;
    wake = undefined;
    waiting?.();
  };
  const file = await open(partial, 'w+');
  const readers = bounds.map(([start, end]) => client.blobPart(from, blob, start, end));
  const writers = bounds.map(([start]) => new PartWriter(file, start, notify));
  const fill = async (i: number, first?: IteratorResult<Buffer>): Promise<void> => {
    const reader = readers[i]!;
    const writer = writers[i]!;
    try {
      for (let next = first ?? (await reader.next()); !next.done; next = await reader.next()) {
        if (failed || signal.aborted) return;
        const chunk = next.value;
        if (!readingBack && received[i] === hashed) {
          hash.update(chunk);
          hashed += chunk.length;
        }
        received[i]! += chunk.length;
        onBytes(chunk.length);
        await writer.add(chunk);
      }
      await writer.flushed();
    } finally {
      await reader.return(undefined);
    }
  };
  const hashInOrder = async (): Promise<string> => {
    const buffer = Buffer.allocUnsafe(HASH_READ_BYTES);
    for (const [i, [, end]] of bounds.entries()) {
      while (hashed < end) {
        if (failed || signal.aborted) throw signal.reason ?? new Error('a part failed');
        const ready = writers[i]!.written - hashed;
        if (ready <= 0) {
          await new Promise<void>((resolve) => (wake = resolve));
          continue;
        }
        readingBack = true;
        try {
          const { bytesRead } = await file.read(buffer, 0, Math.min(ready, buffer.length), hashed);
          hash.update(buffer.subarray(0, bytesRead));
          hashed += bytesRead;
        } finally {
          readingBack = false;
        }
      }
    }
    return `sha256:${hash.digest('hex')}`;
  };
  const onAbort = (): void => notify();
  signal.addEventListener('abort', onAbort);
  let error: unknown;
  try {
    // The first part's answer says whether ranges are served before the others are asked for.
    const first = await readers[0]!.next();
    const settled = await Promise.allSettled([
      ...bounds.map((_, i) => fill(i, i === 0 ? first : undefined).catch((err: unknown) => {
        failed = true;
        notify();
        throw err;
      })),
      hashInOrder(),
    ]);
    const rejected = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected' && !(failed && r.reason instanceof Error && r.reason.message === 'a part failed'));
    if (rejected) throw rejected.reason;
    const digest = (settled.at(-1) as PromiseFulfilledResult<string>).value;
    if (digest !== blob.digest) throw new DigestMismatchError(`${formatReference(from)}@${blob.digest}: content hashes to ${digest}; the registry or a proxy corrupted it`);
  } catch (err) {
    error = err;
    failed = true;
    await Promise.allSettled(readers.map((reader) => reader.return(undefined)));
    await Promise.allSettled(writers.map((writer) => writer.flushed()));
    // What was hashed and is on disk is a contiguous prefix of what the registry sent: a rerun continues there.
    await file.truncate(Math.min(hashed, contiguousPrefix(bounds, writers))).catch(() => undefined);
  } finally {
    signal.removeEventListener('abort', onAbort);
    await file.close();
  }
  if (error !== undefined) throw error;
}

/** Bytes from 0 that are on disk without a gap: parts in order, up to the first one not fully written. */
function contiguousPrefix(bounds: ReadonlyArray<readonly [number, number]>, writers: readonly PartWriter[]): number {
  for (const [i, [, end]] of bounds.entries()) if (writers[i]!.written < end) return writers[i]!.written;
  return bounds.at(-1)?.[1] ?? 0;
}

/** Chunks a part writer holds before its reader waits for the disk. */
const PART_BACKLOG_BYTES = 8 * 1024 * 1024;

/**
 * Writes one part's chunks at its offset, one write in flight: what arrives meanwhile goes in
 * the next writev, so the thread pool sees a few large writes instead of one per socket read.
 */
class PartWriter {
  private queue: Buffer[] = [];
  private queued = 0;
  private writing: Promise<void> | undefined;
  private failure: unknown;
  private end: number;

  constructor(private readonly file: FileHandle, start: number, private readonly onWritten: () => void) {
    this.end = start;
  }

  /** The end of the bytes on disk, contiguous from the part's start. */
  get written(): number {
    return this.end;
  }

  /** Queues a chunk; waits only while the backlog is over PART_BACKLOG_BYTES. */
  async add(chunk: Buffer): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    this.queue.push(chunk);
    this.queued += chunk.length;
    this.writing ??= this.drain();
    if (this.queued >= PART_BACKLOG_BYTES) await this.writing;
  }

  /** Every queued chunk on disk (or the write's error). */
  async flushed(): Promise<void> {
    await this.writing;
    if (this.failure !== undefined) throw this.failure;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue;
        const bytes = this.queued;
        this.queue = [];
        this.queued = 0;
        let at = 0;
        // writev may write less than asked: go on from where it stopped.
        while (at < bytes) {
          const { bytesWritten } = await this.file.writev(at === 0 ? batch : [Buffer.concat(batch).subarray(at)], this.end);
          at += bytesWritten;
          this.end += bytesWritten;
          this.onWritten();
        }
      }
    } catch (err) {
      this.failure = err;
    } finally {
      this.writing = undefined;
    }
  }
}

/** Write buffer: large writes, few syscalls; the registry's chunks pass through uncopied. */
const WRITE_BUFFER = 4 * 1024 * 1024;

async function appendBlob(client: RegistryClient, from: ImageReference, blob: Descriptor, partial: string, offset: number, signal: AbortSignal, onBytes: (n: number) => void): Promise<void> {
  const hash = createHash('sha256');
  if (offset > 0) {
    for await (const chunk of createReadStream(partial, { end: offset - 1, highWaterMark: WRITE_BUFFER })) hash.update(chunk as Buffer);
  }
  await pipeline(
    client.blobStream(from, blob, offset > 0 ? { offset, hash } : undefined),
    async function* counted(source: AsyncIterable<Buffer>) {
      for await (const chunk of source) {
        onBytes(chunk.length);
        yield chunk;
      }
    },
    createWriteStream(partial, { flags: offset > 0 ? 'a' : 'w', highWaterMark: WRITE_BUFFER }),
    { signal },
  );
}

/** A blob this big is fsynced as soon as it is in blobs/, behind the transfer. */
const SYNC_BEHIND_BYTES = 1024 * 1024;

/**
 * The blobs written, to be made durable before the index names them. The disk writes a big
 * blob back while the next ones download (a flush of hundreds of MiB at the end took a fifth
 * of an uncapped bundle's time); one fsync at a time, so the thread pool keeps its other
 * threads for the blobs' reads and writes. Small blobs are synced together at the end, where
 * the journal commits them in a few batches.
 */
export class SyncBehind {
  private readonly small: string[] = [];
  private behind: Promise<void> = Promise.resolve();
  private failure: { error: unknown } | undefined;

  add(path: string, bytes: number): void {
    if (bytes < SYNC_BEHIND_BYTES) {
      this.small.push(path);
      return;
    }
    this.behind = this.behind.then(() => syncFiles([path])).catch((error: unknown) => {
      this.failure ??= { error };
    });
  }

  /** The fsyncs in flight done, failed or not (before the command returns either way). */
  settled(): Promise<void> {
    return this.behind;
  }

  /** Every blob written is on disk; the first fsync that failed fails it. */
  async finish(): Promise<void> {
    await this.behind;
    if (this.failure) throw this.failure.error;
    await syncFiles(this.small);
  }
}

/** fsync every file written, a few at a time: the disk queues them together. */
async function syncFiles(paths: readonly string[]): Promise<void> {
  const limit = pLimit(16);
  await Promise.all(paths.map((path) => limit(async () => {
    const handle = await open(path, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  })));
}

async function syncDir(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
