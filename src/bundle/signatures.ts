/**
 * Signatures a bundle carries so the disconnected cluster accepts what it brings:
 * - the release's GPG signatures (for the CVO), as blobs of the layout named in
 *   prestage-bundle.json, with the armored keys that verified them; `push` turns them into the
 *   ConfigMap the CVO reads in a disconnected cluster;
 * - the sigstore attachments (`<repo>:sha256-<hex>.sig`, for CRI-O), as ordinary images of the
 *   layout named by their tag, pushed next to the images they sign.
 */
import type { KeyObject } from 'node:crypto';
import type { RegistryClient } from '../registry/client.js';
import { parseManifest } from '../registry/manifest.js';
import { formatReference, parseReference, type ImageReference } from '../registry/reference.js';
import { inspectReleaseSignature, verifyReleaseSignature, type VerificationKeys } from '../signatures/release-gpg.js';
import { fetchSigstoreAttachment, SIGSTORE_PAYLOAD_MEDIA_TYPE, signedDigestOfTag, sigstoreTag, verifySigstoreSignature, type SignedIdentityRule } from '../signatures/sigstore.js';
import { manifestBlobs, type BundleImage } from './content.js';
import { REF_NAME, type Bundle, type IndexEntry, type ReleaseSignatureRecord } from './layout.js';

/**
 * The attachment that signs `digest` in `image`'s repository, as an image of the bundle; none
 * when the source has no such tag (releases older than the ClusterImagePolicy scopes).
 */
export async function collectSigstoreAttachment(client: RegistryClient, image: ImageReference, digest: string): Promise<BundleImage | undefined> {
  const fetched = await fetchSigstoreAttachment(client, image, digest);
  if (!fetched) return undefined;
  const repository = { registry: image.registry, repository: image.repository };
  const tag = sigstoreTag(digest);
  return {
    pullSpec: `${formatReference(repository)}:${tag}`,
    ref: { ...repository, tag, digest: fetched.digest },
    manifests: [{ digest: fetched.digest, mediaType: fetched.manifest.mediaType, bytes: fetched.bytes }],
    blobs: manifestBlobs(fetched.manifest),
    signs: digest,
  };
}

/** The index entries that are sigstore attachments, with the digest each signs. */
export function attachmentEntries(bundle: Pick<Bundle, 'index'>): Array<{ entry: IndexEntry; signs: string }> {
  return bundle.index.manifests.flatMap((entry) => {
    const signs = signedDigestOfTag(parseReference(entry.annotations[REF_NAME]).tag);
    return signs === undefined ? [] : [{ entry, signs }];
  });
}

export interface SigstoreCheck {
  readonly attachments: number;
  readonly signatures: number;
  /** Payloads a previous bundle (`--since`) carries: checked when that bundle was. */
  readonly previous: number;
  /** One line per signature that does not verify. */
  readonly problems: readonly string[];
}

/**
 * Every attachment's signatures checked against `key` (`--sigstore-key`), from the layout's
 * verified blobs, and their identity against the repository the image is pulled as (its source
 * repository, which the attachment's name carries) under the policy's `rule`.
 */
export async function checkSigstoreAttachments(bundle: Pick<Bundle, 'index' | 'metadata'>, read: (digest: string) => Promise<Buffer>, key: KeyObject, rule: SignedIdentityRule): Promise<SigstoreCheck> {
  const external = new Set(bundle.metadata.previous?.blobs.map((b) => b.digest) ?? []);
  const problems: string[] = [];
  let signatures = 0;
  let previous = 0;
  const attachments = attachmentEntries(bundle);
  for (const { entry, signs } of attachments) {
    const where = entry.annotations[REF_NAME];
    const ref = parseReference(where);
    const expected = { repository: `${ref.registry}/${ref.repository}`, rule };
    const manifest = parseManifest(await read(entry.digest), undefined, where);
    const layers = manifest.kind === 'image' ? manifest.layers.filter((l) => l.mediaType === SIGSTORE_PAYLOAD_MEDIA_TYPE) : [];
    if (layers.length === 0) problems.push(`${where}: holds no ${SIGSTORE_PAYLOAD_MEDIA_TYPE} layer`);
    for (const layer of layers) {
      if (external.has(layer.digest)) {
        previous++;
        continue;
      }
      signatures++;
      const verdict = verifySigstoreSignature(await read(layer.digest), layer.annotations, signs, key, expected);
      if (!verdict.ok) problems.push(`${where}: signature ${layer.digest}: ${verdict.detail}`);
    }
  }
  return { attachments: attachments.length, signatures, previous, problems };
}

export interface ReleaseSignatureCheck {
  /** Signatures that passed: verified against `keys`, or without keys only well-formed for the release. */
  readonly passed: number;
  /** False without trust anchors: integrity only, no signer proven. */
  readonly anchored: boolean;
  /** The key ids the signatures claim (integrity only): information, never trust. */
  readonly claimed: readonly string[];
  readonly problems: readonly string[];
}

/**
 * The release signatures a bundle carries, checked again. With `keys` (what the user or the
 * cluster trusts) each must verify. Without, each must be well-formed and sign the release's
 * digest, and that is all: the keys the bundle stores came with the bundle, so whoever could
 * swap a signature could swap them too; they are never used as anchors.
 */
export async function checkReleaseSignatures(record: ReleaseSignatureRecord, read: (digest: string) => Promise<Buffer>, keys?: VerificationKeys): Promise<ReleaseSignatureCheck> {
  const problems: string[] = [];
  const claimed = new Set<string>();
  let passed = 0;
  for (const [i, blob] of record.signatures.entries()) {
    const bytes = await read(blob.digest);
    const verdict = keys ? await verifyReleaseSignature(bytes, record.digest, keys) : await inspectReleaseSignature(bytes, record.digest);
    if (!verdict.ok) {
      problems.push(`release signature ${i + 1} (${blob.digest}): ${verdict.detail}`);
      continue;
    }
    passed++;
    if ('keyId' in verdict) claimed.add(verdict.keyId);
  }
  return { passed, anchored: keys !== undefined, claimed: [...claimed], problems };
}
