/**
 * The MCO-native backend: sets are `machineconfiguration.openshift.io/v1` PinnedImageSets
 * whose labels pick MachineConfigPools (by each pool's `machineConfigSelector`); a set targets
 * the nodes of those pools (by each pool's `nodeSelector`); progress is each node's
 * MachineConfigNode `status.pinnedImageSets[]` and its PinnedImageSets* conditions.
 */
import { toPinnedImageSetObject } from '../desired-sets.js';
import { MANAGED_BY_LABEL, type DesiredSet, type NodeSetProgress, type PinningBackend, type ProgressSnapshot, type SetProgress } from '../backend.js';
import { matchesSelector, type KubeClient, type KubeObject, type LabelSelector } from '../kube.js';
import { observedBackend, type ClusterView } from '../observed-backend.js';

export const MCO_GROUP_VERSION = 'machineconfiguration.openshift.io/v1';
const BASE = `/apis/${MCO_GROUP_VERSION}`;
export const MCO_PATHS = {
  pinnedImageSets: `${BASE}/pinnedimagesets`,
  machineConfigPools: `${BASE}/machineconfigpools`,
  machineConfigNodes: `${BASE}/machineconfignodes`,
  nodes: '/api/v1/nodes',
} as const;

interface MachineConfigPool extends KubeObject {
  spec?: { nodeSelector?: LabelSelector; machineConfigSelector?: LabelSelector };
}

interface MachineConfigNodeSetStatus {
  name: string;
  desiredGeneration?: number;
  currentGeneration?: number;
  lastFailedGeneration?: number;
  lastFailedGenerationError?: string;
}

interface MachineConfigNode extends KubeObject {
  status?: {
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
    pinnedImageSets?: MachineConfigNodeSetStatus[];
  };
}

export function mcoBackend(client: KubeClient): PinningBackend {
  return observedBackend(client, {
    kind: 'mco',
    setsPath: MCO_PATHS.pinnedImageSets,
    toObject: (set: DesiredSet) => toPinnedImageSetObject(set, MCO_GROUP_VERSION),
    imagesOf: (object) => ((object['spec'] as { pinnedImages?: Array<{ name: string }> } | undefined)?.pinnedImages ?? []).map((i) => i.name),
    collections: [MCO_PATHS.pinnedImageSets, MCO_PATHS.machineConfigPools, MCO_PATHS.machineConfigNodes, MCO_PATHS.nodes],
    project: projectMco,
  });
}

/** Pure: the progress of `names` (default: prestage-managed sets) in one view of the cluster. */
export function projectMco(view: ClusterView, names: readonly string[] | undefined): ProgressSnapshot {
  const sets = view.get(MCO_PATHS.pinnedImageSets)!;
  const pools = [...view.get(MCO_PATHS.machineConfigPools)!.values()] as MachineConfigPool[];
  const nodes = [...view.get(MCO_PATHS.nodes)!.values()];
  const mcns = view.get(MCO_PATHS.machineConfigNodes)! as ReadonlyMap<string, MachineConfigNode>;
  const wanted = names ?? [...sets.values()].filter((s) => s.metadata.labels?.[MANAGED_BY_LABEL] === 'prestage').map((s) => s.metadata.name);
  const poolOfNode = new Map(nodes.map((node) => [node.metadata.name, poolOf(node, pools)]));
  return {
    sets: [...new Set(wanted)].sort().map((name): SetProgress => {
      const set = sets.get(name);
      if (!set) return { name, exists: false, generation: 0, nodes: [] };
      const generation = set.metadata.generation ?? 1;
      const setPools = new Set(pools.filter((p) => p.spec?.machineConfigSelector && matchesSelector(set.metadata.labels, p.spec.machineConfigSelector)).map((p) => p.metadata.name));
      const targets = nodes.filter((n) => setPools.has(poolOfNode.get(n.metadata.name) ?? '')).map((n) => n.metadata.name).sort();
      return { name, exists: true, generation, nodes: targets.map((node) => nodeProgress(node, name, generation, mcns.get(node))) };
    }),
  };
}

/**
 * The one pool MCO puts a node in: `master` wins, and a custom pool wins over `worker`
 * (a node of a custom pool also carries the worker role label). Pools without a node
 * selector select nothing.
 */
function poolOf(node: KubeObject, pools: readonly MachineConfigPool[]): string | undefined {
  const matching = pools
    .filter((p) => p.spec?.nodeSelector && matchesSelector(node.metadata.labels, p.spec.nodeSelector))
    .map((p) => p.metadata.name)
    .sort();
  if (matching.includes('master')) return 'master';
  return matching.find((name) => name !== 'worker') ?? matching[0];
}

function nodeProgress(node: string, set: string, generation: number, mcn: MachineConfigNode | undefined): NodeSetProgress {
  const entry = mcn?.status?.pinnedImageSets?.find((s) => s.name === set);
  const desiredGeneration = entry?.desiredGeneration ?? 0;
  const currentGeneration = entry?.currentGeneration ?? 0;
  const base = { node, set, desiredGeneration, currentGeneration };
  if (desiredGeneration < generation) return { ...base, phase: 'pending' };
  if (currentGeneration === desiredGeneration) return { ...base, phase: 'done' };
  if (entry?.lastFailedGeneration !== undefined && entry.lastFailedGeneration >= desiredGeneration) {
    return { ...base, phase: 'degraded', error: entry.lastFailedGenerationError ?? 'failed' };
  }
  // MCO also reports one node-wide condition for all sets: use it when the set has no error of its own.
  const degraded = mcn?.status?.conditions?.find((c) => c.type === 'PinnedImageSetsDegraded' && c.status === 'True');
  if (degraded) return { ...base, phase: 'degraded', error: degraded.message || degraded.reason || 'PinnedImageSetsDegraded' };
  return { ...base, phase: 'progressing' };
}
