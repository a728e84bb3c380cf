/**
 * `bundle create`: write everything a plan needs into an OCI layout, each blob once, each
 * digest verified as written. Resumable: blobs kept from an earlier run are re-hashed (a
 * damaged one is fetched again), partial ones continue with a Range request from their last
 * byte. A directory holding another release's bundle is left alone unless forced.
 *
 * The rooms, as the data flows: discovery.ts (the plan's images and their attachments, read and
 * verified), transfer.ts with range-parts.ts and sync-behind.ts (each blob into the layout),
 * layout-write.ts (the layout's own files); this module composes them.
 */
import { StreamPacer } from '../net/link-rate.js';
import type { Plan } from '../plan/types.js';
import type { RegistryClient } from '../registry/client.js';
import type { Descriptor } from '../registry/manifest.js';
import type { ImageReference } from '../registry/reference.js';
import type { GatheredSignatures } from '../signatures/gather.js';
import type { CatalogSelection } from '../catalog/selection.js';
import { carryCatalogs } from './catalog-rebuild.js';
import type { BundleContent, BundleImage, BundleManifest } from './content.js';
import { Discovery, ImageTracker, imageBytes, type CompleteImage } from './discovery.js';
import { freeSpaceCheck, type StatFs } from './disk-space.js';
import { planBlobSizes } from './inputs.js';
import { TransferLanes } from './lanes.js';
import { blobFileName, blobPath, type BundleSignatures, type CatalogRecord, type LayoutIndex } from './layout.js';
import {
  dropOtherIndex, finishLayout, layoutFiles, layoutIndex, makeLayoutDirs, refuseOtherContent, sizeOf, storeReleaseSignatures, writeMetadata, writeOciLayout,
  type LayoutFile,
} from './layout-write.js';
import { TransferProgress, type ProgressMode } from './progress.js';
import { rangeParts } from './range-parts.js';
import { SyncBehind } from './sync-behind.js';
import { BlobTransfers, IN_MEMORY_BLOB, leftovers } from './transfer.js';
import { count } from '../plural.js';

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
  /** What progress to write (progress.ts); default: by `tty`. */
  readonly progress?: ProgressMode;
  readonly statFs?: StatFs;
  /** Copy each image's sigstore attachment (`<repo>:sha256-<hex>.sig`) where the source has one. */
  readonly sigstore: boolean;
  /** The release's GPG signatures, gathered and verified before (signatures/gather.ts). */
  readonly releaseSignatures?: GatheredSignatures;
  /** `--link-rate`, bytes per second: the cap all manifest and blob reads of the run share. */
  readonly linkRate?: number;
  /**
   * A check of the whole content before index.json makes the layout complete (the sigstore
   * attachments against `--sigstore-key`): when it throws, the run fails resumable, not complete.
   */
  readonly beforeComplete?: (index: LayoutIndex) => Promise<void>;
  /** What the command asked of each operator catalog the plan stages from: the filtered catalogs' channels and targets. */
  readonly catalogSelections?: readonly CatalogSelection[];
  /** A line worth saying that is no error (a filtered catalog's default channel replaced). */
  readonly warn?: (line: string) => void;
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
  /** The operator catalogs carried: rebuilt, filtered to what the plan stages, or whole. */
  readonly catalogs: readonly CatalogRecord[];
}

/**
 * Manifests and blobs are read side by side: each image's manifests are read as light work
 * (lanes.ts), and queue the blobs they name the moment they arrive, so the link carries blobs
 * from the first manifest on instead of waiting for the last.
 */
export async function createBundle(client: RegistryClient, plan: Plan, opts: CreateOptions): Promise<CreateReport> {
  const { dir } = opts;
  if (!opts.force) await refuseOtherContent(dir, plan);
  await makeLayoutDirs(dir);
  // What earlier runs left: files in blobs/ (each re-hashed before it is kept: a file of the
  // right size can still be damaged, and push and verify send users here to repair it) and
  // partial downloads, continued where they stopped.
  const left = await leftovers(dir);
  // The release's signatures are small: into the layout first (after the look at what earlier
  // runs left, which they are not), named by digest like any blob.
  const release = opts.releaseSignatures ? storeReleaseSignatures(dir, opts.releaseSignatures) : undefined;
  const signatures = { ...(release ? { release: release.record } : {}), sigstore: { copied: opts.sigstore, looked: 0, found: 0 } };
  // Written before any blob, so an interrupted run still says whose bundle this is; again with
  // the previous bundle's blobs it relies on once every manifest is read.
  await writeMetadata(dir, plan, opts, [], signatures);
  if (left.blobs.size > 0) opts.progressTo.write(`checking the ${count(left.blobs.size, 'blob')} an earlier run left as their images are read\n`);
  const external = (digest: string): boolean => opts.previous?.blobs.has(digest) === true;
  /** Bytes a blob still needs on disk: none if held, or left to the previous bundle. */
  const missingBytes = (digest: string, size: number): number => {
    if (external(digest) || left.blobs.get(blobFileName(digest)) === size) return 0;
    const held = left.partial.get(blobFileName(digest)) ?? 0;
    return held <= size ? size - held : size;
  };
  const fits = await freeSpaceCheck(dir, 'or choose another --output-dir', opts.statFs);
  // Before any read, the configs and layers the plan names must fit; everything else (the
  // manifests, images only the mirror serves) once every manifest is read.
  fits([...planBlobSizes(plan)].reduce((a, [digest, size]) => a + missingBytes(digest, size), 0));
  await writeOciLayout(dir);

  /** Once every manifest is read: the content, the files the layout holds, and its index.json. */
  let collected: { content: BundleContent; layout: LayoutFile[]; index: LayoutIndex; external: Descriptor[] } | undefined;
  /** Every manifest read: the whole content is known; check it fits, and record it. */
  const allRead = async (content: BundleContent): Promise<void> => {
    const layout = [...layoutFiles(content, external), ...(release?.files ?? [])];
    collected = { content, layout, index: layoutIndex(content), external: [...content.blobs.values()].map((b) => b.descriptor).filter((d) => external(d.digest)) };
    fits(layout.reduce((a, f) => a + missingBytes(f.digest, f.size), 0) + (opts.extraBytes?.({ bytes: sizeOf(layout), files: layout.length }) ?? 0));
    await writeMetadata(dir, plan, opts, collected.external, signatures);
    await dropOtherIndex(dir, renderIndex(collected.index));
  };
  // One pacer for the run: every manifest and blob read, small, streamed or in Range parts, shares its rate.
  const pacer = opts.linkRate !== undefined ? new StreamPacer(opts.linkRate) : undefined;
  const discovery = new Discovery(client, plan, { ...opts, ...(pacer ? { pacer } : {}) }, signatures.sigstore, { take: (image) => take(image), allRead });

  const progress = new TransferProgress(opts.progressTo, { verb: 'bundled', totalBytes: 0, totalImages: discovery.pullSpecs.length, ...(opts.tty !== undefined ? { tty: opts.tty } : {}), ...(opts.progress !== undefined ? { mode: opts.progress } : {}) });
  const tracker = new ImageTracker();
  /** Manifests and blobs already taken care of (stored, queued, or left to the previous bundle). */
  const seen = new Set<string>();
  // Blobs are renamed into blobs/ as they verify; none waits for its fsync (that would stall
  // the link): big ones are synced behind the transfer, small ones together at the end. A blob
  // a crash left short is re-hashed and fetched again on the rerun like any damaged one.
  const written = new SyncBehind();
  for (const file of release?.files ?? []) written.add(blobPath(dir, file.digest), file.size);
  const blobs = new BlobTransfers(client, dir, left, progress, written, pacer);
  const lanes = new TransferLanes(opts.concurrency, bulkSlots(opts.concurrency));

  const complete = ({ image, fetchedAny }: CompleteImage): void => {
    if (image.signs !== undefined) return;
    if (fetchedAny) progress.imageDone(image.pullSpec, imageBytes(image));
    else progress.imageKept();
  };
  const settled = (digest: string, fetched: boolean): void => tracker.settled(digest, fetched).forEach(complete);
  const storeManifest = async (manifest: BundleManifest): Promise<void> => settled(manifest.digest, await blobs.manifest(manifest));
  const transferBlob = async (descriptor: Descriptor, from: ImageReference, signal: AbortSignal, connections: number): Promise<void> => {
    settled(descriptor.digest, await blobs.blob(descriptor, from, signal, connections));
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

  await discovery.start(lanes);
  try {
    await lanes.drained();
  } finally {
    progress.finish();
    await written.settled();
  }
  if (!collected) throw new Error('bundle create: the transfers ended before every manifest was read');
  const { content } = collected;
  // Every blob is in: the operator catalogs are rebuilt from the layout's own, before index.json completes it.
  const catalogs = plan.operators
    ? await carryCatalogs({ dir, plan, content, selections: opts.catalogSelections ?? [], external, client, written, warn: opts.warn ?? ((line) => opts.progressTo.write(`warning: ${line}\n`)) })
    : { entries: [], files: [], records: [] };
  const layout = [...collected.layout, ...catalogs.files];
  const index: LayoutIndex = { ...collected.index, manifests: [...collected.index.manifests, ...catalogs.entries] };
  if (plan.operators) await writeMetadata(dir, plan, opts, collected.external, signatures, { catalogs: catalogs.records });
  await opts.beforeComplete?.(index);
  await finishLayout(dir, layout, renderIndex(index), left.blobs.keys(), written);

  return {
    // A rebuilt catalog is an image of the layout too, as verify counts them.
    images: content.images.filter((i) => i.signs === undefined).length + catalogs.entries.length,
    blobs: layout.length,
    bytes: sizeOf(layout),
    ...blobs.counts,
    previousBlobs: [...content.blobs.keys()].filter(external).length,
    seconds: progress.elapsedSeconds(),
    signatures,
    catalogs: catalogs.records,
  };
}

function renderIndex(index: LayoutIndex): string {
  return `${JSON.stringify(index, null, 2)}\n`;
}

/** Connections big blobs hold while small work is left: a quarter (each keeps the link busy). */
function bulkSlots(concurrency: number): number {
  return Math.max(1, Math.ceil(concurrency / 4));
}
