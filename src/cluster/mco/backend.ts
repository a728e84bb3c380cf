/**
 * The MCO-native backend: sets are `machineconfiguration.openshift.io` PinnedImageSets
 * whose labels pick MachineConfigPools (by each pool's `machineConfigSelector`); a set targets
 * the nodes of those pools (by each pool's `nodeSelector`); progress is each node's
 * MachineConfigNode `status.pinnedImageSets[]` and its PinnedImageSets* conditions.
 *
 * OpenShift 4.19+ serves PinnedImageSet and MachineConfigNode at v1 (a set's error is
 * `lastFailedGenerationError`); 4.16-4.18 only at v1alpha1 under TechPreviewNoUpgrade (a list,
 * `lastFailedGenerationErrors`). The backend uses the version the cluster serves. How MCO's
 * daemon writes them (FACTS §3) shapes the reading: one sync per node for all sets of its pool,
 * its deadline written as a failure, and its one error copied into every set.
 */
import { checkMcoNames } from '../../plan/mco-names.js';
import { toPinnedImageSetObject } from '../desired-sets.js';
import { type DesiredSet, type NodeSetProgress, type PinningBackend, type PoolProgress, type ProgressSnapshot, type SetProgress } from '../backend.js';
import { matchesSelector, type KubeClient, type KubeObject, type LabelSelector } from '../../kube/client.js';
import { observedBackend, type ClusterView } from '../observed-backend.js';
import { MANAGED_BY_LABEL } from '../../api/set-metadata.js';

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

/** A MachineConfigPool: its name and how it picks sets. */
export interface PoolSelector {
  readonly name: string;
  readonly machineConfigSelector?: LabelSelector;
}

/** The pools whose `machineConfigSelector` matches `labels`, by name (a pool without one selects nothing). */
export function poolsSelecting(labels: Readonly<Record<string, string>> | undefined, pools: readonly PoolSelector[]): string[] {
  return pools.filter((p) => p.machineConfigSelector && matchesSelector(labels, p.machineConfigSelector)).map((p) => p.name).sort();
}

export function poolSelectorOf(pool: KubeObject & { spec?: { machineConfigSelector?: LabelSelector } }): PoolSelector {
  return { name: pool.metadata.name, ...(pool.spec?.machineConfigSelector ? { machineConfigSelector: pool.spec.machineConfigSelector } : {}) };
}

interface MachineConfigPool extends KubeObject {
  spec?: { nodeSelector?: LabelSelector; machineConfigSelector?: LabelSelector };
  /** poolSynchronizersStatus: v1 from 4.19, and the TechPreviewNoUpgrade pool CRD of 4.16-4.18. */
  status?: {
    poolSynchronizersStatus?: Array<{ poolSynchronizerType: string; machineCount: number; updatedMachineCount: number }>;
    conditions?: Array<{ type: string; status: string; message?: string }>;
  };
}

/** A set's entry in a MachineConfigNode, as MCO writes it at v1 (4.19+) and v1alpha1 (4.16-4.18). */
interface MachineConfigNodeSetStatus {
  name: string;
  desiredGeneration?: number;
  currentGeneration?: number;
  lastFailedGeneration?: number;
  /** v1. */
  lastFailedGenerationError?: string;
  /** v1alpha1; MCO 4.16 writes `lastFailedGeneration: 0` and no errors on entries it rewrites. */
  lastFailedGenerationErrors?: string[];
}

interface MachineConfigNode extends KubeObject {
  status?: {
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
    pinnedImageSets?: MachineConfigNodeSetStatus[];
  };
}

interface PinnedImageSet extends KubeObject {
  spec?: { pinnedImages?: Array<{ name: string }> };
}

/**
 * What each node's daemon said last (its entries' error), across the snapshots of one command: on
 * 4.19+ the Degraded condition carries a generic message, and the sync after a failure or a
 * deadline drops the entries' error while Degraded stays True, so only the last error seen tells
 * a node that pulls on after its deadline from one whose sync keeps failing.
 */
export class DaemonErrors {
  private readonly last = new Map<string, string>();
  seen(node: string, error: string): void {
    this.last.set(node, this.explained(node, error));
  }
  /**
   * The error to show for `error`: the daemon marks an image pulled even when its pull failed,
   * so the next sync finds it missing and says only "image removed during sync"; the pull's
   * own error, seen just before, says why.
   */
  explained(node: string, error: string): string {
    const removed = REMOVED_DURING_SYNC.exec(error);
    const last = this.last.get(node);
    return removed && last?.startsWith(`failed to pull image "${removed[1]}"`) ? last : error;
  }
  forget(node: string): void {
    this.last.delete(node);
  }
  of(node: string): string | undefined {
    return this.last.get(node);
  }
}

export function mcoBackend(client: KubeClient, versions: McoVersions = MCO_V1): PinningBackend {
  const paths = mcoPaths(versions);
  const memory = new DaemonErrors();
  const backend = observedBackend(client, {
    kind: 'mco',
    setsPath: paths.pinnedImageSets,
    toObject: (set: DesiredSet) => toPinnedImageSetObject(set, `${MCO_GROUP}/${versions.pinnedImageSets}`),
    imagesOf,
    collections: [paths.pinnedImageSets, paths.machineConfigPools, paths.machineConfigNodes, paths.nodes],
    project: (view, names) => projectMco(view, names, versions, memory),
    // The error a failing or deadline sync writes may be gone by the projection (the next sync drops it).
    observe: (path, object) => {
      if (path === paths.machineConfigNodes) rememberErrors(object as MachineConfigNode, memory);
    },
  });
  return {
    ...backend,
    // Refused here, before any request: the API server's CEL rules would refuse them one by one.
    apply: (sets, options) => {
      checkMcoNames(sets.flatMap((s) => s.images));
      return backend.apply(sets, options);
    },
  };
}

const imagesOf = (object: KubeObject): string[] => ((object as PinnedImageSet).spec?.pinnedImages ?? []).map((i) => i.name);

/**
 * The progress of `names` (default: prestage-managed sets) in one view of the cluster; pure but
 * for `memory`, the daemons' last errors seen by earlier views of the same command.
 */
export function projectMco(view: ClusterView, names: readonly string[] | undefined, versions: McoVersions = MCO_V1, memory: DaemonErrors = new DaemonErrors()): ProgressSnapshot {
  const paths = mcoPaths(versions);
  const sets = view.get(paths.pinnedImageSets)!;
  const pools = [...view.get(paths.machineConfigPools)!.values()] as MachineConfigPool[];
  const nodes = [...view.get(paths.nodes)!.values()];
  const mcns = view.get(paths.machineConfigNodes)! as ReadonlyMap<string, MachineConfigNode>;
  const wanted = names ?? [...sets.values()].filter((s) => s.metadata.labels?.[MANAGED_BY_LABEL] === 'prestage').map((s) => s.metadata.name);
  const poolOfNode = new Map(nodes.map((node) => [node.metadata.name, poolOf(node, pools)]));
  const setsOfImage = (image: string) => [...sets.values()].filter((s) => imagesOf(s).includes(image)).map((s) => s.metadata.name).sort();
  const selectors = pools.map(poolSelectorOf);
  const targetPools = new Set<string>();
  const progress = [...new Set(wanted)].sort().map((name): SetProgress => {
    const set = sets.get(name);
    if (!set) return { name, exists: false, generation: 0, nodes: [] };
    const generation = set.metadata.generation ?? 1;
    const own = new Set(imagesOf(set));
    const setPools = new Set(poolsSelecting(set.metadata.labels, selectors));
    for (const pool of setPools) targetPools.add(pool);
    const targets = nodes.filter((n) => setPools.has(poolOfNode.get(n.metadata.name) ?? '')).map((n) => n.metadata.name).sort();
    return { name, exists: true, generation, nodes: targets.map((node) => nodeProgress(node, name, generation, mcns.get(node), own, setsOfImage, memory)) };
  });
  const poolView = pools.filter((p) => targetPools.has(p.metadata.name)).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)).flatMap((p) => poolProgress(p));
  return { sets: progress, ...(poolView.length ? { pools: poolView } : {}) };
}

/** The pool's PinnedImageSets synchronizer, where the pool CRD has one (4.19+, or TechPreview). */
function poolProgress(pool: MachineConfigPool): PoolProgress[] {
  const synchronizer = pool.status?.poolSynchronizersStatus?.find((s) => s.poolSynchronizerType === 'PinnedImageSets');
  if (!synchronizer) return [];
  const degraded = pool.status?.conditions?.find((c) => c.type === 'PinnedImageSetsDegraded' && c.status === 'True');
  return [{ name: pool.metadata.name, machineCount: synchronizer.machineCount, updatedMachineCount: synchronizer.updatedMachineCount, ...(degraded ? { degraded: degraded.message || 'PinnedImageSetsDegraded' } : {}) }];
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

const NO_DAEMON = 'no MachineConfigNode for this node: no MCO daemon reports it (on 4.16-4.18 PinnedImageSets need TechPreviewNoUpgrade; check the machine-config-daemon pod on the node)';

function nodeProgress(node: string, set: string, generation: number, mcn: MachineConfigNode | undefined, own: ReadonlySet<string>, setsOfImage: (image: string) => string[], memory: DaemonErrors): NodeSetProgress {
  const entry = mcn?.status?.pinnedImageSets?.find((s) => s.name === set);
  const desiredGeneration = entry?.desiredGeneration ?? 0;
  const currentGeneration = entry?.currentGeneration ?? 0;
  const base = { node, set, desiredGeneration, currentGeneration };
  if (!mcn) return { ...base, phase: 'pending', unreported: NO_DAEMON };
  const degraded = mcn.status?.conditions?.find((c) => c.type === 'PinnedImageSetsDegraded' && c.status === 'True');
  if (!degraded) memory.forget(node);
  if (desiredGeneration < generation) return { ...base, phase: 'pending' };
  if (currentGeneration === desiredGeneration) return { ...base, phase: 'done' };
  // MCO writes the error of its one sync into every unfinished set of the pool, and keeps the
  // node's PinnedImageSetsDegraded condition True after the next sync drops the entry's fields.
  const reported = (entry?.lastFailedGeneration ?? 0) >= desiredGeneration ? entryError(entry!) : undefined;
  const failed = reported === undefined ? undefined : memory.explained(node, reported);
  if (failed !== undefined) memory.seen(node, failed);
  let error = failed;
  if (error === undefined && degraded) {
    const message = degraded.message || degraded.reason || 'PinnedImageSetsDegraded';
    if (!GENERIC_DEGRADED.test(message)) error = memory.explained(node, message);
    else {
      // 4.19+: the condition names no error; the last one this node's entries carried does.
      const last = memory.of(node);
      if (last === undefined) return { ...base, phase: 'progressing', note: `MCO reports Degraded without naming an error (${message}); its last sync failed or passed its deadline, and it pulls on` };
      if (deadlineError(last)) return { ...base, phase: 'progressing', note: `MCO reports Degraded since its last deadline (${last}); still pulling` };
      error = last;
    }
  }
  if (error === undefined) return { ...base, phase: 'progressing' };
  const verdict = judgeMcoError(error, own, setsOfImage);
  return verdict.failure ? { ...base, phase: 'degraded', error } : { ...base, phase: 'progressing', note: verdict.note };
}

/** The error of the node's entries at their desired generation, if any: what its daemon's last failing sync said. */
function rememberErrors(mcn: MachineConfigNode, memory: DaemonErrors): void {
  const failed = mcn.status?.pinnedImageSets?.find((e) => (e.lastFailedGeneration ?? 0) > 0 && (e.lastFailedGeneration ?? 0) >= (e.desiredGeneration ?? 0));
  if (failed) memory.seen(mcn.metadata.name, entryError(failed));
}

/** The condition message MCO 4.19+ writes on every failure; the error itself is in the entries. */
const GENERIC_DEGRADED = /^One or more PinnedImageSet is experiencing an error/;

function entryError(entry: MachineConfigNodeSetStatus): string {
  return entry.lastFailedGenerationError || (entry.lastFailedGenerationErrors ?? []).filter(Boolean).join('; ') || 'failed';
}

/** MCO's text when a sync passed its deadline (2 min; 5 min from 4.22): the daemon requeues and pulls on. */
const DEADLINE_REQUEUE = /^requeue: prefetching images incomplete after timeout/;
/**
 * The disk check cut by the same deadline: its `podman manifest inspect` killed (exec's context),
 * or an ImageStatus call past it. Not the image's fault: a pool with more images than the check
 * inspects in one deadline (0.4 s each) gets this until their sizes are cached.
 */
const DISK_CHECK_CUT = /^failed to execute podman manifest inspect for "[^"]+": signal: killed$|^failed to get image status for "[^"]+": rpc error: code = DeadlineExceeded/;

/** A sync that ended at its deadline, whichever step it was in: the daemon requeues and pulls on. */
function deadlineError(error: string): boolean {
  return DEADLINE_REQUEUE.test(error) || DISK_CHECK_CUT.test(error);
}
/**
 * The images MCO's daemon errors name, 4.16 to 5.0 (pkg/daemon/pinned_image_set.go, the same
 * texts on every release branch): a pull that failed its tries (`failed to pull image "<image>"
 * (5 tries): ...`), an image the registry lacks, found by the disk check before any pull
 * (`failed to execute podman manifest inspect for "<image>": exit status 125`), and an image
 * gone during the sync (`failed to pull image: image removed during sync: <image>`).
 */
const REMOVED_DURING_SYNC = /^failed to pull image: image removed during sync: (\S+)$/;
const IMAGE_IN_ERROR = /failed to pull image "([^"]+)"|failed to execute podman manifest inspect for "([^"]+)"|image removed during sync: (\S+)/g;

/**
 * Whose failure an MCO error is, for one set. A deadline requeue is progress; an error that
 * names images fails the set only when one of them is its own (MCO copies one error into every
 * set of the pool); an error that names no image (disk check, node not ready) is the node's,
 * so every set on it fails.
 */
export function judgeMcoError(error: string, own: ReadonlySet<string>, setsOfImage: (image: string) => readonly string[]): { failure: true } | { failure: false; note: string } {
  if (DEADLINE_REQUEUE.test(error)) return { failure: false, note: `MCO sync deadline passed, pulling on (${error})` };
  if (DISK_CHECK_CUT.test(error)) return { failure: false, note: `MCO sync deadline passed during its disk check, checking on (${error})` };
  const images = [...error.matchAll(IMAGE_IN_ERROR)].map((m) => (m[1] ?? m[2] ?? m[3])!);
  if (images.length === 0 || images.some((image) => own.has(image))) return { failure: true };
  const image = images[0]!;
  const owners = setsOfImage(image);
  return { failure: false, note: `error from ${owners.length ? `set ${owners.join(', ')}` : 'another set'} (image ${image}), not from this set; MCO finishes no set of the pool until it is fixed` };
}
