/**
 * `release-manifests/image-references`: the ImageStream that lists a release's component
 * images. Validation is strict: a release that references images by tag cannot be pinned.
 */
import { BadInputError } from '../errors.js';
import { formatReference, parseReference } from '../registry/reference.js';

export interface ComponentImage {
  /** The first tag name (sorted); `names` has all tags that point at this digest. */
  readonly name: string;
  readonly names: readonly string[];
  /** `registry/repository@sha256:...` as the release names it (source, not mirror). */
  readonly pullSpec: string;
  readonly digest: string;
  readonly annotations: Readonly<Record<string, string>>;
}

export interface ImageReferences {
  readonly version: string;
  readonly components: readonly ComponentImage[];
  readonly warnings: readonly string[];
}

interface TagEntry {
  name?: unknown;
  annotations?: unknown;
  from?: { kind?: unknown; name?: unknown };
}

export function parseImageReferences(text: string, where: string): ImageReferences {
  const fail = (why: string): never => {
    throw new BadInputError(`${where}: release-manifests/image-references ${why}`);
  };
  let doc: Record<string, unknown> = {};
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch {
    fail('is not valid JSON');
  }
  if (doc.kind !== 'ImageStream' || doc.apiVersion !== 'image.openshift.io/v1') {
    fail(`has kind "${String(doc.kind)}" apiVersion "${String(doc.apiVersion)}"; an OpenShift release has kind ImageStream, apiVersion image.openshift.io/v1`);
  }
  const version = (doc.metadata as { name?: unknown } | undefined)?.name;
  if (typeof version !== 'string' || version === '') fail('has no metadata.name (the release version)');
  const tags = (doc.spec as { tags?: unknown } | undefined)?.tags;
  if (!Array.isArray(tags)) fail('has no spec.tags list');

  const warnings: string[] = [];
  const byDigest = new Map<string, { names: string[]; pullSpec: string; annotations: Record<string, string> }>();
  for (const [i, raw] of (tags as TagEntry[]).entries()) {
    const name = typeof raw?.name === 'string' ? raw.name : undefined;
    if (!name) fail(`spec.tags[${i}] has no name`);
    if (raw.from?.kind !== 'DockerImage') {
      warnings.push(`skipped tag ${name}: from.kind is ${String(raw.from?.kind)}, not DockerImage`);
      continue;
    }
    if (typeof raw.from.name !== 'string') fail(`tag ${name} has no from.name`);
    let ref;
    try {
      ref = parseReference(raw.from.name as string);
    } catch (err) {
      fail(`tag ${name}: ${(err as Error).message}`);
    }
    if (!ref!.digest) fail(`tag ${name} references ${String(raw.from.name)} by tag; a release must reference digests (sha256:...) to be pinned`);
    const pullSpec = formatReference({ registry: ref!.registry, repository: ref!.repository, digest: ref!.digest! });
    const seen = byDigest.get(ref!.digest!);
    if (seen) {
      seen.names.push(name!);
      continue;
    }
    byDigest.set(ref!.digest!, { names: [name!], pullSpec, annotations: stringRecord(raw.annotations) });
  }
  if (byDigest.size === 0) fail('lists no DockerImage tags');
  const components = [...byDigest.entries()]
    .map(([digest, c]) => {
      const names = [...c.names].sort();
      return { name: names[0]!, names, pullSpec: c.pullSpec, digest, annotations: c.annotations };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
  return { version: version as string, components, warnings };
}

function stringRecord(value: unknown): Record<string, string> {
  if (!value || typeof value !== 'object') return {};
  return Object.fromEntries(Object.entries(value as Record<string, unknown>).filter(([, v]) => typeof v === 'string')) as Record<string, string>;
}

export interface ReleaseMetadata {
  readonly version?: string;
  readonly channels: readonly string[];
  readonly previous: readonly string[];
  /** `multi` for heterogeneous releases; absent for single-arch ones. */
  readonly architecture?: string;
  readonly url?: string;
}

/** `release-manifests/release-metadata` (Cincinnati metadata); lenient, it only informs. */
export function parseReleaseMetadata(text: string, warnings: string[]): ReleaseMetadata {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch {
    warnings.push('release-metadata is not valid JSON; channels unknown');
    return { channels: [], previous: [] };
  }
  if (doc.kind !== 'cincinnati-metadata-v0') warnings.push(`release-metadata has kind ${String(doc.kind)}, expected cincinnati-metadata-v0`);
  const meta = (doc.metadata ?? {}) as Record<string, unknown>;
  const channels = typeof meta['io.openshift.upgrades.graph.release.channels'] === 'string'
    ? (meta['io.openshift.upgrades.graph.release.channels'] as string).split(',').map((c) => c.trim()).filter(Boolean).sort()
    : [];
  const arch = meta['release.openshift.io/architecture'];
  return {
    ...(typeof doc.version === 'string' ? { version: doc.version } : {}),
    channels,
    previous: Array.isArray(doc.previous) ? doc.previous.filter((p): p is string => typeof p === 'string') : [],
    ...(typeof arch === 'string' ? { architecture: arch } : {}),
    ...(typeof meta.url === 'string' ? { url: meta.url } : {}),
  };
}
