/**
 * `bundle verify`: re-hash every blob against its name, then walk index.json → manifests →
 * configs and layers, and name each missing or corrupt blob with the images that need it.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { BadInputError, PrestageError } from '../errors.js';
import { parseManifest } from '../registry/manifest.js';
import { isDigest, parseReference } from '../registry/reference.js';
import { signedDigestOfTag } from '../signatures/sigstore.js';
import { readVerifiedBlob } from './blob-files.js';
import { hashOpenFile, openRegularFile } from './bundle-reads.js';
import { keptPlatforms, manifestBlobs } from './content.js';
import { BLOBS_DIR, blobPath, REF_NAME, type Bundle } from './layout.js';

/** `unreferenced`: a damaged file no image needs (it would still travel in an archive). */
export type BlobRole = 'manifest' | 'config' | 'layer' | 'signature' | 'unreferenced';

export interface BlobProblem {
  readonly digest: string;
  readonly problem: 'missing' | 'corrupt';
  readonly role: BlobRole;
  /** Source pullspecs of the images that need the blob. */
  readonly neededBy: readonly string[];
}

export interface VerifyReport {
  readonly images: number;
  /** Blob files whose content matches their name. */
  readonly blobs: number;
  readonly bytes: number;
  /** Referenced blobs the bundle expects from the previous bundle (`--since`). */
  readonly fromPrevious: number;
  readonly problems: readonly BlobProblem[];
}

/** The blobs a bundle holds, re-hashed. */
export interface BlobInventory {
  /** Digest to size, for blobs whose bytes hash to their name. */
  readonly verified: ReadonlyMap<string, number>;
  readonly corrupt: ReadonlySet<string>;
  /** The bytes of a verified blob (manifests are read through this). */
  read(digest: string): Promise<Buffer>;
}

/** Hash every file under blobs/sha256. */
export async function inventoryOfDir(dir: string): Promise<BlobInventory> {
  const names = await readdir(join(dir, BLOBS_DIR)).catch(() => [] as string[]);
  const { verified, corrupt } = await hashBlobs(dir, names.map((hex) => `sha256:${hex}`).filter(isDigest));
  return { verified, corrupt, read: (digest) => readVerifiedBlob(dir, digest) };
}

/**
 * Re-hash the named blob files of a layout, a few at a time (disk-bound): which match their
 * name, with sizes. A link, FIFO or directory in a blob's place is corrupt, never followed.
 */
export async function hashBlobs(dir: string, digests: readonly string[]): Promise<{ verified: Map<string, number>; corrupt: Set<string> }> {
  const verified = new Map<string, number>();
  const corrupt = new Set<string>();
  const limit = pLimit(4);
  await Promise.all(digests.map((digest) => limit(async () => {
    const file = await openRegularFile(blobPath(dir, digest), `blob ${digest}`).catch((err: NodeJS.ErrnoException) => {
      if (err instanceof BadInputError) return undefined;
      throw err;
    });
    if (!file) {
      corrupt.add(digest);
      return;
    }
    let hashed: { digest: string; size: number };
    try {
      hashed = await hashOpenFile(file.handle);
    } finally {
      await file.handle.close();
    }
    if (hashed.digest === digest) verified.set(digest, hashed.size);
    else corrupt.add(digest);
  })));
  return { verified, corrupt };
}

/** Walk the bundle's references against what its blobs turned out to be. */
export async function checkBundle(bundle: Pick<Bundle, 'index' | 'metadata'>, inventory: BlobInventory): Promise<VerifyReport> {
  const { metadata } = bundle;
  const external = new Set(metadata.previous?.blobs.map((b) => b.digest) ?? []);
  const problems = new Map<string, { problem: BlobProblem['problem']; role: BlobRole; neededBy: Set<string> }>();
  const fromPrevious = new Set<string>();

  /** True when the blob is there and sound; otherwise records why not. */
  const present = (digest: string, role: BlobRole, pullSpec: string): boolean => {
    if (inventory.verified.has(digest)) return true;
    if (role !== 'manifest' && external.has(digest) && !inventory.corrupt.has(digest)) {
      fromPrevious.add(digest);
      return false;
    }
    const entry = problems.get(digest) ?? { problem: inventory.corrupt.has(digest) ? 'corrupt' : 'missing', role, neededBy: new Set<string>() };
    entry.neededBy.add(pullSpec);
    problems.set(digest, entry);
    return false;
  };
  const manifest = async (digest: string, pullSpec: string) => {
    try {
      return parseManifest(await inventory.read(digest), undefined, `${pullSpec} manifest ${digest}`);
    } catch (err) {
      throw err instanceof PrestageError ? new BadInputError(err.message) : err;
    }
  };

  for (const entry of bundle.index.manifests) {
    const pullSpec = entry.annotations[REF_NAME];
    if (!present(entry.digest, 'manifest', pullSpec)) continue;
    const top = await manifest(entry.digest, pullSpec);
    const images = [];
    if (top.kind === 'image') {
      images.push(top);
    } else {
      for (const child of keptPlatforms(top, metadata.architecture, metadata.allPlatforms, pullSpec)) {
        if (!present(child.digest, 'manifest', pullSpec)) continue;
        const m = await manifest(child.digest, pullSpec);
        if (m.kind === 'image') images.push(m);
      }
    }
    for (const image of images) {
      for (const blob of manifestBlobs(image)) present(blob.digest, blob === image.config ? 'config' : 'layer', pullSpec);
    }
  }

  // The release's GPG signatures and the keys that verified them: blobs named in the metadata.
  const gpg = metadata.signatures?.release;
  for (const blob of [...(gpg?.signatures ?? []), ...(gpg?.keys ? [gpg.keys] : [])]) present(blob.digest, 'signature', `release ${metadata.release.version} signatures`);

  for (const digest of inventory.corrupt) {
    if (!problems.has(digest)) problems.set(digest, { problem: 'corrupt', role: 'unreferenced', neededBy: new Set() });
  }

  return {
    // Sigstore attachments are images of the layout, not of the release.
    images: bundle.index.manifests.filter((m) => signedDigestOfTag(parseReference(m.annotations[REF_NAME]).tag) === undefined).length,
    blobs: inventory.verified.size,
    bytes: [...inventory.verified.values()].reduce((a, b) => a + b, 0),
    fromPrevious: fromPrevious.size,
    problems: [...problems].map(([digest, p]) => ({ digest, problem: p.problem, role: p.role, neededBy: [...p.neededBy].sort() })),
  };
}

/** One line per problem: `corrupt layer sha256:… needed by A, B and 3 more`. */
export function describeProblem(p: BlobProblem): string {
  if (p.neededBy.length === 0) return `${p.problem} ${p.role} blob ${p.digest}`;
  const shown = p.neededBy.slice(0, 3).join(', ');
  const more = p.neededBy.length > 3 ? ` and ${p.neededBy.length - 3} more` : '';
  return `${p.problem} ${p.role} ${p.digest} needed by ${shown}${more}`;
}
