/**
 * Where a bundle's images go in the site's mirror registry, and the cluster configuration
 * that sends CRI-O there: `REGISTRY/PREFIX/<source repository path>`, or with a
 * `SOURCE=REGISTRY/PATH` target the source prefix replaced exactly as `--mirror` and an
 * ImageDigestMirrorSet replace it; a `source=mirror` mapping, and an ImageDigestMirrorSet.
 * PinnedImageSets keep the source pullspecs; the ImageDigestMirrorSet makes those digest
 * pulls resolve through the mirror.
 */
import yaml from 'js-yaml';
import { BadInputError } from '../errors.js';
import { applyMirrors, parseMirrorRule, type MirrorRule } from '../registry/mirrors.js';
import { formatReference, parseReference, type ImageReference } from '../registry/reference.js';

export interface MirrorTarget {
  /** Host[:port] of the mirror registry. */
  readonly registry: string;
  /** Repository path prefix inside it; may be empty. */
  readonly prefix: string;
  /** `SOURCE=MIRROR` targets: images under `rule.source` go where the same `--mirror` rule reads them. */
  readonly rule?: MirrorRule;
}

export interface MirroredImage {
  /** Source pullspec by digest. */
  readonly source: string;
  /** Mirror pullspec by the same digest. */
  readonly mirror: string;
}

export function parseMirrorTarget(text: string): MirrorTarget {
  if (text.includes('=')) {
    const rule = parseMirrorRule(text);
    return { ...parseMirrorTarget(rule.mirror), rule };
  }
  const trimmed = text.trim().replace(/\/+$/, '');
  const host = trimmed.split('/')[0] ?? '';
  let probe: ImageReference | undefined;
  try {
    probe = parseReference(`${trimmed}/probe`);
  } catch {
    probe = undefined;
  }
  if (!probe || probe.registry !== host || probe.tag || probe.digest) {
    throw new BadInputError(`invalid push target "${text}": expected REGISTRY[/PREFIX] with a host name or host:port, e.g. mirror.example.com:5000/ocp`);
  }
  return { registry: probe.registry, prefix: probe.repository.slice(0, -'probe'.length).replace(/\/$/, '') };
}

/**
 * `quay.io/openshift-release-dev/ocp-v4.0-art-dev` → `<prefix>/openshift-release-dev/ocp-v4.0-art-dev`,
 * or with rule `quay.io/openshift-release-dev=<registry>/ocp`, `ocp/ocp-v4.0-art-dev`.
 */
export function mirrorRepository(source: ImageReference, target: MirrorTarget): string {
  if (!target.rule) return target.prefix ? `${target.prefix}/${source.repository}` : source.repository;
  const moved = applyMirrors(source, [target.rule]);
  if (moved === source) {
    throw new BadInputError(`${formatReference(source)} is not under ${target.rule.source}, so push target ${target.rule.source}=${target.rule.mirror} has no place for it; push to REGISTRY[/PREFIX] instead, which keeps every source repository path`);
  }
  return moved.repository;
}

export function mirroredImage(sourcePullSpec: string, target: MirrorTarget): MirroredImage {
  const source = parseReference(sourcePullSpec);
  return { source: sourcePullSpec, mirror: formatReference({ registry: target.registry, repository: mirrorRepository(source, target), ...(source.digest ? { digest: source.digest } : {}) }) };
}

/**
 * Source repository → mirror repository, refusing two sources that would land in one mirror
 * repository (same path on two registries): their digests would be served for each other.
 */
export function repositoryMirrors(images: readonly MirroredImage[]): Map<string, string> {
  const bySource = new Map<string, string>();
  const byMirror = new Map<string, string>();
  for (const { source, mirror } of images) {
    const s = repositoryOf(source);
    const m = repositoryOf(mirror);
    const other = byMirror.get(m);
    if (other !== undefined && other !== s) {
      throw new BadInputError(`${other} and ${s} would both be mirrored to ${m}; push them with different prefixes`);
    }
    byMirror.set(m, s);
    bySource.set(s, m);
  }
  return new Map([...bySource].sort(([a], [b]) => a.localeCompare(b)));
}

function repositoryOf(pullSpec: string): string {
  const ref = parseReference(pullSpec);
  return `${ref.registry}/${ref.repository}`;
}

/** `mapping.txt`: `source=mirror`, one image per line, sorted. */
export function renderMapping(images: readonly MirroredImage[]): string {
  return [...images].map((i) => `${i.source}=${i.mirror}`).sort().join('\n') + '\n';
}

export function renderImageDigestMirrorSet(name: string, images: readonly MirroredImage[]): string {
  const doc = {
    apiVersion: 'config.openshift.io/v1',
    kind: 'ImageDigestMirrorSet',
    metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'prestage' } },
    spec: { imageDigestMirrors: [...repositoryMirrors(images)].map(([source, mirror]) => ({ source, mirrors: [mirror] })) },
  };
  return yaml.dump(doc, { lineWidth: -1, noRefs: true, sortKeys: false });
}
