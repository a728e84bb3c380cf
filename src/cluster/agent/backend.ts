/**
 * The prestage-agent backend: sets are `prestage.dev/v1alpha1` PinnedImageSets that pick
 * nodes with `spec.nodeSelector`; progress is each node's NodePinnedImages status, which
 * carries per-image state and per-set bytes over unique layers (so `wait` can show bytes and an ETA).
 *
 * Node selection by role: the control-plane set goes to nodes labelled
 * `node-role.kubernetes.io/control-plane` (OpenShift and kubeadm set it on every control-plane
 * node); the worker set to nodes with neither that label nor the legacy `.../master`.
 */
import {
  GROUP,
  NODE_PINNED_IMAGES,
  PINNED_IMAGE_SETS,
  VERSION,
  type NodePinnedImages,
  type PinnedImageSet,
} from '../../api/prestage.js';
import { toAgentPinnedImageSet } from '../../api/desired-set.js';
import { MANAGED_BY_LABEL } from '../../api/set-metadata.js';
import { type NodeSetProgress, type PinningBackend, type ProgressSnapshot, type SetProgress } from '../backend.js';
import { matchesSelector, type KubeClient, type KubeObject, type LabelSelector } from '../../kube/client.js';
import { observedBackend, type ClusterView } from '../observed-backend.js';

const BASE = `/apis/${GROUP}/${VERSION}`;
export const AGENT_PATHS = {
  pinnedImageSets: `${BASE}/${PINNED_IMAGE_SETS}`,
  nodePinnedImages: `${BASE}/${NODE_PINNED_IMAGES}`,
  nodes: '/api/v1/nodes',
} as const;

export function agentBackend(client: KubeClient): PinningBackend {
  return observedBackend(client, {
    kind: 'agent',
    setsPath: AGENT_PATHS.pinnedImageSets,
    toObject: (set) => toAgentPinnedImageSet(set) as unknown as KubeObject,
    imagesOf: (object) => ((object as unknown as PinnedImageSet).spec?.pinnedImages ?? []).map((i) => i.name),
    collections: [AGENT_PATHS.pinnedImageSets, AGENT_PATHS.nodePinnedImages, AGENT_PATHS.nodes],
    project: projectAgent,
  });
}

/** Pure: the progress of `names` (default: prestage-managed sets) in one view of the cluster. */
export function projectAgent(view: ClusterView, names: readonly string[] | undefined): ProgressSnapshot {
  const sets = view.get(AGENT_PATHS.pinnedImageSets)! as unknown as ReadonlyMap<string, PinnedImageSet>;
  const statuses = view.get(AGENT_PATHS.nodePinnedImages)! as unknown as ReadonlyMap<string, NodePinnedImages>;
  const nodes = [...view.get(AGENT_PATHS.nodes)!.values()];
  const wanted = names ?? [...sets.values()].filter((s) => s.metadata.labels?.[MANAGED_BY_LABEL] === 'prestage').map((s) => s.metadata.name);
  const links = [...statuses.values()].flatMap((status) => (status.status?.link ? [status.status.link] : []));
  const caps = links.flatMap((link) => (link.capBytesPerSecond ? [link.capBytesPerSecond] : []));
  // A node's own report, bounded by the CRD; shown as it is (the table escapes it).
  const caches = [...statuses.values()]
    .flatMap((status) => {
      const route = status.status?.cache;
      if (!route || !Array.isArray(route.locations)) return [];
      const locations = route.locations.filter((location): location is string => typeof location === 'string').slice(0, 8);
      return [{ node: status.metadata.name, ...(typeof route.leaf === 'string' ? { leaf: route.leaf } : {}), locations }];
    })
    .sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
  return {
    ...(caches.length ? { caches } : {}),
    ...(links.length
      ? { link: { bytes: links.reduce((total, link) => total + link.bytes, 0), pendingBytes: links.reduce((total, link) => total + (link.pendingBytes ?? 0), 0), ...(caps.length ? { capBytesPerSecond: Math.min(...caps) } : {}) } }
      : {}),
    sets: [...new Set(wanted)].sort().map((name): SetProgress => {
      const set = sets.get(name);
      if (!set) return { name, exists: false, generation: 0, nodes: [] };
      const generation = set.metadata.generation ?? 1;
      const targets = nodes.filter((n) => matchesSelector(n.metadata.labels, set.spec.nodeSelector as LabelSelector | undefined)).map((n) => n.metadata.name).sort();
      return { name, exists: true, generation, nodes: targets.map((node) => nodeProgress(node, name, generation, set.metadata.uid, statuses.get(node))) };
    }),
  };
}

function nodeProgress(node: string, set: string, generation: number, uid: string | undefined, status: NodePinnedImages | undefined): NodeSetProgress {
  // An entry of another set of the same name (deleted and created again) says nothing of this one.
  const entry = status?.status?.pinnedImageSets?.find((s) => s.name === set && (!s.uid || !uid || s.uid === uid));
  const desiredGeneration = entry?.desiredGeneration ?? 0;
  const currentGeneration = entry?.currentGeneration ?? 0;
  const images = entry?.images ?? [];
  // Bytes are the set's own figure over its unique layers (shared layers once, as the plan
  // counts them), and only for the generation asked for: never a sum over images, which would
  // count shared layers again per image.
  const sized = entry?.bytes !== undefined && desiredGeneration === generation;
  const base = {
    node,
    set,
    // Paused, or outside its staging windows: said while it waits (a failure still wins).
    ...(entry?.waiting && currentGeneration !== desiredGeneration ? { note: entry.waiting } : {}),
    desiredGeneration,
    currentGeneration,
    ...(images.length ? { imagesTotal: images.length, imagesDone: images.filter((i) => i.state === 'Pulled' || i.state === 'Pinned').length } : {}),
    ...(sized ? { bytes: entry.bytes!, pulledBytes: Math.min(entry.pulledBytes ?? 0, entry.bytes!) } : {}),
  };
  if (desiredGeneration < generation) return { ...base, phase: 'pending' };
  if (currentGeneration === desiredGeneration) return { ...base, phase: 'done' };
  if (entry?.lastFailedGeneration !== undefined && entry.lastFailedGeneration >= desiredGeneration) {
    return { ...base, phase: 'degraded', error: entry.lastFailedGenerationError ?? 'failed' };
  }
  const failedImage = images.find((i) => i.state === 'Failed' && i.lastError);
  if (failedImage) return { ...base, phase: 'degraded', error: `${failedImage.name}: ${failedImage.lastError}` };
  return { ...base, phase: 'progressing' };
}
