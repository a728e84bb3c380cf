/**
 * Writing a bundle's layout (the format is layout.ts): refusing a directory that holds
 * another bundle, prestage-bundle.json, the release's signatures as blobs, and index.json last,
 * once every blob it names is durable.
 */
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../atomic-file.js';
import { BadInputError } from '../errors.js';
import { PLAN_API_VERSION, type Plan } from '../plan/types.js';
import { sha256 } from '../registry/client.js';
import { MediaType, type Descriptor } from '../registry/manifest.js';
import type { GatheredSignatures } from '../signatures/gather.js';
import type { BundleContent, BundleManifest } from './content.js';
import {
  BLOBS_DIR, BUNDLE_FILE, INDEX_FILE, OCI_LAYOUT, OCI_LAYOUT_FILE, PARTIAL_DIR, REF_NAME,
  blobFileName, type BundleBlobRef, type BundleMetadata, type BundleSignatures, type LayoutIndex, type ReleaseSignatureRecord,
} from './layout.js';
import { syncDir, type SyncBehind } from './sync-behind.js';
import { storeBlob } from './transfer.js';

/**
 * Refuse to turn `dir` into this release's bundle when that would delete another one: a
 * bundle of another release or architecture, or an OCI layout prestage did not write.
 */
export async function refuseOtherContent(dir: string, plan: Plan): Promise<void> {
  const text = await readFile(join(dir, BUNDLE_FILE), 'utf8').catch(() => undefined);
  const wanted = `${plan.release.version} ${plan.release.architecture} (${plan.release.pullSpec})`;
  if (text === undefined) {
    const blobs = await readdir(join(dir, BLOBS_DIR)).catch(() => []);
    if (blobs.length > 0 || (await stat(join(dir, INDEX_FILE)).catch(() => undefined))) {
      throw new BadInputError(`${dir} holds an OCI layout that is not a prestage bundle; creating release ${wanted} there would delete its blobs: choose another --output-dir, or pass --force to replace it`);
    }
    return;
  }
  let held: Partial<BundleMetadata>;
  try {
    held = JSON.parse(text) as Partial<BundleMetadata>;
  } catch {
    throw new BadInputError(`${join(dir, BUNDLE_FILE)} is not JSON, so whose bundle ${dir} holds is unknown: choose another --output-dir, or pass --force to replace it`);
  }
  if (held.release?.pullSpec === plan.release.pullSpec && held.architecture === plan.release.architecture) return;
  throw new BadInputError(`${dir} holds the bundle of release ${held.release?.version} ${held.architecture} (${held.release?.pullSpec}); creating release ${wanted} there would delete it: choose another --output-dir, or pass --force to replace it`);
}

/** blobs/ and .partial/, where downloads in progress live. */
export async function makeLayoutDirs(dir: string): Promise<void> {
  await mkdir(join(dir, BLOBS_DIR), { recursive: true });
  await mkdir(join(dir, PARTIAL_DIR), { recursive: true });
}

export async function writeOciLayout(dir: string): Promise<void> {
  await writeFileAtomic(join(dir, OCI_LAYOUT_FILE), `${JSON.stringify(OCI_LAYOUT)}\n`, join(dir, PARTIAL_DIR));
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

/** What `bundle create` was asked that prestage-bundle.json records. */
export interface MetadataOptions {
  /** The tag the release was named by, if any. */
  readonly releaseTag?: string;
  readonly allPlatforms: boolean;
  /** What `--since` named. */
  readonly previous?: { readonly source: string };
}

/** prestage-bundle.json: whose bundle this is, and the previous bundle's blobs it relies on. */
export function bundleMetadata(plan: Plan, opts: MetadataOptions, external: readonly Descriptor[], signatures: BundleSignatures, operators?: BundleMetadata['operators']): BundleMetadata {
  const previousBlobs: BundleBlobRef[] = [...external].sort((a, b) => (a.digest < b.digest ? -1 : 1)).map((d) => ({ digest: d.digest, size: d.size }));
  return {
    apiVersion: PLAN_API_VERSION,
    kind: 'Bundle',
    release: { pullSpec: plan.release.pullSpec, version: plan.release.version, tags: releaseTags(plan.release, opts.releaseTag) },
    architecture: plan.release.architecture,
    allPlatforms: opts.allPlatforms,
    ...(opts.previous ? { previous: { source: opts.previous.source, blobs: previousBlobs } } : {}),
    signatures,
    ...(operators ? { operators } : {}),
  };
}

export async function writeMetadata(dir: string, plan: Plan, opts: MetadataOptions, external: readonly Descriptor[], signatures: BundleSignatures, operators?: BundleMetadata['operators']): Promise<void> {
  const metadata = bundleMetadata(plan, opts, external, signatures, operators);
  await writeFileAtomic(join(dir, BUNDLE_FILE), `${JSON.stringify(metadata, null, 2)}\n`, join(dir, PARTIAL_DIR));
}

/** A file of the layout, by digest. */
export interface LayoutFile {
  readonly digest: string;
  readonly size: number;
}

/** The release's signatures and keys as blobs (named by digest), and what the metadata says of them. */
export function releaseSignatureRecord(given: GatheredSignatures): { record: ReleaseSignatureRecord; blobs: Array<{ ref: BundleBlobRef; bytes: Buffer }> } {
  const blob = (bytes: Buffer): { ref: BundleBlobRef; bytes: Buffer } => ({ ref: { digest: sha256(bytes), size: bytes.length }, bytes });
  const signatures = given.signatures.map(blob);
  const keys = given.keysText !== undefined ? blob(Buffer.from(given.keysText)) : undefined;
  const record: ReleaseSignatureRecord = {
    digest: given.digest,
    signatures: signatures.map((s) => s.ref),
    ...(keys ? { keys: keys.ref } : {}),
    verifiedWith: given.verifiedWith,
    from: given.from,
    ...(given.unsigned !== undefined ? { unsigned: given.unsigned } : {}),
  };
  return { record, blobs: [...signatures, ...(keys ? [keys] : [])] };
}

/** The release's signatures and keys written as blobs, and what the metadata says of them. */
export function storeReleaseSignatures(dir: string, given: GatheredSignatures): { record: ReleaseSignatureRecord; files: LayoutFile[] } {
  const { record, blobs } = releaseSignatureRecord(given);
  for (const { ref, bytes } of blobs) storeBlob(dir, ref.digest, bytes);
  return { record, files: blobs.map((b) => b.ref) };
}

/** The files the layout holds: every manifest, config and layer once, but those left to the previous bundle. */
export function layoutFiles(content: BundleContent, external: (digest: string) => boolean): LayoutFile[] {
  return [
    ...uniqueManifests(content).map((m) => ({ digest: m.digest, size: m.bytes.length })),
    ...[...content.blobs.values()].map((b) => b.descriptor).filter((d) => !external(d.digest)),
  ];
}

export function sizeOf(files: readonly LayoutFile[]): number {
  return files.reduce((a, f) => a + f.size, 0);
}

function uniqueManifests(content: BundleContent): BundleManifest[] {
  const seen = new Map<string, BundleManifest>();
  for (const image of content.images) for (const m of image.manifests) if (!seen.has(m.digest)) seen.set(m.digest, m);
  return [...seen.values()];
}

export function layoutIndex(content: BundleContent): LayoutIndex {
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

/** A layout with an index is complete: an index for other content goes until this run ends. */
export async function dropOtherIndex(dir: string, index: string): Promise<void> {
  if ((await readFile(join(dir, INDEX_FILE), 'utf8').catch(() => undefined)) !== index) await rm(join(dir, INDEX_FILE), { force: true });
}

/**
 * The layout complete: what an earlier run for other content left in blobs/ dropped (the
 * layout holds this plan's content only), every blob written durable, then index.json.
 */
export async function finishLayout(dir: string, layout: readonly LayoutFile[], index: string, leftBlobs: Iterable<string>, written: SyncBehind): Promise<void> {
  const wanted = new Set(layout.map((f) => blobFileName(f.digest)));
  for (const name of leftBlobs) if (!wanted.has(name)) await rm(join(dir, BLOBS_DIR, name), { force: true });
  await written.finish();
  await syncDir(join(dir, BLOBS_DIR));

  await writeFileAtomic(join(dir, INDEX_FILE), index, join(dir, PARTIAL_DIR));
  // Everything in .partial/ was either renamed into blobs/ or is a leftover temp file.
  await rm(join(dir, PARTIAL_DIR), { recursive: true, force: true });
}
