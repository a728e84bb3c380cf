/**
 * Node OS streams (pure): which of a release's node OS images the nodes will boot. Newer releases
 * carry a second stream (`rhel-coreos-10`, `rhel-coreos-10-extensions`) beside `rhel-coreos`; no
 * manifest references either, and each is gigabytes per node, so only the streams the pools use
 * are pinned (FACTS §1b). As MCO reads them (`pkg/osimagestream`): an OS image is a tag that
 * matches its tag rule or is built from github.com/openshift/os, its stream the image label
 * `io.openshift.os.streamclass` (here the tag without `-extensions` when the label is unknown).
 *
 * Which streams: live, what each pool boots (its `spec.osImageStream`, else the cluster's default
 * stream, OSImageStream `cluster`), on that pool's nodes (the master pool's are control-plane);
 * offline the stream of the image
 * the release's `machine-config-osimageurl` ConfigMap names as `baseOSContainerImage` (the
 * cluster-wide OS image of every pool that names no stream), else MCO's built-in default
 * (`rhel-9` on 4.x, `rhel-10` from 5.0); `--os-stream NAME` adds a stream. A profile without the machine-config operator
 * (HyperShift) rebases no node from a pinned copy: no OS image at all.
 */
import { BadInputError } from '../errors.js';
import type { ComponentImage } from '../release/image-references.js';
import type { ManifestDocument } from '../release/documents.js';
import type { Classification } from './types.js';
import type { ImageRole } from './types.js';

/** MCO's tag rule for OS and extensions images (`imagestream_source.go` `imageTagRegxpr`). */
const OS_TAG = /^(rhel|stream)[a-zA-Z0-9.-]*-coreos[a-zA-Z0-9.-]*(-extensions[a-zA-Z0-9.-]*)?$/;
/** Older names of the node OS image (4.x before streams, OKD, FCOS). */
export const NODE_OS_IMAGE = /^(machine-os-content|rhel-coreos.*|rhcos.*|centos-stream-coreos.*|fedora-coreos.*)$/;
export const STREAM_LABEL = 'io.openshift.os.streamclass';
const OS_SOURCE = 'github.com/openshift/os';

export interface OsImage {
  readonly component: ComponentImage;
  readonly stream: string;
  readonly extensions: boolean;
}

export function isNodeOsImage(c: ComponentImage): boolean {
  return isNodeOsImageName(c.names) || (c.annotations['io.openshift.build.source-location'] ?? '').includes(OS_SOURCE);
}

/** By its release tag names alone (what a plan keeps of an image). */
export function isNodeOsImageName(names: readonly string[]): boolean {
  return names.some((n) => NODE_OS_IMAGE.test(n) || OS_TAG.test(n));
}

/** The release's node OS images with their streams; `labels`: image config labels where read. */
export function osImagesOf(components: readonly ComponentImage[], labels: ReadonlyMap<string, Readonly<Record<string, string>>>): OsImage[] {
  return components.filter(isNodeOsImage).map((component) => {
    const own = labels.get(component.digest) ?? {};
    const extensions = own['io.openshift.os.extensions'] === 'true' || /-extensions/.test(component.name);
    const stream = own[STREAM_LABEL] || component.name.replace(/-extensions.*$/, '');
    return { component, stream, extensions };
  });
}

/** Where the stream choice comes from. */
export interface StreamInputs {
  /** `--os-stream`: streams pinned besides those the nodes use by default. */
  readonly requested: readonly string[];
  /** A live cluster's view: its default stream and its pools, with the stream each names (none: the default). */
  readonly live?: { readonly defaultStream?: string; readonly pools: ReadonlyArray<{ readonly pool: string; readonly stream?: string }> };
  /** The release's major version (MCO's built-in default). */
  readonly major: number;
  /** Whether the profile runs the machine-config operator. */
  readonly mco: boolean;
  readonly profile: string;
}

export interface StreamChoice {
  readonly available: readonly string[];
  /** False: the profile runs no machine-config operator, so no stream is pinned. */
  readonly mco: boolean;
  readonly pinned: readonly string[];
  /** Where each pinned stream goes: live, the roles of the pools that boot it (the master pool's nodes are control-plane). */
  readonly roles: Readonly<Record<string, ImageRole>>;
  /** Why these streams, for the evidence. */
  readonly why: string;
}

const everywhere = (streams: Iterable<string>): Record<string, ImageRole> => Object.fromEntries([...streams].map((s) => [s, 'all' as const]));

/** The release's default stream: the one `baseOSContainerImage` of `machine-config-osimageurl` names. */
export function releaseDefaultStream(images: readonly OsImage[], documents: readonly ManifestDocument[], major: number): { stream: string; why: string } | undefined {
  const streams = [...new Set(images.map((i) => i.stream))].sort();
  if (streams.length === 0) return undefined;
  for (const { doc } of documents) {
    if (doc.kind !== 'ConfigMap' || (doc.metadata as { name?: unknown } | undefined)?.name !== 'machine-config-osimageurl') continue;
    const base = (doc.data as Record<string, unknown> | undefined)?.baseOSContainerImage;
    const digest = typeof base === 'string' ? /@(sha256:[a-f0-9]{64})/.exec(base)?.[1] : undefined;
    const image = images.find((i) => i.component.digest === digest);
    if (image) return { stream: image.stream, why: `the release's default (machine-config-osimageurl baseOSContainerImage is ${image.component.name})` };
  }
  if (streams.length === 1) return { stream: streams[0]!, why: 'the release\'s only stream' };
  const builtin = major >= 5 ? 'rhel-10' : 'rhel-9';
  if (streams.includes(builtin)) return { stream: builtin, why: `MCO's built-in default for ${major}.x` };
  return { stream: streams[0]!, why: 'the first stream by name (the release names no default)' };
}

export function chooseStreams(images: readonly OsImage[], documents: readonly ManifestDocument[], inputs: StreamInputs): StreamChoice {
  const available = [...new Set(images.map((i) => i.stream))].sort();
  for (const name of inputs.requested) {
    if (!available.includes(name)) throw new BadInputError(`--os-stream ${name} is not a node OS stream of this release; it carries ${available.join(', ') || 'none'}`);
  }
  if (!inputs.mco) return { available, mco: false, pinned: [], roles: {}, why: `profile ${inputs.profile} runs no machine-config operator, so no node rebases to an OS image from a pinned copy` };
  const fallback = releaseDefaultStream(images, documents, inputs.major);
  if (inputs.live) {
    const defaultStream = inputs.live.defaultStream ?? fallback?.stream;
    const defaultWhy = inputs.live.defaultStream ? 'the cluster\'s default (OSImageStream cluster)' : fallback?.why;
    // The master pool's nodes are control-plane, every other pool's workers; no pools served: every node boots the default.
    type Boot = { readonly stream: string | undefined; readonly roles: ReadonlyArray<'control-plane' | 'worker'>; readonly why: string | undefined };
    const boots: Boot[] = inputs.live.pools.length > 0
      ? inputs.live.pools.map((p) => ({ stream: p.stream ?? defaultStream, roles: p.pool === 'master' ? ['control-plane'] : ['worker'], why: p.stream ? `pool ${p.pool}` : `pool ${p.pool} (${defaultWhy})` }))
      : [{ stream: defaultStream, roles: ['control-plane', 'worker'], why: defaultWhy }];
    const roles = new Map<string, Set<'control-plane' | 'worker'>>();
    const whys = new Map<string, string[]>();
    for (const boot of boots) {
      if (!boot.stream) continue;
      roles.set(boot.stream, new Set([...(roles.get(boot.stream) ?? []), ...boot.roles]));
      whys.set(boot.stream, [...(whys.get(boot.stream) ?? []), boot.why ?? 'the default']);
    }
    for (const stream of inputs.requested) {
      roles.set(stream, new Set(['control-plane', 'worker']));
      whys.set(stream, [...(whys.get(stream) ?? []), '--os-stream']);
    }
    const pinned = [...roles.keys()].filter((s) => available.includes(s)).sort();
    const missing = [...roles.keys()].filter((s) => !available.includes(s));
    const why = pinned.map((s) => `${s}: ${whys.get(s)!.join(', ')}`).join('; ');
    return {
      available,
      mco: true,
      pinned,
      roles: Object.fromEntries(pinned.map((s) => [s, roles.get(s)!.size === 2 ? 'all' : [...roles.get(s)!][0]!])),
      why: `${why}${missing.length > 0 ? `; the cluster names ${missing.join(', ')}, which this release does not carry` : ''}`,
    };
  }
  const pinned = new Set([...(fallback ? [fallback.stream] : []), ...inputs.requested]);
  const why = [...(fallback ? [`${fallback.stream}: ${fallback.why}`] : []), ...inputs.requested.filter((s) => s !== fallback?.stream).map((s) => `${s}: --os-stream`)].join('; ');
  return { available, mco: true, pinned: [...pinned].sort(), roles: everywhere(pinned), why: why || 'the release names no stream' };
}

/** The OS images' classifications under the chosen streams: pinned where their pools' nodes are, or in no set with why. */
export function classifyOsImages(images: readonly OsImage[], choice: StreamChoice, classifications: Map<string, Classification>): void {
  for (const image of images) {
    const what = `node OS ${image.extensions ? 'extensions ' : ''}image of stream ${image.stream}`;
    if (choice.pinned.includes(image.stream)) {
      classifications.set(image.component.digest, {
        role: choice.roles[image.stream] ?? 'all',
        evidence: [`${what}, which the nodes boot (${choice.why}): the nodes of its pools are rebased to it in the upgrade; MCO 4.17+ rebases from this pinned copy (its pool lists the set), 4.16 and the agent backend pull it from the registry again`],
      });
    } else {
      const hint = choice.mco ? `; --os-stream ${image.stream} pins it` : '';
      classifications.set(image.component.digest, { role: 'none', evidence: [`${what}, which no node boots (${choice.why})${hint}`] });
    }
  }
}
