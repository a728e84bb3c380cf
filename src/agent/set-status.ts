/**
 * A prestage.dev PinnedImageSet's status over the nodes it selects, pure: kstatus's conditions
 * (Ready, Reconciling, Stalled) and observedGeneration, from each node's NodePinnedImages.
 * Ready only when every selected node reports the set's CURRENT generation pinned: a node that
 * has not reported yet, or reports an older generation or another object of the same name, is
 * still waited on.
 */
import { isSetDone, type NodePinnedImages, type PinnedImageSet, type SetCondition, type SetStatus } from '../api/prestage.js';
import { matchesSelector, type LabelSelector } from '../kube/client.js';

export interface NodeLabels {
  readonly name: string;
  readonly labels?: Readonly<Record<string, string>>;
}

/** Messages name at most this many nodes (and one image each); counts stay exact. */
export const MAX_NAMED_NODES = 5;

/**
 * What the writer keeps of one node's NodePinnedImages: per set its generations, error and
 * counts, and the first image not pinned (a node's full status can hold 100 sets x 500 images).
 */
export interface NodeReport {
  readonly sets: ReadonlyArray<{
    readonly name: string;
    readonly uid?: string;
    readonly desiredGeneration: number;
    readonly currentGeneration?: number;
    readonly lastFailedGeneration?: number;
    readonly lastFailedGenerationError?: string;
    readonly waiting?: string;
    readonly images: number;
    readonly missing: number;
    readonly firstMissing?: { readonly name: string; readonly state: string };
  }>;
}

export function reportOf(object: Pick<NodePinnedImages, 'status'>): NodeReport {
  return {
    sets: (object.status?.pinnedImageSets ?? []).map((entry) => {
      const missing = entry.images.filter((image) => image.state !== 'Pinned');
      return {
        name: entry.name,
        ...(entry.uid ? { uid: entry.uid } : {}),
        desiredGeneration: entry.desiredGeneration,
        ...(entry.currentGeneration !== undefined ? { currentGeneration: entry.currentGeneration } : {}),
        ...(entry.lastFailedGeneration !== undefined ? { lastFailedGeneration: entry.lastFailedGeneration } : {}),
        ...(entry.lastFailedGenerationError !== undefined ? { lastFailedGenerationError: entry.lastFailedGenerationError.slice(0, 1024) } : {}),
        ...(entry.waiting ? { waiting: entry.waiting } : {}),
        images: entry.images.length,
        missing: missing.length,
        ...(missing[0] ? { firstMissing: { name: missing[0].name, state: missing[0].state } } : {}),
      };
    }),
  };
}

/** What one selected node says of the set. */
type NodeVerdict = { node: string; state: 'done' } | { node: string; state: 'failed'; error: string } | { node: string; state: 'waiting'; why: string };

export function setStatus(set: PinnedImageSet, nodes: readonly NodeLabels[], reports: ReadonlyMap<string, NodeReport>, previous: SetStatus | undefined, now: Date): SetStatus {
  const generation = set.metadata.generation ?? 1;
  const selected = nodes.filter((node) => matchesSelector(node.labels, set.spec.nodeSelector as LabelSelector | undefined));
  const verdicts = selected.map((node) => verdictOf(set, generation, node.name, reports.get(node.name)));
  const done = verdicts.filter((verdict) => verdict.state === 'done').length;
  const failed = verdicts.filter((verdict): verdict is Extract<NodeVerdict, { state: 'failed' }> => verdict.state === 'failed');
  const waiting = verdicts.filter((verdict): verdict is Extract<NodeVerdict, { state: 'waiting' }> => verdict.state === 'waiting');

  let ready: [boolean, string, string];
  let reconciling: [boolean, string, string];
  let stalled: [boolean, string, string];
  if (selected.length === 0) {
    // Nothing to wait on is not "staged": a selector that matches no node is most likely a mistake.
    const why = 'the set selects no node; check spec.nodeSelector against the nodes\' labels';
    ready = [false, 'NoNodesSelected', why];
    reconciling = [false, 'NoNodesSelected', why];
    stalled = [true, 'NoNodesSelected', why];
  } else if (failed.length > 0) {
    const why = `${failed.length}/${selected.length} nodes failed: ${named(failed.map((verdict) => `${verdict.node}: ${verdict.error}`))}`;
    ready = [false, 'PinFailed', `${done}/${selected.length} nodes hold every image; ${why}`];
    reconciling = [false, 'PinFailed', why];
    stalled = [true, 'PinFailed', why];
  } else if (waiting.length > 0) {
    const why = `${done}/${selected.length} nodes hold every image; waiting on ${named(waiting.map((verdict) => `${verdict.node} (${verdict.why})`))}`;
    ready = [false, 'Staging', why];
    reconciling = [true, 'Staging', why];
    stalled = [false, 'Staging', why];
  } else {
    const why = `${done}/${selected.length} nodes hold and pin all ${set.spec.pinnedImages.length} images`;
    ready = [true, 'Staged', why];
    reconciling = [false, 'Staged', why];
    stalled = [false, 'Staged', why];
  }
  const conditions = (
    [
      ['Ready', ready],
      ['Reconciling', reconciling],
      ['Stalled', stalled],
    ] as const
  ).map(([type, [value, reason, message]]) => keepTransitionTime({ type, status: value ? 'True' : 'False', reason, message: message.slice(0, 4096), lastTransitionTime: timeOf(now), observedGeneration: generation }, previous));
  return { observedGeneration: generation, conditions, nodes: selected.length, readyNodes: done };
}

function verdictOf(set: PinnedImageSet, generation: number, node: string, report: NodeReport | undefined): NodeVerdict {
  const entry = report?.sets.find((candidate) => candidate.name === set.metadata.name);
  if (!report) return { node, state: 'waiting', why: 'no report from its agent yet' };
  if (!entry || (set.metadata.uid && entry.uid && entry.uid !== set.metadata.uid)) return { node, state: 'waiting', why: 'its agent has not seen the set yet' };
  if (entry.desiredGeneration !== generation) return { node, state: 'waiting', why: `its agent works on generation ${entry.desiredGeneration}, not ${generation}` };
  if (isSetDone(entry)) return { node, state: 'done' };
  if (entry.lastFailedGeneration === generation) return { node, state: 'failed', error: entry.lastFailedGenerationError ?? 'failed' };
  return { node, state: 'waiting', why: missingText(entry) };
}

/** `12 images missing, first quay.io/...` or the reason its pulls wait. */
function missingText(entry: NodeReport['sets'][number]): string {
  if (!entry.firstMissing) return 'pinning';
  const first = `${entry.missing} of ${entry.images} images not pinned, first ${entry.firstMissing.name} (${entry.firstMissing.state})`;
  return entry.waiting ? `${first}; ${entry.waiting}` : first;
}

function named(items: readonly string[]): string {
  const shown = items.slice(0, MAX_NAMED_NODES).join('; ');
  return items.length > MAX_NAMED_NODES ? `${shown}; and ${items.length - MAX_NAMED_NODES} more` : shown;
}

function timeOf(now: Date): string {
  return now.toISOString().replace(/\.\d+Z$/, 'Z');
}

/** metav1.Condition: the transition time moves only when the status does. */
function keepTransitionTime(next: SetCondition, previous: SetStatus | undefined): SetCondition {
  const before = previous?.conditions?.find((candidate) => candidate.type === next.type);
  return before && before.status === next.status ? { ...next, lastTransitionTime: before.lastTransitionTime } : next;
}

/** Whether writing `next` over `current` changes anything a reader sees (transition times follow the statuses). */
export function statusChanged(current: SetStatus | undefined, next: SetStatus): boolean {
  return canonical(current ?? null) !== canonical(next);
}

/** JSON with sorted keys: the API server's answer orders an object's keys its own way. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}
