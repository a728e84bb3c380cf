/**
 * Will it fit? (pure) Per node and set: the images stored already, the compressed bytes still to
 * download, the uncompressed bytes still to write, and the node's space by its backend's own rule;
 * for the cluster: what crosses the slow link (through the cache each blob once per repository,
 * less what it holds). The ETA is eta.ts's.
 *
 * How a node's runtime counts (containers/image and containers/storage, as CRI-O pulls):
 * - a blob is not downloaded when the store holds a layer with its digest, whatever lies below it
 *   (TryReusingBlob looks layers up by digest), nor twice for two images of one pass;
 * - a layer is written once per chain (its digest and every layer below it: held.ts's rule), so
 *   the same blob over another base is written again though not downloaded again.
 * The disk rules are the backends' own: the agent's (agent/disk.ts: sets in name order, unique
 * new layers by digest within free less reserve; a unit test holds the two together) and MCO's
 * (2 x compressed layers of the images not on the node, below allocatable less 16 GiB).
 */
import type { PreflightNode, PreflightNodeSet, StorageRule } from '../../api/preflight.js';
import { layerChains } from '../../plan/held.js';
import { formatBytes } from '../../units.js';
import { MCO_STORAGE_RESERVE } from '../mco/preflight.js';

export interface ModelLayer {
  readonly digest: string;
  readonly compressedBytes: number;
  readonly diskBytes: number;
}

export interface ModelImage {
  readonly pullSpec: string;
  /** The digest the pullspec names (what a node's runtime lists it by). */
  readonly digest: string;
  readonly config: { readonly digest: string; readonly size: number };
  readonly layers: readonly ModelLayer[];
  /** MCO's disk check counts a manifest list's layers as 0 (the components of a `-multi` release). */
  readonly mcoCountsZero?: boolean;
}

export interface ModelSet {
  readonly name: string;
  /** Pullspecs, each one of the input's images. */
  readonly images: readonly string[];
}

export type NodeStorage =
  | { readonly rule: 'agent'; readonly freeBytes: number; readonly reserveBytes: number }
  | { readonly rule: 'mco' | 'allocatable'; readonly allocatableBytes: number }
  | { readonly rule: 'unknown' };

export interface ModelNode {
  readonly name: string;
  readonly role?: string;
  /** The sets that target the node. */
  readonly sets: readonly string[];
  /** Digests of the images the node stores. */
  readonly held: readonly string[];
  readonly heldFrom: PreflightNode['heldFrom'];
  readonly storage: NodeStorage;
}

export interface NodeFigures {
  readonly nodes: readonly PreflightNode[];
  readonly fetchBytes: number;
  /** What crosses the slow link for the sets the backends admit: a set refused pulls nothing. */
  readonly linkBytes: number;
  readonly writeBytes: number;
}

export interface FiguresInput {
  readonly images: readonly ModelImage[];
  readonly sets: readonly ModelSet[];
  readonly nodes: readonly ModelNode[];
  /** Layer digests, bottom first, of held images that are not among `images`. */
  readonly heldLayers: ReadonlyMap<string, readonly string[]>;
  /** The in-cluster cache: the digests of the images it holds whole. */
  readonly cache?: { readonly images: ReadonlySet<string> };
}

interface Need {
  readonly fetch: Map<string, number>;
  readonly write: Map<string, number>;
  /** Blobs keyed `repository@digest`, as the cache's proxy stores them. */
  readonly cacheKeys: Map<string, number>;
}

export function nodeFigures({ images, sets, nodes, heldLayers, cache }: FiguresInput): NodeFigures {
  const byPullSpec = new Map(images.map((image) => [image.pullSpec, image]));
  const byDigest = new Map(images.map((image) => [image.digest, image]));
  const setsByName = new Map(sets.map((set) => [set.name, set]));
  const chainsOf = new Map(images.map((image) => [image, layerChains(image.layers.map((layer) => layer.digest))]));
  // Layers of held images once each (a thousand nodes hold the same images).
  const heldLayerCache = new Map<string, readonly string[]>();
  const layersOfHeld = (digest: string): readonly string[] => {
    let layers = heldLayerCache.get(digest);
    if (!layers) heldLayerCache.set(digest, (layers = byDigest.get(digest)?.layers.map((layer) => layer.digest) ?? heldLayers.get(digest) ?? []));
    return layers;
  };
  const heldChainCache = new Map<string, readonly string[]>();
  const chainsOfHeld = (digest: string): readonly string[] => {
    let chains = heldChainCache.get(digest);
    if (!chains) heldChainCache.set(digest, (chains = layerChains(layersOfHeld(digest))));
    return chains;
  };
  const cached = new Set<string>();
  for (const digest of cache?.images ?? []) {
    const image = byDigest.get(digest);
    if (image) for (const key of blobKeys(image)) cached.add(key);
  }

  const linkBlobs = new Map<string, number>();
  let fetchBytes = 0;
  let linkBytes = 0;
  let writeBytes = 0;
  const results = nodes.map((node): PreflightNode => {
    const held = new Set(node.held);
    const heldBlobs = new Set(node.held.flatMap(layersOfHeld));
    const heldChains = new Set(node.held.flatMap(chainsOfHeld));
    const need = (pullSpecs: readonly string[]): Need => {
      const fetch = new Map<string, number>();
      const write = new Map<string, number>();
      const cacheKeys = new Map<string, number>();
      for (const pullSpec of pullSpecs) {
        const image = byPullSpec.get(pullSpec)!;
        if (held.has(image.digest)) continue;
        const repository = repositoryOf(image.pullSpec);
        const add = (digest: string, bytes: number) => {
          if (fetch.has(digest)) return;
          fetch.set(digest, bytes);
          // Keys only through a cache: a thousand nodes' strings for nothing otherwise (bench:preflight).
          if (cache) cacheKeys.set(`${repository}@${digest}`, bytes);
        };
        add(image.config.digest, image.config.size);
        chainsOf.get(image)!.forEach((chain, i) => {
          const layer = image.layers[i]!;
          if (!heldBlobs.has(layer.digest)) add(layer.digest, layer.compressedBytes);
          if (!heldChains.has(chain)) write.set(chain, layer.diskBytes);
        });
      }
      return { fetch, write, cacheKeys };
    };
    const targeted = [...node.sets].sort().map((name) => setsByName.get(name)!).filter(Boolean);
    const all = need([...new Set(targeted.flatMap((set) => set.images))]);
    const storage = checkStorage(node, targeted, (pullSpec) => held.has(byPullSpec.get(pullSpec)!.digest), byPullSpec, heldBlobs);
    // What will cross: the sets the backend admits (a set refused pulls nothing; MCO's one refusal
    // fails every set of the node's pool, and the allocatable rule is the node's as a whole).
    const refusesAll = node.storage.rule !== 'agent' && (storage.refused.size > 0 || storage.nodeReason !== undefined);
    const admitted = refusesAll ? [] : targeted.filter((set) => !storage.refused.has(set.name));
    const admittedImages = [...new Set(admitted.flatMap((set) => set.images))];
    const pulled = admitted.length === targeted.length ? all : need(admittedImages);
    for (const [key, bytes] of pulled.cacheKeys) if (!cached.has(key)) linkBlobs.set(key, bytes);
    linkBytes += sum(pulled.fetch.values());
    const setResults = targeted.map((set): PreflightNodeSet => {
      const own = need(set.images);
      const present = set.images.filter((pullSpec) => held.has(byPullSpec.get(pullSpec)!.digest)).length;
      const refused = storage.refused.get(set.name);
      return { set: set.name, images: set.images.length, present, fetchBytes: sum(own.fetch.values()), writeBytes: sum(own.write.values()), ...(refused ? { refused } : {}) };
    });
    const wanted = new Set(targeted.flatMap((set) => set.images));
    const figures = { fetchBytes: sum(all.fetch.values()), writeBytes: sum(all.write.values()) };
    fetchBytes += figures.fetchBytes;
    writeBytes += figures.writeBytes;
    const reasons = [...[...storage.refused].map(([set, why]) => `${node.name}: ${set} ${why}`), ...(storage.nodeReason ? [`${node.name}: ${storage.nodeReason}`] : [])];
    return {
      node: node.name,
      ...(node.role ? { role: node.role } : {}),
      sets: setResults,
      images: wanted.size,
      present: [...wanted].filter((pullSpec) => held.has(byPullSpec.get(pullSpec)!.digest)).length,
      pulls: admittedImages.filter((pullSpec) => !held.has(byPullSpec.get(pullSpec)!.digest)).length,
      ...figures,
      storage: storage.figures,
      heldFrom: node.heldFrom,
      verdict: reasons.length ? 'NO-GO' : 'GO',
      reasons,
    };
  });
  return { nodes: results, fetchBytes, linkBytes: cache ? sum(linkBlobs.values()) : linkBytes, writeBytes };
}

interface StorageCheck {
  readonly figures: PreflightNode['storage'];
  /** Set → why the rule refuses it (without the node's name). */
  readonly refused: Map<string, string>;
  /** Why the node as a whole does not fit (the allocatable rule counts all its sets at once). */
  readonly nodeReason?: string;
}

/** The node's space by its backend's own rule. */
function checkStorage(node: ModelNode, sets: readonly ModelSet[], present: (pullSpec: string) => boolean, byPullSpec: ReadonlyMap<string, ModelImage>, heldBlobs: ReadonlySet<string>): StorageCheck {
  const refused = new Map<string, string>();
  const storage = node.storage;
  const rule: StorageRule = storage.rule;
  if (storage.rule === 'agent') {
    // agent/disk.ts: layers of the sets' stored images count as on the node; each admitted set's new layers are taken from what is left.
    const counted = new Set<string>();
    for (const set of sets) for (const pullSpec of set.images) if (present(pullSpec)) for (const layer of byPullSpec.get(pullSpec)!.layers) counted.add(layer.digest);
    let available = storage.freeBytes - storage.reserveBytes;
    let needed = 0;
    const admitted = new Set<string>();
    for (const set of sets) {
      const missing = [...new Set(set.images)].filter((pullSpec) => !present(pullSpec) && !admitted.has(pullSpec));
      if (missing.length === 0) continue;
      const layers = new Map<string, number>();
      for (const pullSpec of missing) for (const layer of byPullSpec.get(pullSpec)!.layers) if (!counted.has(layer.digest)) layers.set(layer.digest, layer.diskBytes);
      const bytes = sum(layers.values());
      needed += bytes;
      if (bytes > available) {
        refused.set(set.name, `does not fit: needs ${formatBytes(bytes)} of new layers, ${formatBytes(Math.max(available, 0))} left of ${formatBytes(storage.freeBytes)} free after the agent's ${formatBytes(storage.reserveBytes)} reserve${admitted.size ? ' and earlier sets' : ''}: short by ${formatBytes(bytes - Math.max(available, 0))}`);
        continue;
      }
      available -= bytes;
      for (const digest of layers.keys()) counted.add(digest);
      for (const pullSpec of missing) admitted.add(pullSpec);
    }
    return { figures: { rule, availableBytes: storage.freeBytes, reserveBytes: storage.reserveBytes, neededBytes: needed }, refused };
  }
  if (storage.rule === 'mco') {
    // The daemon's check, per set: every image not on the node, its layers once (the daemon caches layer digests).
    let largest = 0;
    for (const set of sets) {
      const layers = new Map<string, number>();
      for (const pullSpec of set.images) {
        const image = byPullSpec.get(pullSpec)!;
        if (present(pullSpec) || image.mcoCountsZero) continue;
        for (const layer of image.layers) layers.set(layer.digest, layer.compressedBytes);
      }
      const required = 2 * sum(layers.values());
      largest = Math.max(largest, required);
      const limit = storage.allocatableBytes - MCO_STORAGE_RESERVE;
      if (layers.size > 0 && required >= limit) refused.set(set.name, `is refused by MCO's disk check: 2 x ${formatBytes(required / 2)} compressed = ${formatBytes(required)}, not below ${formatBytes(storage.allocatableBytes)} allocatable - 16 GiB: short by ${formatBytes(required - limit)}`);
    }
    return { figures: { rule, availableBytes: storage.allocatableBytes, reserveBytes: MCO_STORAGE_RESERVE, neededBytes: largest }, refused };
  }
  // What stage checks: the new bytes within allocatable ephemeral storage (no reserve known).
  const layers = new Map<string, number>();
  for (const set of sets) for (const pullSpec of set.images) if (!present(pullSpec)) for (const layer of byPullSpec.get(pullSpec)!.layers) if (!heldBlobs.has(layer.digest)) layers.set(layer.digest, layer.diskBytes);
  const needed = sum(layers.values());
  const nodeReason =
    storage.rule === 'allocatable' && needed > storage.allocatableBytes
      ? `the sets need ${formatBytes(needed)} of new layers, more than the ${formatBytes(storage.allocatableBytes)} allocatable ephemeral storage: short by ${formatBytes(needed - storage.allocatableBytes)}`
      : undefined;
  return { figures: { rule, ...(storage.rule === 'allocatable' ? { availableBytes: storage.allocatableBytes } : {}), neededBytes: needed }, refused, ...(nodeReason ? { nodeReason } : {}) };
}

/** The cache's keys for an image's blobs: its repository and each digest (the proxy stores blobs per repository). */
function blobKeys(image: ModelImage): string[] {
  const repository = repositoryOf(image.pullSpec);
  return [image.config.digest, ...image.layers.map((layer) => layer.digest)].map((digest) => `${repository}@${digest}`);
}

function repositoryOf(pullSpec: string): string {
  return pullSpec.replace(/@sha256:[a-f0-9]{64}$/, '');
}

function sum(values: Iterable<number>): number {
  let total = 0;
  for (const value of values) total += value;
  return total;
}
