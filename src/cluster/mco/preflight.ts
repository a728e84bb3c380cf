/**
 * What MCO's daemon will refuse or choke on, checked before prestage applies sets to it (pure),
 * as its source has it (pkg/daemon/pinned_image_set.go, 4.16 to 5.0):
 * - the disk check, per set: 2 x the set's compressed layer bytes (images not yet on the node;
 *   prestage counts them all) must be less than the node's allocatable ephemeral storage less
 *   16 GiB (`MinFreeStorageAfterPrefetch`); a refused set is written as failed in every set of
 *   the pool, and no image is pulled;
 * - the daemon's image cache: 256 entries before 4.22, 1024 from 4.22 (images, layer digests,
 *   set UIDs); a pool whose sets hold more can requeue forever (OCPBUGS-77140).
 * The rules are pure; checkMcoPreflight reads the nodes and the sets' targets for them.
 */
import { ClusterError } from '../../errors.js';
import { majorMinor } from '../../plan/release-api.js';
import type { DesiredSet, PinningBackend } from '../backend.js';
import type { KubeClient, KubeList, KubeObject } from '../../kube/client.js';
import { parseQuantity } from '../../kube/quantity.js';
import { formatBytes } from '../../units.js';
import { count } from '../../plural.js';

export const MCO_STORAGE_RESERVE = 16 * 2 ** 30;

/** Entries of the daemon's LRU cache of images and sets, by MCO version. */
export function mcoImageCacheSize(version: string | undefined): number {
  const [major, minor] = (version && majorMinor(version)) || [0, 0];
  return major > 4 || (major === 4 && minor >= 22) ? 1024 : 256;
}

export interface McoTarget {
  readonly node: string;
  /** Allocatable ephemeral storage, bytes; undefined when the node reports none. */
  readonly allocatable: number | undefined;
}

/** One line per set and node MCO's disk check would refuse. */
export function mcoDiskRefusals(sets: readonly DesiredSet[], targets: ReadonlyMap<string, readonly McoTarget[]>): string[] {
  const lines: string[] = [];
  for (const set of sets) {
    if (set.mcoCheckBytes === undefined) continue;
    const required = 2 * set.mcoCheckBytes;
    for (const { node, allocatable } of targets.get(set.name) ?? []) {
      if (allocatable === undefined) continue;
      if (required >= allocatable - MCO_STORAGE_RESERVE) {
        lines.push(`${set.name} on ${node}: 2 x ${formatBytes(set.mcoCheckBytes)} compressed = ${formatBytes(required)}, not below ${formatBytes(allocatable)} allocatable - 16 GiB`);
      }
    }
  }
  return lines;
}

/** Pools (by the sets' role label) whose sets hold more images and sets than the daemon's cache. */
export function mcoCacheWarnings(sets: readonly DesiredSet[], version: string | undefined): string[] {
  const size = mcoImageCacheSize(version);
  const byPool = new Map<string, DesiredSet[]>();
  for (const set of sets) {
    const pool = set.labels['machineconfiguration.openshift.io/role'] ?? set.role;
    byPool.set(pool, [...(byPool.get(pool) ?? []), set]);
  }
  return [...byPool].flatMap(([pool, poolSets]) => {
    const entries = new Set(poolSets.flatMap((s) => s.images)).size + poolSets.length;
    return entries > size
      ? [`pool ${pool}: its sets hold ${count(entries - poolSets.length, 'image')}, more than MCO's image cache of ${size} entries${version ? ` (MCO ${version})` : ' (before 4.22; 1024 from 4.22)'} holds with them: its daemon can requeue forever (OCPBUGS-77140); split the images over fewer at a time`]
      : [];
  });
}

/**
 * On the MCO backend, what MCO's own daemon will refuse (its disk check, per set and node: a
 * ClusterError unless `force`) or choke on (its image cache: a warning), before anything is applied.
 */
export async function checkMcoPreflight(client: KubeClient, backend: PinningBackend, sets: readonly DesiredSet[], options: { version: string | undefined; force: boolean; warn: (line: string) => void }): Promise<void> {
  if (backend.kind !== 'mco') return;
  const nodes = await client.get<KubeList<KubeObject & { status?: { allocatable?: Record<string, string> } }>>('/api/v1/nodes');
  const allocatable = new Map(nodes.items.map((n) => [n.metadata.name, parseQuantity(n.status?.allocatable?.['ephemeral-storage'] ?? '')]));
  const targets = new Map<string, McoTarget[]>();
  for (const set of sets) targets.set(set.name, (await backend.targetNodes(set)).map((node) => ({ node, allocatable: allocatable.get(node) })));
  for (const warning of mcoCacheWarnings(sets, options.version)) options.warn(warning);
  const refusals = mcoDiskRefusals(sets, targets);
  if (refusals.length === 0) return;
  const text = `MCO's disk check would refuse ${refusals.length === 1 ? 'a set' : `${refusals.length} sets`} (${refusals.join('; ')})`;
  if (options.force) return options.warn(`${text}; applying anyway (--force)`);
  throw new ClusterError(`${text}: free ephemeral storage on the node or pin fewer images at once (--os-stream, --platform), or --force to apply anyway`);
}
