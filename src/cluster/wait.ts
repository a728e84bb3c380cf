/**
 * Waiting for sets: a pure tracker turns successive progress snapshots into per-node and
 * per-set events and a verdict (ready, failed); `waitForSets` drives it from the backend's
 * watch, with `--fail-after` and `--timeout` timers. Never polls.
 */
import { BadInputError, ExitCode, PrestageError } from '../errors.js';
import { LinkMeter, type LinkEvent } from './link-meter.js';
import { setLongTimeout, type LongTimer } from '../long-timer.js';
import { setReady, type NodeSetPhase, type NodeSetProgress, type PinningBackend, type ProgressSnapshot, type SetProgress } from './backend.js';

/** wait: a set failed on a node (degraded for longer than --fail-after). Exit 1. */
export class SetFailedError extends PrestageError {
  readonly exitCode = ExitCode.failed;
}

/** wait: --timeout passed before every set was ready. Exit 124. */
export class WaitTimeoutError extends PrestageError {
  readonly exitCode = ExitCode.timeout;
}

export interface NodeEvent {
  readonly type: 'node';
  readonly time: string;
  readonly set: string;
  readonly node: string;
  readonly phase: NodeSetPhase;
  readonly desiredGeneration: number;
  readonly currentGeneration: number;
  readonly error?: string;
  /** What the node reports while it works on (e.g. MCO's sync deadline, another set's error). */
  readonly note?: string;
  readonly imagesDone?: number;
  readonly imagesTotal?: number;
  readonly pulledBytes?: number;
  readonly bytes?: number;
}

export interface SetEvent {
  readonly type: 'set';
  readonly time: string;
  readonly set: string;
  readonly ready: boolean;
  readonly nodesDone: number;
  readonly nodesTotal: number;
  readonly pulledBytes?: number;
  readonly bytes?: number;
  /** Seconds to go, from the rate so far (bytes when reported, else nodes). */
  readonly etaSeconds?: number;
}

export type WaitEvent = NodeEvent | SetEvent | LinkEvent;

export interface Failure {
  readonly set: string;
  readonly node: string;
  readonly error: string;
  readonly degradedMs: number;
  /** Nothing reported the node at all (no status object), rather than a reported failure. */
  readonly unreported: boolean;
}

interface SetTrend {
  readonly startedAt: number;
  readonly startDone: number;
  /** Since when, and from how many pulled bytes, the set's bytes are known. */
  bytesSince?: { readonly at: number; readonly pulled: number };
}

/** Pure state: feed snapshots with the time they were seen; read events and the verdict. */
export class WaitTracker {
  private readonly nodes = new Map<string, NodeSetProgress>();
  private readonly sets = new Map<string, SetEvent>();
  private readonly trends = new Map<string, SetTrend>();
  /** `set/node` → since when degraded (or unreported), and the first error of this streak. */
  private readonly degraded = new Map<string, { since: number; error: string; unreported: boolean }>();
  latest: ProgressSnapshot = { sets: [] };
  private readonly linkMeter = new LinkMeter('nodes');
  /** The last link figures shown (rounded as printed): a new event only when they change. */
  private linkShown = '';
  private linkShownAt = -Infinity;
  lastLink: LinkEvent | undefined;

  /** `predictedEndMs`: when each node is expected to be done (MCO's pace), for an ETA before any is. */
  constructor(
    private readonly failAfterMs: number,
    private readonly predictedEndMs: ReadonlyMap<string, number> = new Map(),
  ) {}

  observe(snapshot: ProgressSnapshot, now: number): WaitEvent[] {
    this.latest = snapshot;
    const time = new Date(now).toISOString();
    const events: WaitEvent[] = [];
    for (const set of snapshot.sets) {
      const seen = new Set<string>();
      for (const n of set.nodes) {
        const key = `${set.name}/${n.node}`;
        seen.add(key);
        const before = this.nodes.get(key);
        this.nodes.set(key, n);
        const streak = n.phase === 'degraded' ? { error: n.error ?? 'degraded', unreported: false } : n.unreported ? { error: n.unreported, unreported: true } : undefined;
        if (!streak) this.degraded.delete(key);
        else if (this.degraded.get(key)?.unreported !== streak.unreported) this.degraded.set(key, { since: now, ...streak });
        if (!before || nodeChanged(before, n)) events.push(nodeEvent(n, time));
      }
      for (const key of [...this.nodes.keys()]) {
        if (key.startsWith(`${set.name}/`) && !seen.has(key)) {
          this.nodes.delete(key);
          this.degraded.delete(key);
        }
      }
      const summary = this.setEvent(set, now, time);
      const before = this.sets.get(set.name);
      this.sets.set(set.name, summary);
      if (!before || before.ready !== summary.ready || before.nodesDone !== summary.nodesDone || before.nodesTotal !== summary.nodesTotal || before.pulledBytes !== summary.pulledBytes) events.push(summary);
    }
    if (snapshot.link) {
      const link = this.linkMeter.sample(snapshot.link, now);
      this.lastLink = link;
      // A new line only when a figure moves in its first two digits, and
      const shown = [link.bytesPerSecond, link.capBytesPerSecond, link.pendingBytes, link.etaSeconds].map((n) => (n === undefined ? '' : n.toPrecision(2))).join('/');
      // at most one line per 10 s: the rate moves with every snapshot.
      if (shown !== this.linkShown && now - this.linkShownAt >= 10_000) {
        this.linkShown = shown;
        this.linkShownAt = now;
        events.push(link);
      }
    }
    return events;
  }

  ready(): boolean {
    return this.latest.sets.length > 0 && this.latest.sets.every(setReady);
  }

  /** The node degraded longest past --fail-after, with the first error it reported. */
  failure(now: number): Failure | undefined {
    let worst: Failure | undefined;
    for (const [key, { since, error, unreported }] of this.degraded) {
      const degradedMs = now - since;
      if (degradedMs >= this.failAfterMs && (!worst || degradedMs > worst.degradedMs)) {
        const [set, node] = key.split('/') as [string, string];
        worst = { set, node, error, degradedMs, unreported };
      }
    }
    return worst;
  }

  /** When the next degraded node crosses --fail-after, if any is degraded. */
  nextFailureCheck(): number | undefined {
    const since = [...this.degraded.values()].map((d) => d.since + this.failAfterMs);
    return since.length ? Math.min(...since) : undefined;
  }

  summaries(): SetEvent[] {
    return [...this.sets.values()];
  }

  private setEvent(set: SetProgress, now: number, time: string): SetEvent {
    const nodesDone = set.nodes.filter((n) => n.phase === 'done').length;
    // A total over only the nodes that report bytes so far would grow as nodes report: bytes
    // are shown only once every node the set targets reports them.
    const sized = set.nodes.length > 0 && set.nodes.every((n) => n.bytes !== undefined);
    const bytes = sized ? set.nodes.reduce((a, n) => a + n.bytes!, 0) : undefined;
    const pulledBytes = sized ? set.nodes.reduce((a, n) => a + (n.pulledBytes ?? 0), 0) : undefined;
    let trend = this.trends.get(set.name);
    if (!trend) {
      trend = { startedAt: now, startDone: nodesDone };
      this.trends.set(set.name, trend);
    }
    if (pulledBytes !== undefined && !trend.bytesSince) trend.bytesSince = { at: now, pulled: pulledBytes };
    const elapsed = (now - trend.startedAt) / 1000;
    const bytesElapsed = trend.bytesSince ? (now - trend.bytesSince.at) / 1000 : 0;
    let etaSeconds: number | undefined;
    if (bytesElapsed > 0 && bytes !== undefined && pulledBytes! > trend.bytesSince!.pulled) etaSeconds = ((bytes - pulledBytes!) * bytesElapsed) / (pulledBytes! - trend.bytesSince!.pulled);
    else {
      // Without bytes: MCO's pace, where predicted (a master is slower than its workers), else the nodes' rate.
      const ends = set.nodes.filter((n) => n.phase !== 'done').flatMap((n) => (this.predictedEndMs.has(n.node) ? [this.predictedEndMs.get(n.node)!] : []));
      if (ends.length) etaSeconds = Math.max(0, (Math.max(...ends) - now) / 1000);
      else if (elapsed > 0 && nodesDone > trend.startDone) etaSeconds = ((set.nodes.length - nodesDone) * elapsed) / (nodesDone - trend.startDone);
    }
    return {
      type: 'set',
      time,
      set: set.name,
      ready: setReady(set),
      nodesDone,
      nodesTotal: set.nodes.length,
      ...(bytes !== undefined ? { bytes, pulledBytes: pulledBytes! } : {}),
      ...(etaSeconds !== undefined && !setReady(set) ? { etaSeconds: Math.round(etaSeconds) } : {}),
    };
  }
}

function nodeChanged(a: NodeSetProgress, b: NodeSetProgress): boolean {
  return a.phase !== b.phase || a.desiredGeneration !== b.desiredGeneration || a.currentGeneration !== b.currentGeneration || a.error !== b.error || a.note !== b.note || a.imagesDone !== b.imagesDone || a.pulledBytes !== b.pulledBytes;
}

function nodeEvent(n: NodeSetProgress, time: string): NodeEvent {
  const { node, set, phase, desiredGeneration, currentGeneration, error, note, imagesDone, imagesTotal, pulledBytes, bytes } = n;
  return JSON.parse(JSON.stringify({ type: 'node', time, set, node, phase, desiredGeneration, currentGeneration, error, note, imagesDone, imagesTotal, pulledBytes, bytes })) as NodeEvent;
}

export interface WaitOptions {
  readonly timeoutMs: number;
  readonly failAfterMs: number;
  /** Every event, in order, and the tracker after each batch (for progress lines). */
  readonly onEvents: (events: readonly WaitEvent[], tracker: WaitTracker) => void;
  readonly onRetry?: (error: Error, delayMs: number) => void;
  /** Per node, when it is predicted to be done (epoch ms). */
  readonly predictedEndMs?: ReadonlyMap<string, number>;
}

/** Resolves when every set is ready; rejects with SetFailedError or WaitTimeoutError. */
export async function waitForSets(backend: PinningBackend, sets: readonly string[] | undefined, options: WaitOptions): Promise<WaitTracker> {
  const tracker = new WaitTracker(options.failAfterMs, options.predictedEndMs);
  const abort = new AbortController();
  // Long timers: --timeout and --fail-after may be longer than setTimeout holds (720h).
  let failTimer: LongTimer | undefined;
  let timeoutTimer: LongTimer | undefined;
  try {
    return await new Promise<WaitTracker>((resolve, reject) => {
      const finish = (error?: Error) => {
        abort.abort();
        if (error) reject(error);
        else resolve(tracker);
      };
      const judge = () => {
        const failure = tracker.failure(Date.now());
        if (failure) {
          const seconds = Math.round(failure.degradedMs / 1000);
          return finish(new SetFailedError(failure.unreported
            ? `set ${failure.set}: node ${failure.node} has not reported for ${seconds} s: ${failure.error}`
            : `set ${failure.set} failed on node ${failure.node} (degraded for ${seconds} s): ${failure.error}`));
        }
        if (tracker.ready()) return finish();
        failTimer?.clear();
        const next = tracker.nextFailureCheck();
        if (next !== undefined) failTimer = setLongTimeout(judge, next - Date.now());
      };
      let first = true;
      const onSnapshot = (snapshot: ProgressSnapshot) => {
        if (abort.signal.aborted) return;
        if (first) {
          first = false;
          const missing = snapshot.sets.filter((s) => !s.exists).map((s) => s.name);
          if (missing.length) return finish(new BadInputError(`no PinnedImageSet ${missing.join(', ')} on the cluster`));
          if (!snapshot.sets.length) return finish(new BadInputError('no prestage PinnedImageSets on the cluster; name the sets to wait for'));
        }
        options.onEvents(tracker.observe(snapshot, Date.now()), tracker);
        judge();
      };
      timeoutTimer = setLongTimeout(() => finish(new WaitTimeoutError(`timed out after ${Math.round(options.timeoutMs / 1000)} s: ${pendingSummary(tracker)}`)), options.timeoutMs);
      backend.watch(sets, onSnapshot, { signal: abort.signal, ...(options.onRetry ? { onRetry: options.onRetry } : {}) }).catch((error: Error) => finish(error));
    });
  } finally {
    failTimer?.clear();
    timeoutTimer?.clear();
    abort.abort();
  }
}

function pendingSummary(tracker: WaitTracker): string {
  const parts = tracker.latest.sets.filter((s) => !setReady(s)).map((s) => {
    const waiting = s.nodes.filter((n) => n.phase !== 'done');
    // Nodes in the same state with the same note once: MCO copies one error to every node's sets.
    const groups = new Map<string, string[]>();
    for (const n of waiting) {
      const state = `${n.phase}${n.note ? `: ${n.note}` : ''}`;
      groups.set(state, [...(groups.get(state) ?? []), n.node]);
    }
    const shown = [...groups].map(([state, nodes]) => `${nodes.slice(0, 3).join(', ')}${nodes.length > 3 ? ` and ${nodes.length - 3} more` : ''} ${state}`).join('; ');
    return `${s.name} ${s.nodes.length - waiting.length}/${s.nodes.length} nodes done${s.nodes.length ? ` (waiting on ${shown})` : ', targets no nodes'}`;
  });
  return parts.join('; ') || 'no progress seen';
}

/** `90s`, `5m`, `1h30m`, `250ms`, or plain seconds. */
