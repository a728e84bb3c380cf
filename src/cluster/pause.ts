/**
 * Pausing and resuming sets (`prestage pause`, `prestage resume`), as the set's own metadata, so
 * the pause survives restarts and any tool can see it:
 *
 * - agent backend: annotation `prestage.dev/paused` (the time). The node agents start no new
 *   pull for the set; pulls under way finish; nothing is unpinned.
 * - MCO backend: MCO has no pause. A pool pulls and pins every set its `machineConfigSelector`
 *   matches, by the set's label `machineconfiguration.openshift.io/role`; pausing moves that
 *   label into annotation `prestage.dev/paused-role` (beside `prestage.dev/paused`), so no pool
 *   selects the set, and resume puts it back. One JSON merge patch each way, conditional on the
 *   `resourceVersion` read: a set changed in between fails with 409 instead of losing the change.
 *
 * Every set is read and checked before the first patch, so bad input changes nothing.
 */
import { PAUSED_ANNOTATION, PAUSED_ROLE_ANNOTATION } from '../api/staging.js';
import { MANAGED_BY_LABEL } from '../api/set-metadata.js';
import { BadInputError, ClusterError } from '../errors.js';
import { KubeApiError, type KubeClient, type KubeList, type KubeObject, type LabelSelector } from '../kube/client.js';
import { AGENT_PATHS } from './agent/backend.js';
import { FIELD_MANAGER, type BackendKind } from './backend.js';
import { mcoPaths, poolSelectorOf, poolsSelecting, type McoVersions, type PoolSelector } from './mco/backend.js';
import { POOL_ROLE_LABEL } from '../plan/assemble.js';

/** Where the sets are: the agent's API, or MCO's at the version the cluster serves. */
export type PauseTarget = { readonly kind: 'agent' } | { readonly kind: 'mco'; readonly versions: McoVersions };

/** A set's metadata as read, all pause and resume need. */
export interface SetMeta {
  readonly name: string;
  readonly resourceVersion?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
}

/** A JSON merge patch of a set's metadata (null removes a key). */
export interface MetadataPatch {
  readonly metadata: {
    readonly resourceVersion?: string;
    readonly labels?: Readonly<Record<string, string | null>>;
    readonly annotations: Readonly<Record<string, string | null>>;
  };
}

export type PauseStep =
  | { readonly set: string; readonly action: 'already'; /** The annotation's value: when it was paused. */ readonly since: string }
  | {
      readonly set: string;
      readonly action: 'pause';
      readonly patch: MetadataPatch;
      /** MCO: the role label's value, moved into the annotation. */
      readonly role?: string;
      /** MCO: the pools that select the set now and will not once paused. */
      readonly unselectedBy?: readonly string[];
    };

export interface ResumeStep {
  readonly set: string;
  readonly patch: MetadataPatch;
  /** MCO: the role label the set has once resumed. */
  readonly role?: string;
  /** MCO: whether the label comes back from the annotation (false: it was there already). */
  readonly restored?: boolean;
  /** MCO: the pools that select the set once resumed. */
  readonly selectedBy?: readonly string[];
}

/** RFC 3339 in UTC, to the second: the value of `prestage.dev/paused`. */
export function pauseTime(now: Date): string {
  return now.toISOString().replace(/\.\d+Z$/, 'Z');
}

const withoutRole = (labels: Readonly<Record<string, string>>) => Object.fromEntries(Object.entries(labels).filter(([key]) => key !== POOL_ROLE_LABEL));

/**
 * What `pause` does to each set, or a BadInputError (one line, every refusal) before anything
 * changes. On MCO a set is paused while it carries `prestage.dev/paused` and no role label (a
 * set applied again since its pause has the label back, and is paused again).
 */
export function pauseSteps(kind: BackendKind, sets: readonly SetMeta[], now: string, pools: readonly PoolSelector[] = []): PauseStep[] {
  const refusals: string[] = [];
  const steps = sets.map((set): PauseStep | undefined => {
    const since = set.annotations[PAUSED_ANNOTATION];
    if (kind === 'agent') {
      if (since !== undefined) return { set: set.name, action: 'already', since };
      return { set: set.name, action: 'pause', patch: { metadata: { annotations: { [PAUSED_ANNOTATION]: now } } } };
    }
    const role = set.labels[POOL_ROLE_LABEL];
    if (role === undefined) {
      if (since !== undefined && set.annotations[PAUSED_ROLE_ANNOTATION] !== undefined) return { set: set.name, action: 'already', since };
      refusals.push(`${set.name} has no label ${POOL_ROLE_LABEL} to move aside and restore on resume (MCO pools select sets by it)`);
      return undefined;
    }
    const still = poolsSelecting(withoutRole(set.labels), pools);
    if (still.length) {
      refusals.push(`${set.name} is selected by pool ${still.join(', ')} without its ${POOL_ROLE_LABEL} label (spec.machineConfigSelector), so moving the label aside would not stop MCO pulling it`);
      return undefined;
    }
    return {
      set: set.name,
      action: 'pause',
      role,
      unselectedBy: poolsSelecting(set.labels, pools),
      patch: {
        metadata: {
          ...(set.resourceVersion ? { resourceVersion: set.resourceVersion } : {}),
          labels: { [POOL_ROLE_LABEL]: null },
          annotations: { [PAUSED_ANNOTATION]: now, [PAUSED_ROLE_ANNOTATION]: role },
        },
      },
    };
  });
  if (refusals.length) throw new BadInputError(`cannot pause ${refusals.join('; ')}; nothing changed`);
  return steps.filter((step): step is PauseStep => step !== undefined);
}

/** Whether `resume` has anything to undo on a set. */
export function isPaused(kind: BackendKind, set: SetMeta): boolean {
  return set.annotations[PAUSED_ANNOTATION] !== undefined || (kind === 'mco' && set.annotations[PAUSED_ROLE_ANNOTATION] !== undefined);
}

/**
 * What `resume` does to each set, or a BadInputError before anything changes: a set named that
 * is not paused, an MCO set with no role to restore, or (no names given) no paused set at all.
 */
export function resumeSteps(kind: BackendKind, sets: readonly SetMeta[], named: boolean, pools: readonly PoolSelector[] = []): ResumeStep[] {
  const notPaused = sets.filter((set) => !isPaused(kind, set)).map((set) => set.name);
  if (named && notPaused.length) throw new BadInputError(`${notPaused.join(', ')} ${notPaused.length === 1 ? 'is' : 'are'} not paused (no annotation ${PAUSED_ANNOTATION}); nothing changed`);
  const paused = sets.filter((set) => isPaused(kind, set));
  if (!paused.length) throw new BadInputError(`no paused sets (annotation ${PAUSED_ANNOTATION}) on the cluster; nothing changed`);
  if (kind === 'agent') return paused.map((set) => ({ set: set.name, patch: { metadata: { annotations: { [PAUSED_ANNOTATION]: null } } } }));
  const lost = paused.filter((set) => set.labels[POOL_ROLE_LABEL] === undefined && !set.annotations[PAUSED_ROLE_ANNOTATION]).map((set) => set.name);
  if (lost.length) {
    throw new BadInputError(`cannot resume ${lost.join(', ')}: no annotation ${PAUSED_ROLE_ANNOTATION} or label ${POOL_ROLE_LABEL} says which pools select it; label it (${POOL_ROLE_LABEL}=worker or master) and resume again; nothing changed`);
  }
  return paused.map((set): ResumeStep => {
    // A label set since the pause (the set applied again) wins over the one put aside.
    const current = set.labels[POOL_ROLE_LABEL];
    const role = current ?? set.annotations[PAUSED_ROLE_ANNOTATION]!;
    return {
      set: set.name,
      role,
      restored: current === undefined,
      selectedBy: poolsSelecting({ ...set.labels, [POOL_ROLE_LABEL]: role }, pools),
      patch: {
        metadata: {
          ...(set.resourceVersion ? { resourceVersion: set.resourceVersion } : {}),
          ...(current === undefined ? { labels: { [POOL_ROLE_LABEL]: role } } : {}),
          annotations: { [PAUSED_ANNOTATION]: null, [PAUSED_ROLE_ANNOTATION]: null },
        },
      },
    };
  });
}

/** The collection of the target's sets. */
export function setsPathFor(target: PauseTarget): string {
  return target.kind === 'agent' ? AGENT_PATHS.pinnedImageSets : mcoPaths(target.versions).pinnedImageSets;
}

function metaOf(object: KubeObject): SetMeta {
  return {
    name: object.metadata.name,
    ...(object.metadata.resourceVersion ? { resourceVersion: object.metadata.resourceVersion } : {}),
    labels: object.metadata.labels ?? {},
    annotations: object.metadata.annotations ?? {},
  };
}

/**
 * The sets named (each must exist: one line naming every one missing), or without names every
 * set prestage manages; sorted by name.
 */
export async function readSets(client: KubeClient, target: PauseTarget, names: readonly string[]): Promise<SetMeta[]> {
  const path = setsPathFor(target);
  if (!names.length) {
    const list = await client.get<KubeList>(path, { labelSelector: `${MANAGED_BY_LABEL}=prestage` });
    return list.items.map(metaOf).sort((a, b) => a.name.localeCompare(b.name));
  }
  const unique = [...new Set(names)].sort();
  const found = await Promise.all(unique.map((name) => client.find<KubeObject>(`${path}/${encodeURIComponent(name)}`)));
  const missing = unique.filter((_, i) => !found[i]);
  if (missing.length) throw new BadInputError(`no PinnedImageSet ${missing.join(', ')} on the cluster; nothing changed`);
  return found.map((object) => metaOf(object!));
}

/** The MachineConfigPools and their set selectors (none on the agent backend). */
export async function readPools(client: KubeClient, target: PauseTarget): Promise<PoolSelector[]> {
  if (target.kind !== 'mco') return [];
  const list = await client.get<KubeList<KubeObject & { spec?: { machineConfigSelector?: LabelSelector } }>>(mcoPaths(target.versions).machineConfigPools);
  return list.items.map(poolSelectorOf);
}

/** Reads and checks every set first: what `pause` would do to each. */
export async function planPause(client: KubeClient, target: PauseTarget, names: readonly string[], now: Date): Promise<PauseStep[]> {
  const sets = await readSets(client, target, names);
  if (!sets.length) throw new BadInputError(`no prestage sets (label ${MANAGED_BY_LABEL}=prestage) on the cluster; nothing to pause`);
  return pauseSteps(target.kind, sets, pauseTime(now), await readPools(client, target));
}

/** Reads and checks every set first: what `resume` would do to each. */
export async function planResume(client: KubeClient, target: PauseTarget, names: readonly string[]): Promise<ResumeStep[]> {
  const sets = await readSets(client, target, names);
  return resumeSteps(target.kind, sets, names.length > 0, await readPools(client, target));
}

/**
 * One JSON merge patch of a set (field manager `prestage`); `dryRun` has the API server check
 * it and change nothing. A set changed since it was read (409) is left as it is.
 */
export async function patchSet(client: KubeClient, target: PauseTarget, set: string, patch: MetadataPatch, options: { dryRun: boolean; verb: 'pause' | 'resume' }): Promise<void> {
  try {
    await client.request('PATCH', `${setsPathFor(target)}/${encodeURIComponent(set)}`, {
      query: { fieldManager: FIELD_MANAGER, dryRun: options.dryRun ? 'All' : undefined },
      body: patch,
      contentType: 'application/merge-patch+json',
    });
  } catch (error) {
    if (error instanceof KubeApiError && error.status === 409) throw new ClusterError(`set ${set} changed since ${options.verb} read it, so it was left as it is; run ${options.verb} again`);
    if (error instanceof KubeApiError && error.status === 404) throw new ClusterError(`set ${set} was deleted since ${options.verb} read it`);
    throw error;
  }
}
