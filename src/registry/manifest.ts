/**
 * Image manifests: the four media types a release can use, parsing with validation, and
 * picking one platform out of a manifest list or OCI index.
 */
import { RegistryError } from '../errors.js';
import { isDigest } from './reference.js';

export const MediaType = {
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
} as const;

/** Accept header for manifest GETs: every type we can read, and nothing (schema1) we cannot. */
export const MANIFEST_ACCEPT = Object.values(MediaType).join(', ');

export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly platform?: Platform;
  readonly annotations?: Record<string, string>;
}

export interface Platform {
  readonly architecture: string;
  readonly os: string;
  readonly variant?: string;
}

export interface ImageManifest {
  readonly kind: 'image';
  readonly mediaType: string;
  readonly config: Descriptor;
  readonly layers: readonly Descriptor[];
}

export interface ManifestList {
  readonly kind: 'list';
  readonly mediaType: string;
  readonly manifests: readonly Descriptor[];
}

export type Manifest = ImageManifest | ManifestList;

/** Parse manifest bytes; `contentType` is the registry's Content-Type, used when the body has no mediaType (OCI allows that). */
export function parseManifest(bytes: Buffer, contentType: string | undefined, where: string): Manifest {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw new RegistryError(`${where}: manifest is not JSON`);
  }
  const mediaType = typeof doc.mediaType === 'string' ? doc.mediaType : (contentType ?? '').split(';')[0]!.trim();
  if (doc.schemaVersion !== 2) throw new RegistryError(`${where}: unsupported manifest schemaVersion ${String(doc.schemaVersion)} (only schema 2 / OCI)`);
  if (mediaType === MediaType.dockerList || mediaType === MediaType.ociIndex || (Array.isArray(doc.manifests) && !doc.layers)) {
    const manifests = descriptors(doc.manifests, `${where}: manifests`);
    return { kind: 'list', mediaType: mediaType || MediaType.ociIndex, manifests };
  }
  if (mediaType === MediaType.dockerManifest || mediaType === MediaType.ociManifest || mediaType === '') {
    const [config] = descriptors([doc.config], `${where}: config`);
    return { kind: 'image', mediaType: mediaType || MediaType.ociManifest, config: config!, layers: descriptors(doc.layers, `${where}: layers`) };
  }
  throw new RegistryError(`${where}: unsupported manifest media type ${mediaType}`);
}

function descriptors(value: unknown, where: string): Descriptor[] {
  if (!Array.isArray(value)) throw new RegistryError(`${where} missing`);
  return value.map((d: unknown, i) => {
    const o = (d ?? {}) as Record<string, unknown>;
    if (typeof o.digest !== 'string' || !isDigest(o.digest)) throw new RegistryError(`${where}[${i}]: digest ${String(o.digest)} is not sha256:<64 hex>`);
    if (typeof o.size !== 'number' || !Number.isSafeInteger(o.size) || o.size < 0) throw new RegistryError(`${where}[${i}]: invalid size`);
    const p = o.platform as Record<string, unknown> | undefined;
    return {
      mediaType: typeof o.mediaType === 'string' ? o.mediaType : '',
      digest: o.digest,
      size: o.size,
      ...(p && typeof p.architecture === 'string' ? { platform: { architecture: p.architecture, os: String(p.os ?? ''), ...(typeof p.variant === 'string' ? { variant: p.variant } : {}) } } : {}),
      ...(o.annotations && typeof o.annotations === 'object' ? { annotations: o.annotations as Record<string, string> } : {}),
    };
  });
}

/** OpenShift and Go names for the same architectures. */
const ARCH_ALIASES: Record<string, string> = { x86_64: 'amd64', aarch64: 'arm64' };

export function normaliseArch(arch: string): string {
  return ARCH_ALIASES[arch] ?? arch;
}

/** The linux manifest for `arch` in a list, or undefined. */
export function selectPlatform(list: ManifestList, arch: string): Descriptor | undefined {
  const want = normaliseArch(arch);
  return list.manifests.find((m) => m.platform?.os === 'linux' && m.platform.architecture === want);
}

export function listArchitectures(list: ManifestList): string[] {
  return list.manifests.filter((m) => m.platform).map((m) => `${m.platform!.os}/${m.platform!.architecture}${m.platform!.variant ? `/${m.platform!.variant}` : ''}`);
}
