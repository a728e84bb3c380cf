/**
 * The sets to apply, from a plan or from PinnedImageSet manifests (what `plan -o yaml` and
 * `--output-dir` write, or hand-written ones), and back to a PinnedImageSet object.
 */
import { DISK_BYTES_ANNOTATION, ROLE_ANNOTATION } from '../api/set-metadata.js';
import { BadInputError } from '../errors.js';
import { POOL_ROLE_LABEL } from '../plan/assemble.js';
import type { Plan, SetRole } from '../plan/types.js';
import { toPinnedImageSet } from '../render/pinned-image-sets.js';
import type { DesiredSet } from './backend.js';
import type { KubeObject } from '../kube/client.js';


export function desiredSetsFromPlan(plan: Plan): DesiredSet[] {
  const byPullSpec = new Map(plan.images.map((i) => [i.pullSpec, i]));
  return plan.sets.map((set) => {
    const object = toPinnedImageSet(plan, set);
    return { name: set.name, role: set.role, labels: object.metadata.labels, annotations: object.metadata.annotations, images: set.images, diskBytes: set.diskBytes, mcoCheckBytes: mcoCheckBytes(plan, set.images, byPullSpec) };
  });
}

/**
 * What MCO's disk check counts for a set: `podman manifest inspect` of each image, its layers'
 * compressed sizes, a layer once (the daemon caches layer digests), configs not at all; a
 * manifest list has no layers, so the components of a `-multi` release count 0.
 */
export function mcoCheckBytes(plan: Plan, images: readonly string[], byPullSpec: ReadonlyMap<string, Plan['images'][number]> = new Map(plan.images.map((i) => [i.pullSpec, i]))): number {
  const layers = new Map<string, number>();
  for (const pullSpec of images) {
    const image = byPullSpec.get(pullSpec);
    if (!image || (plan.release.multiArch && image.source === 'component')) continue;
    for (const layer of image.layers) layers.set(layer.digest, layer.compressedBytes);
  }
  return [...layers.values()].reduce((a, b) => a + b, 0);
}

/** PinnedImageSet manifests of either API group; anything else is bad input. */
export function desiredSetsFromManifests(objects: readonly unknown[], source: string): DesiredSet[] {
  const sets: DesiredSet[] = [];
  for (const o of objects) {
    if (o === null || o === undefined) continue;
    const object = o as Partial<KubeObject> & { spec?: { pinnedImages?: Array<{ name?: unknown }> } };
    // A GitOps directory from `plan --output-dir` also holds its kustomization.yaml.
    if (object.kind === 'Kustomization') continue;
    const name = object.metadata?.name;
    if (object.kind !== 'PinnedImageSet' || !name) throw new BadInputError(`${source}: expected PinnedImageSet objects with a name, found ${object.kind ?? 'an object without kind'}`);
    const images = (object.spec?.pinnedImages ?? []).map((i) => i.name);
    if (!images.length || images.some((i) => typeof i !== 'string')) throw new BadInputError(`${source}: PinnedImageSet ${name} has no spec.pinnedImages[].name`);
    const labels = object.metadata?.labels ?? {};
    const annotations = object.metadata?.annotations ?? {};
    const diskBytes = Number(annotations[DISK_BYTES_ANNOTATION]);
    sets.push({ name, role: roleOf(name, labels, annotations, source), labels, annotations, images: images as string[], ...(Number.isFinite(diskBytes) && diskBytes > 0 ? { diskBytes } : {}) });
  }
  return sets;
}

function roleOf(name: string, labels: Record<string, string>, annotations: Record<string, string>, source: string): SetRole {
  const role = annotations[ROLE_ANNOTATION] ?? { master: 'control-plane', worker: 'worker' }[labels[POOL_ROLE_LABEL] ?? ''];
  if (role === 'control-plane' || role === 'worker') return role;
  throw new BadInputError(`${source}: PinnedImageSet ${name} needs label ${POOL_ROLE_LABEL}: master|worker or annotation ${ROLE_ANNOTATION}`);
}

export function toPinnedImageSetObject(set: DesiredSet, apiVersion: string): KubeObject {
  return {
    apiVersion,
    kind: 'PinnedImageSet',
    metadata: { name: set.name, labels: { ...set.labels, 'app.kubernetes.io/managed-by': 'prestage' }, annotations: { ...set.annotations } },
    spec: { pinnedImages: set.images.map((name) => ({ name })) },
  };
}
