/**
 * New bytes per node (pure): what the sets of a role add to a node, against the layers of the
 * images it runs now. Layers are counted as containers/storage stores them: a layer is keyed by
 * its chain (its digest and every layer below it), so a layer is already held only when some
 * held image has the same stack up to it; the same blob over another base is stored again.
 * Nodes with the same figures are grouped, so a big cluster's plan stays small.
 */
import { createHash } from 'node:crypto';
import type { PlannedImage, PlannedNodeBytes, PlannedSet, SetRole } from './types.js';

/** A node and the image digests it runs now (manifest or list digests, as its Pods name them). */
export interface NodeHolding {
  readonly name: string;
  readonly role: SetRole;
  readonly images: readonly string[];
}

/** The layer digests, bottom first, of an image a node runs, by the digest its Pods name. */
export type HeldLayers = ReadonlyMap<string, readonly string[]>;

/** containers/storage's layer ID rule: the first layer's own digest, then sha256(parent + "+" + digest). */
export function layerChains(layers: readonly string[]): string[] {
  let parent = '';
  return layers.map((digest) => (parent = parent ? createHash('sha256').update(`${parent}+${digest}`).digest('hex') : digest));
}

export function newBytesPerNode(images: readonly PlannedImage[], sets: readonly PlannedSet[], nodes: readonly NodeHolding[], heldLayers: HeldLayers): PlannedNodeBytes[] {
  const byPullSpec = new Map(images.map((i) => [i.pullSpec, i]));
  const targets = new Map<SetRole, { sets: string[]; images: PlannedImage[] }>();
  for (const set of sets) {
    const entry = targets.get(set.role) ?? { sets: [], images: [] };
    entry.sets.push(set.name);
    for (const pullSpec of set.images) entry.images.push(byPullSpec.get(pullSpec)!);
    targets.set(set.role, entry);
  }
  const chainsOf = new Map<PlannedImage, string[]>(images.map((i) => [i, layerChains(i.layers.map((l) => l.digest))]));
  // Chains of each held image once, not once per node that runs it (thousands of nodes run the same images).
  const heldImageChains = new Map([...heldLayers].map(([digest, layers]) => [digest, layerChains(layers)]));
  const groups = new Map<string, PlannedNodeBytes & { nodes: string[] }>();
  for (const node of nodes) {
    const target = targets.get(node.role);
    if (!target) continue;
    const heldImages = new Set(node.images);
    const heldChains = new Set(node.images.flatMap((digest) => heldImageChains.get(digest) ?? []));
    const stored = new Map<string, number>();
    const fresh = new Map<string, number>();
    const downloads = new Map<string, number>();
    for (const image of target.images) {
      if (!heldImages.has(image.digest)) downloads.set(image.config.digest, image.config.size);
      chainsOf.get(image)!.forEach((chain, i) => {
        const layer = image.layers[i]!;
        stored.set(chain, layer.diskBytes);
        if (heldChains.has(chain)) return;
        fresh.set(chain, layer.diskBytes);
        downloads.set(layer.digest, layer.compressedBytes);
      });
    }
    const figures = {
      role: node.role,
      sets: target.sets,
      diskBytes: sum(stored.values()),
      heldDiskBytes: sum(stored.values()) - sum(fresh.values()),
      newDiskBytes: sum(fresh.values()),
      newCompressedBytes: sum(downloads.values()),
    };
    const key = JSON.stringify(figures);
    const group = groups.get(key) ?? { ...figures, nodes: [] };
    group.nodes.push(node.name);
    groups.set(key, group);
  }
  return [...groups.values()]
    .map((g) => ({ ...g, nodes: [...g.nodes].sort() }))
    .sort((a, b) => (a.role === b.role ? b.newDiskBytes - a.newDiskBytes || a.nodes[0]!.localeCompare(b.nodes[0]!) : a.role === 'control-plane' ? -1 : 1));
}

function sum(values: Iterable<number>): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}
