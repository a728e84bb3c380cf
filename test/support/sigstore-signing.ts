/**
 * Sigstore signatures as `cosign sign --key` writes them, made by the tests with a key they
 * generate: a simple-signing payload for the image digest and identity, signed (ECDSA P-256,
 * SHA-256, DER) into the layer annotation, in an OCI manifest tagged `sha256-<hex>.sig` next
 * to the image. CRI-O's own policy code is what judges them in the tests.
 */
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { Readable } from 'node:stream';
import { DEFAULT_RETRY } from '../../src/registry/retry.js';
import { PushClient } from '../../src/registry/upload.js';
import { SIGSTORE_PAYLOAD_MEDIA_TYPE, SIGSTORE_PAYLOAD_TYPE, SIGSTORE_SIGNATURE_ANNOTATION, sigstoreTag } from '../../src/signatures/sigstore.js';

export interface SigstoreKeys {
  readonly privateKey: KeyObject;
  /** PEM (SPKI), as `cosign generate-key-pair` writes cosign.pub: the policy's keyPath. */
  readonly publicPem: string;
}

export function generateSigstoreKeys(): SigstoreKeys {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { privateKey, publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
}

export interface Attachment {
  readonly manifest: Buffer;
  readonly config: Buffer;
  readonly payload: Buffer;
}

const digestOf = (bytes: Buffer): string => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/** The attachment signing `imageDigest` as `identity` (the repository the policy matches, e.g. quay.io/org/repo). */
export function signAttachment(keys: Pick<SigstoreKeys, 'privateKey'>, imageDigest: string, identity: string, options: { payloadDigest?: string } = {}): Attachment {
  const payload = Buffer.from(JSON.stringify({
    critical: { identity: { 'docker-reference': identity }, image: { 'docker-manifest-digest': options.payloadDigest ?? imageDigest }, type: SIGSTORE_PAYLOAD_TYPE },
    optional: null,
  }));
  const signature = sign('sha256', payload, keys.privateKey).toString('base64');
  const config = Buffer.from(JSON.stringify({ architecture: '', created: '0001-01-01T00:00:00Z', history: [{ created: '0001-01-01T00:00:00Z' }], os: '', rootfs: { type: 'layers', diff_ids: [digestOf(payload)] }, config: {} }));
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', size: config.length, digest: digestOf(config) },
    layers: [{ mediaType: SIGSTORE_PAYLOAD_MEDIA_TYPE, size: payload.length, digest: digestOf(payload), annotations: { [SIGSTORE_SIGNATURE_ANNOTATION]: signature } }],
  }));
  return { manifest, config, payload };
}

/** Push attachments into `registry` (plain http): for each image digest of `repository`, its `.sig` tag. */
export async function pushAttachments(registry: string, repository: string, signed: ReadonlyArray<{ digest: string; attachment: Attachment }>): Promise<void> {
  const client = new PushClient(registry, { pullSecrets: [], insecureRegistries: [registry], stallTimeoutMs: 30_000, retry: DEFAULT_RETRY, concurrency: 8 });
  try {
    for (const { digest, attachment } of signed) {
      for (const blob of [attachment.config, attachment.payload]) {
        await client.uploadBlob(repository, { digest: digestOf(blob), size: blob.length }, () => Readable.from([blob]));
      }
      await client.putManifest(repository, digestOf(attachment.manifest), attachment.manifest, 'application/vnd.oci.image.manifest.v1+json', sigstoreTag(digest));
    }
  } finally {
    await client.close();
  }
}
