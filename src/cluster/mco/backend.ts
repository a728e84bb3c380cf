/**
 * The MCO-native backend: sets are `machineconfiguration.openshift.io` PinnedImageSets
 * whose labels pick MachineConfigPools (by each pool's `machineConfigSelector`); a set targets
 * the nodes of those pools (by each pool's `nodeSelector`); progress is each node's
 * MachineConfigNode `status.pinnedImageSets[]` and its PinnedImageSets* conditions.
 *
 * OpenShift 4.19+ serves PinnedImageSet and MachineConfigNode at v1. 4.16-4.18 serve them only
 * at v1alpha1 (TechPreview), where a set's error was first a list (`lastFailedGenerationErrors`),
 * later one string; the backend uses the version the cluster serves and reads every shape.
 */
import { toPinnedImageSetObject } from '../desired-sets.js';
import { MANAGED_BY_LABEL, type DesiredSet, type NodeSetProgress, type PinningBackend, type ProgressSnapshot, type SetProgress } from '../backend.js';
import { matchesSelector, type KubeClient, type KubeObject, type LabelSelector } from '../kube.js';
import { observedBackend, type ClusterView } from '../observed-backend.js';

export const MCO_GROUP = 'machineconfiguration.openshift.io';
export type McoVersion = 'v1' | 'v1alpha1';

/** The versions a cluster serves PinnedImageSet and MachineConfigNode at (MachineConfigPool is always v1). */
export interface McoVersions {
  readonly pinnedImageSets: McoVersion;
  readonly machineConfigNodes: McoVersion;
}

export const MCO_V1: McoVersions = { pinnedImageSets: 'v1', machineConfigNodes: 'v1' };

export function mcoPaths(versions: McoVersions) {
  return {
    pinnedImageSets: `/apis/${MCO_GROUP}/${versions.pinnedImageSets}/pinnedimagesets`,
    machineConfigPools: `/apis/${MCO_GROUP}/v1/machineconfigpools`,
    machineConfigNodes: `/apis/${MCO_GROUP}/${versions.machineConfigNodes}/machineconfignodes`,
    nodes: '/api/v1/nodes',
  } as const;
}

/** The paths on a 4.19+ cluster. */
export const MCO_PATHS = mcoPaths(MCO_V1);

interface MachineConfigPool extends KubeObject {
  spec?: { nodeSelector?: LabelSelector; machineConfigSelector?: LabelSelector };
}

/** Every shape MCO has written: v1, and the v1alpha1 ones of 4.16-4.18. */
interface MachineConfigNodeSetStatus {
  name: string;
  desiredGeneration?: number;
  currentGeneration?: number;
  lastFailedGeneration?: number;
  lastFailedGenerationError?: string;
  /** v1alpha1, 4.16-4.17: strings; briefly `{ message }` objects. */
  lastFailedGenerationErrors?: Array<string | { message?: string }>;
  /** v1alpha1, later: one string and no failed generation. */
  lastPinnedImageSetError?: string;
}

interface MachineConfigNode extends KubeObject {
  status?: {
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
    pinnedImageSets?: MachineConfigNodeSetStatus[];
  };
}

export function mcoBackend(client: KubeClient, versions: McoVersions = MCO_V1): PinningBackend {
  const paths = mcoPaths(versions);
  return observedBackend(client, {
    kind: 'mco',
    setsPath: paths.pinnedImageSets,
    toObject: (set: DesiredSet) => toPinnedImageSetObject(set, `${MCO_GROUP}/${versions.pinnedImageSets}`),
    imagesOf: (object) => ((object['spec'] as { pinnedImages?: Array<{ name: string }> } | undefined)?.pinnedImages ?? []).map((i) => i.name),
    collections: [paths.pinnedImageSets, paths.machineConfigPools, paths.machineConfigNodes, paths.nodes],
    project: (view, names) => projectMco(view, names, versions),
  });
}

/** Pure: the progress of `names` (default: prestage-managed sets) in one view of the cluster. */
export function projectMco(view: ClusterView, names: readonly string[] | undefined, versions: McoVersions = MCO_V1): ProgressSnapshot {
  const paths = mcoPaths(versions);
  const sets = view.get(paths.pinnedImageSets)!;
  const pools = [...view.get(paths.machineConfigPools)!.values()] as MachineConfigPool[];
  const nodes = [...view.get(paths.nodes)!.values()];
  const mcns = view.get(paths.machineConfigNodes)! as ReadonlyMap<string, MachineConfigNode>;
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
  const error = entry && setError(entry);
  // Failed at this generation; the latest v1alpha1 shape has no failed generation, only the error.
  const failedNow = entry?.lastFailedGeneration !== undefined ? entry.lastFailedGeneration >= desiredGeneration : Boolean(entry?.lastPinnedImageSetError);
  if (failedNow) return { ...base, phase: 'degraded', error: error || 'failed' };
  // MCO also reports one node-wide condition for all sets: use it when the set has no error of its own.
  const degraded = mcn?.status?.conditions?.find((c) => c.type === 'PinnedImageSetsDegraded' && c.status === 'True');
  if (degraded) return { ...base, phase: 'degraded', error: degraded.message || degraded.reason || 'PinnedImageSetsDegraded' };
  return { ...base, phase: 'progressing' };
}

function setError(entry: MachineConfigNodeSetStatus): string | undefined {
  const listed = (entry.lastFailedGenerationErrors ?? []).map((e) => (typeof e === 'string' ? e : e.message ?? '')).filter(Boolean);
  return entry.lastFailedGenerationError || (listed.length > 0 ? listed.join('; ') : undefined) || entry.lastPinnedImageSetError || undefined;
}
