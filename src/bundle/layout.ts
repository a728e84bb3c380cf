/**
 * A bundle on disk: an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/<hex>`)
 * plus `prestage-bundle.json` for what OCI has no place for (the platforms kept of manifest
 * lists, blobs expected from a previous bundle). Downloads in progress live in `.partial/`,
 * named by digest, so a rerun resumes them. A file under `blobs/` was verified before it was
 * renamed there, so later runs trust its name (with its size).
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { BadInputError } from '../errors.js';
import { PLAN_API_VERSION } from '../plan/types.js';
import { MediaType } from '../registry/manifest.js';
import { isDigest } from '../registry/reference.js';
import { checkMetadataNames, indexReference } from './bundle-names.js';
import { readBoundedFile } from './bundle-reads.js';

export const OCI_LAYOUT_FILE = 'oci-layout';
export const INDEX_FILE = 'index.json';
export const BUNDLE_FILE = 'prestage-bundle.json';
export const PARTIAL_DIR = '.partial';
export const BLOBS_DIR = join('blobs', 'sha256');
/** The OCI annotation naming an image in a layout; prestage puts the source pullspec there. */
export const REF_NAME = 'org.opencontainers.image.ref.name';
export const OCI_LAYOUT = { imageLayoutVersion: '1.0.0' } as const;

export interface IndexEntry {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly annotations: { readonly [REF_NAME]: string };
}

export interface LayoutIndex {
  readonly schemaVersion: 2;
  readonly mediaType: typeof MediaType.ociIndex;
  readonly manifests: readonly IndexEntry[];
}

export interface BundleBlobRef {
  readonly digest: string;
  readonly size: number;
}

export interface BundleMetadata {
  readonly apiVersion: typeof PLAN_API_VERSION;
  readonly kind: 'Bundle';
  /** `tags`: what `push` tags the release image as in the mirror (absent in bundles written before tags were pushed). */
  readonly release: { readonly pullSpec: string; readonly version: string; readonly tags?: readonly string[] };
  /** The platform whose manifests (and blobs) were kept from manifest lists, unless `allPlatforms`. */
  readonly architecture: string;
  readonly allPlatforms: boolean;
  /** Blobs (configs and layers) the bundle relies on without holding them: `--since`. */
  readonly previous?: { readonly source: string; readonly blobs: readonly BundleBlobRef[] };
  /** Absent in bundles written before signatures travelled. */
  readonly signatures?: BundleSignatures;
  /** The operator catalogs the bundle carries (`--config`, `--catalog`): what `push` writes CatalogSources for. */
  readonly operators?: { readonly catalogs: readonly CatalogRecord[] };
}

/** An operator catalog in a bundle (bundle/catalog-rebuild.ts). */
export interface CatalogRecord {
  /** The catalog as the plan named it (`registry.redhat.io/redhat/redhat-operator-index:v4.16`). */
  readonly reference: string;
  /** The source catalog image by digest, an image of the layout. */
  readonly source: string;
  /** What push writes to the mirror and the CatalogSource names: the rebuilt catalog, or the source carried whole (`full`). */
  readonly image: string;
  readonly rebuilt: boolean;
  /** A rebuilt catalog's FBC root, packages and bundles, and the stale opm cache its new layer deletes. */
  readonly configsDir?: string;
  readonly packages?: readonly string[];
  readonly bundles?: readonly string[];
  readonly cacheDir?: string;
  /** The ISC's targetCatalog: a repository path under the push target (default: the source repository's place). */
  readonly targetCatalog?: string;
  /** The tag push writes (the ISC's targetTag, else the source reference's tag). */
  readonly tag?: string;
}

/** What prestage-bundle.json says of the release's GPG signatures. */
export interface ReleaseSignatureRecord {
  /** The digest they sign: the release image as named (a multi-arch release's list). */
  readonly digest: string;
  /** Their bytes, as blobs of the layout, in the order the store numbered them. */
  readonly signatures: readonly BundleBlobRef[];
  /** The armored public keys that verified them (a blob), and the keys' names. */
  readonly keys?: BundleBlobRef;
  readonly verifiedWith: readonly string[];
  /** Where they came from: stores or a directory. */
  readonly from: readonly string[];
  /** Set when none verified and `--allow-unsigned` let the bundle go on: why. */
  readonly unsigned?: string;
}

/** What prestage-bundle.json says of the sigstore attachments. */
export interface SigstoreRecord {
  /** False with `--remove-signatures`: none were looked for. */
  readonly copied: boolean;
  /** Image digests looked up (each image, and each platform manifest a list keeps). */
  readonly looked: number;
  readonly found: number;
}

export interface BundleSignatures {
  readonly release?: ReleaseSignatureRecord;
  readonly sigstore: SigstoreRecord;
}


export interface Bundle {
  readonly dir: string;
  readonly index: LayoutIndex;
  readonly metadata: BundleMetadata;
}

export function blobPath(dir: string, digest: string): string {
  return join(dir, BLOBS_DIR, blobFileName(digest));
}

export function partialPath(dir: string, digest: string): string {
  return join(dir, PARTIAL_DIR, blobFileName(digest));
}

/** A blob's file name under blobs/sha256 and .partial: the digest's hex. */
export function blobFileName(digest: string): string {
  if (!isDigest(digest)) throw new BadInputError(`${digest} is not a sha256 digest`);
  return digest.slice('sha256:'.length);
}

/** The files that describe a layout, by name; a missing one is undefined. */
export type LayoutFiles = Readonly<Partial<Record<typeof OCI_LAYOUT_FILE | typeof INDEX_FILE | typeof BUNDLE_FILE, string>>>;

/** Read and check a layout's `oci-layout`, `index.json` and `prestage-bundle.json`, each bounded. */
export async function readBundle(dir: string): Promise<Bundle> {
  // Before its files: a mistyped path is not a damaged bundle.
  const found = await stat(dir).catch(() => undefined);
  if (!found) throw new BadInputError(`${dir}: no such directory; name a bundle directory (or the parts directory of an archive)`);
  if (!found.isDirectory()) throw new BadInputError(`${dir} is not a directory; name a bundle directory (or the parts directory of an archive)`);
  const files: Record<string, string> = {};
  for (const file of [OCI_LAYOUT_FILE, INDEX_FILE, BUNDLE_FILE] as const) {
    const path = join(dir, file);
    try {
      files[file] = (await readBoundedFile(path, file, path)).toString('utf8');
    } catch (err) {
      if (err instanceof BadInputError) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') throw new BadInputError(`cannot read ${join(dir, file)}: ${code ?? String(err)}`);
    }
  }
  return { dir, ...parseBundleFiles(files, dir) };
}

/** `where` names the bundle (a directory or an archive) in messages. */
export function parseBundleFiles(files: LayoutFiles, where: string): Omit<Bundle, 'dir'> {
  const layout = parseJson(files, OCI_LAYOUT_FILE, where) as { imageLayoutVersion?: unknown };
  if (layout.imageLayoutVersion !== OCI_LAYOUT.imageLayoutVersion) {
    throw new BadInputError(`${where}: ${OCI_LAYOUT_FILE} has imageLayoutVersion ${String(layout.imageLayoutVersion)}, not ${OCI_LAYOUT.imageLayoutVersion}`);
  }
  const index = parseJson(files, INDEX_FILE, where) as LayoutIndex;
  if (!Array.isArray(index.manifests) || index.manifests.some((m) => typeof m?.digest !== 'string' || !isDigest(m.digest) || typeof m.annotations?.[REF_NAME] !== 'string')) {
    throw new BadInputError(`${where}: ${INDEX_FILE} is not a prestage bundle index; every entry needs a sha256 digest and a ${REF_NAME} annotation`);
  }
  for (const m of index.manifests) indexReference(m.annotations[REF_NAME], where);
  const metadata = parseJson(files, BUNDLE_FILE, where) as BundleMetadata;
  if (metadata.apiVersion !== PLAN_API_VERSION || metadata.kind !== 'Bundle' || typeof metadata.architecture !== 'string') {
    throw new BadInputError(`${where}: ${BUNDLE_FILE} is not a ${PLAN_API_VERSION} Bundle; was it written by this version of prestage?`);
  }
  checkMetadataNames(metadata, where);
  return { index, metadata };
}

function parseJson(files: LayoutFiles, file: keyof LayoutFiles, where: string): unknown {
  const text = files[file];
  if (text === undefined) {
    throw new BadInputError(`${where} is not a complete bundle: ${file} is missing; copy it again from the connected side, where \`prestage bundle create\` with the same arguments repairs it`);
  }
  try {
    const doc = JSON.parse(text) as unknown;
    if (doc && typeof doc === 'object') return doc;
  } catch {
    // reported below
  }
  throw new BadInputError(`${where}: ${file} is not a JSON object; the bundle is damaged, create it again`);
}
