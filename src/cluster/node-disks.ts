/**
 * prestage's own disk check before a stage: each node's allocatable ephemeral-storage must hold
 * the uncompressed bytes of all sets it is about to get (MCO guesses 2x compressed).
 */
import type { DesiredSet, PinningBackend } from './backend.js';
import type { KubeClient, KubeList, KubeObject } from '../kube/client.js';
import { ClusterError } from '../errors.js';
import type { Plan } from '../plan/types.js';
import { parseQuantity } from '../kube/quantity.js';
import { formatBytes } from '../units.js';

/**
 * Bytes each target node must hold, summed over the sets it gets; throws when one cannot. A node
 * the plan sized against what it runs now (`plan.nodes`, a live cluster) needs only its new
 * bytes, when the sets it gets are the ones the plan sized it for.
 */
export async function checkNodeDisks(client: KubeClient, backend: PinningBackend, sets: readonly DesiredSet[], planned: Plan['nodes'] = []): Promise<Map<string, number>> {
  const need = new Map<string, number>();
  const targeted = new Map<string, string[]>();
  for (const set of sets) {
    for (const node of await backend.targetNodes(set)) {
      need.set(node, (need.get(node) ?? 0) + (set.diskBytes ?? 0));
      targeted.set(node, [...(targeted.get(node) ?? []), set.name]);
    }
  }
  for (const entry of planned) {
    for (const node of entry.nodes) {
      if (sameSets(targeted.get(node) ?? [], entry.sets)) need.set(node, entry.newDiskBytes);
    }
  }
  const nodes = await client.get<KubeList<KubeObject & { status?: { allocatable?: Record<string, string> } }>>('/api/v1/nodes');
  const short = nodes.items.flatMap((node) => {
    const bytes = need.get(node.metadata.name);
    const allocatable = parseQuantity(node.status?.allocatable?.['ephemeral-storage'] ?? '');
    return bytes !== undefined && allocatable !== undefined && allocatable < bytes ? [`${node.metadata.name} (${formatBytes(allocatable)} allocatable < ${formatBytes(bytes)} needed)`] : [];
  });
  if (short.length) throw new ClusterError(`not enough ephemeral storage for the sets on ${short.length} node(s): ${short.join(', ')}`);
  return need;
}

function sameSets(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');
}
