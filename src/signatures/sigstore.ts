/**
 * Sigstore signatures as CRI-O finds them (containers/image with `use-sigstore-attachments`):
 * the tag `<repo>:sha256-<hex>.sig` next to the image, ON THE REGISTRY THE NODE PULLS FROM, an
 * OCI image manifest whose layers are simple-signing payloads, each signed in the layer
 * annotation `dev.cosignproject.cosign/signature`. A mirror that lacks the tag fails every pull
 * that a `sigstoreSigned` policy covers (the `openshift` ClusterImagePolicy from 4.21).
 */
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { BadInputError } from '../errors.js';
import { ManifestNotFoundError, type FetchedManifest, type RegistryClient } from '../registry/client.js';
import type { ImageManifest } from '../registry/manifest.js';
import { isDigest, parseReference, type ImageReference } from '../registry/reference.js';

export const SIGSTORE_PAYLOAD_MEDIA_TYPE = 'application/vnd.dev.cosign.simplesigning.v1+json';
export const SIGSTORE_SIGNATURE_ANNOTATION = 'dev.cosignproject.cosign/signature';
/** containers/image accepts this payload type only (signature/internal/sigstore_payload.go). */
export const SIGSTORE_PAYLOAD_TYPE = 'cosign container image signature';

const TAG = /^sha256-([0-9a-f]{64})\.sig$/;

/** The attachment tag of an image digest: `sha256:<hex>` → `sha256-<hex>.sig`. */
export function sigstoreTag(digest: string): string {
  if (!isDigest(digest)) throw new BadInputError(`${digest} is not a sha256 digest`);
  return `${digest.replace(':', '-')}.sig`;
}

/** The digest an attachment tag signs, or undefined for any other tag. */
export function signedDigestOfTag(tag: string | undefined): string | undefined {
  const hex = tag === undefined ? undefined : TAG.exec(tag)?.[1];
  return hex === undefined ? undefined : `sha256:${hex}`;
}

/**
 * The attachment that signs `digest` in `image`'s repository, read and verified; none when the
 * registry has no such tag (releases older than the ClusterImagePolicy scopes) or holds
 * something other than an image manifest there, which containers/image would not read either.
 */
export async function fetchSigstoreAttachment(client: RegistryClient, image: Pick<ImageReference, 'registry' | 'repository'>, digest: string): Promise<(FetchedManifest & { manifest: ImageManifest }) | undefined> {
  let fetched: FetchedManifest;
  try {
    fetched = await client.fetchManifest({ registry: image.registry, repository: image.repository }, sigstoreTag(digest));
  } catch (err) {
    if (err instanceof ManifestNotFoundError) return undefined;
    throw err;
  }
  const { manifest } = fetched;
  return manifest.kind === 'image' ? { ...fetched, manifest } : undefined;
}

/**
 * A `--sigstore-key` file: a PEM public key (ECDSA as cosign makes, RSA as Red Hat's
 * ClusterImagePolicy carries, or Ed25519), the `keyPath` of a `sigstoreSigned` policy.
 */
export function readSigstoreKey(text: string, where: string): KeyObject {
  const fix = 'pass the PEM public key the ClusterImagePolicy trusts (-----BEGIN PUBLIC KEY-----)';
  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text)) throw new BadInputError(`${where} is a private key; ${fix}`);
  let key: KeyObject;
  try {
    key = createPublicKey(text);
  } catch {
    throw new BadInputError(`${where} is not a PEM public key; ${fix}`);
  }
  if (!['ec', 'rsa', 'ed25519'].includes(key.asymmetricKeyType ?? '')) {
    throw new BadInputError(`${where} is a ${key.asymmetricKeyType} key; sigstore keys are ECDSA, RSA or Ed25519: ${fix}`);
  }
  return key;
}

/**
 * The `signedIdentity` of a `sigstoreSigned` policy, as containers/image judges it for an image
 * pulled by digest (a PinnedImageSet's pullspec), against the name the node pulls by (the
 * source repository: a mirror does not change it). `matchRepoDigestOrExact` (the
 * ClusterImagePolicy's default matchPolicy): the same repository, and the signature names a tag
 * or digest; `matchRepository`: the same repository.
 */
export const SIGNED_IDENTITY_RULES = ['matchRepoDigestOrExact', 'matchRepository'] as const;
export type SignedIdentityRule = (typeof SIGNED_IDENTITY_RULES)[number];

export interface ExpectedIdentity {
  /** The source repository the image is pulled by: `quay.io/openshift-release-dev/ocp-v4.0-art-dev`. */
  readonly repository: string;
  readonly rule: SignedIdentityRule;
}

/** Why `dockerReference` is not an identity CRI-O accepts for `expected`, or undefined when it is. */
export function identityMismatch(dockerReference: string, expected: ExpectedIdentity): string | undefined {
  let signed: ImageReference;
  try {
    signed = parseReference(dockerReference);
  } catch {
    return `its identity ${JSON.stringify(dockerReference)} is not an image reference`;
  }
  const name = `${signed.registry}/${signed.repository}`;
  if (name !== expected.repository) return `it names ${dockerReference}, not the repository ${expected.repository} the image is pulled as (signedIdentity ${expected.rule})`;
  // A name without tag or digest stays name-only (no default tag): matchRepoDigestOrExact refuses it.
  if (expected.rule === 'matchRepoDigestOrExact' && signed.tag === undefined && signed.digest === undefined) {
    return `it names the repository ${dockerReference} without a tag or digest, which signedIdentity matchRepoDigestOrExact refuses (the policy would need matchRepository)`;
  }
  return undefined;
}

export type SigstoreVerdict =
  | { readonly ok: true; readonly identity: string }
  | { readonly ok: false; readonly detail: string };

/**
 * One signature of an attachment, checked as containers/image's policy does for a public key:
 * the signature over the payload's exact bytes, then the payload's type, that it signs
 * `imageDigest`, and that its identity (`docker-reference`) is one the policy's
 * `signedIdentity` accepts for the repository the node pulls by.
 */
export function verifySigstoreSignature(payload: Buffer, annotations: Readonly<Record<string, string>> | undefined, imageDigest: string, key: KeyObject, expected: ExpectedIdentity): SigstoreVerdict {
  const encoded = annotations?.[SIGSTORE_SIGNATURE_ANNOTATION];
  if (!encoded) return { ok: false, detail: `the layer has no ${SIGSTORE_SIGNATURE_ANNOTATION} annotation` };
  const signature = Buffer.from(encoded, 'base64');
  let valid = false;
  try {
    valid = verify(key.asymmetricKeyType === 'ed25519' ? null : 'sha256', payload, key, signature);
  } catch {
    valid = false;
  }
  if (!valid) return { ok: false, detail: 'the signature does not match the payload under the given key (another key signed it, or it was altered)' };
  let critical: { type?: unknown; image?: { 'docker-manifest-digest'?: unknown }; identity?: { 'docker-reference'?: unknown } } | undefined;
  try {
    critical = (JSON.parse(payload.toString('utf8')) as { critical?: typeof critical }).critical;
  } catch {
    return { ok: false, detail: 'the signed payload is not JSON' };
  }
  if (critical?.type !== SIGSTORE_PAYLOAD_TYPE) return { ok: false, detail: `the payload's type is ${JSON.stringify(critical?.type)}, not "${SIGSTORE_PAYLOAD_TYPE}"` };
  const signed = critical.image?.['docker-manifest-digest'];
  if (signed !== imageDigest) return { ok: false, detail: `it signs ${String(signed)}, not ${imageDigest}` };
  const identity = critical.identity?.['docker-reference'];
  if (typeof identity !== 'string' || !identity) return { ok: false, detail: 'it names no identity (critical.identity.docker-reference)' };
  const mismatch = identityMismatch(identity, expected);
  return mismatch ? { ok: false, detail: mismatch } : { ok: true, identity };
}
