/**
 * The one writer of prestage.dev PinnedImageSet status: the agent that holds the Lease
 * `prestage-set-status-0` (leader election on the pull slots' Lease code, one slot). While it
 * holds it, it watches the sets, the Nodes and every NodePinnedImages, and writes a set's status
 * only when it changed, coalescing every report that came in meanwhile: at most one pass per
 * interval and at most `maxWritesPerSecond` writes, whatever 1000 agents report.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION, type NodePinnedImages, type PinnedImageSet, type SetStatus } from '../api/prestage.js';
import { SET_STATUS_LEASE_PREFIX } from '../api/names.js';
import { Informer } from '../kube/informer.js';
import type { KubeClient, KubeObject } from '../kube/client.js';
import { LeasePacer } from './pacing.js';
import { reportOf, setStatus, statusChanged, type NodeLabels, type NodeReport } from './set-status.js';

export const SET_STATUS_LEASE_LABEL = 'prestage.dev/set-status';
/** One pass at most this often: a node's report and the set's Ready are at most this far apart (plus the write). */
export const SET_STATUS_INTERVAL_MS = 1_000;
/** The API server's fair share for one writer on a large cluster. */
export const MAX_SET_STATUS_WRITES_PER_SECOND = 5;

/** What a pass reads and writes: the cluster's view, or the bench's simulation. */
export interface SetStatusSource {
  sets(): Iterable<PinnedImageSet>;
  nodes(): readonly NodeLabels[];
  reports(): ReadonlyMap<string, NodeReport>;
  write(name: string, status: SetStatus): Promise<void>;
}

export interface SetStatusLoopOptions {
  readonly intervalMs?: number;
  readonly maxWritesPerSecond?: number;
  readonly now?: () => Date;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly log?: Pick<Logger, 'warn'>;
}

/** The pass loop, apart from the API: `poke()` on any change; passes never overlap and coalesce pokes. */
export class SetStatusLoop {
  private dirty = true;
  private wake: (() => void) | undefined;
  private readonly intervalMs: number;
  private readonly spacingMs: number;
  private readonly now: () => Date;
  private readonly sleep: (ms: number) => Promise<void>;
  /** Per set uid/name: the status last written, and the set's resourceVersion it was written over. */
  private readonly written = new Map<string, { status: SetStatus; over: string | undefined }>();
  writes = 0;

  constructor(
    private readonly source: SetStatusSource,
    private readonly options: SetStatusLoopOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? SET_STATUS_INTERVAL_MS;
    this.spacingMs = 1000 / (options.maxWritesPerSecond ?? MAX_SET_STATUS_WRITES_PER_SECOND);
    this.now = options.now ?? (() => new Date());
    this.sleep = options.sleep ?? ((ms) => sleep(ms));
  }

  poke(): void {
    this.dirty = true;
    this.wake?.();
  }

  /** One pass: every set whose status changed, written one at a time, spaced by the write rate. */
  async pass(): Promise<number> {
    this.dirty = false;
    const nodes = this.source.nodes();
    const reports = this.source.reports();
    let written = 0;
    for (const set of this.source.sets()) {
      if (set.metadata.deletionTimestamp) continue;
      const key = `${set.metadata.uid ?? ''}/${set.metadata.name}`;
      // Until the watch brings our write back, the set still shows what it was written over; any
      // other change (someone else's status write included) is read as it is, and corrected.
      const mine = this.written.get(key);
      const previous = mine && mine.over === set.metadata.resourceVersion ? mine.status : set.status;
      const next = setStatus(set, nodes, reports, previous, this.now());
      if (!statusChanged(previous, next)) continue;
      if (written > 0) await this.sleep(this.spacingMs);
      try {
        await this.source.write(set.metadata.name, next);
        this.written.set(key, { status: next, over: set.metadata.resourceVersion });
        written++;
        this.writes++;
      } catch (error) {
        // Deleted meanwhile, or a conflict: the next pass reads it again.
        this.options.log?.warn({ set: set.metadata.name, err: (error as Error).message }, 'cannot write the set status; retrying on the next pass');
        this.dirty = true;
      }
    }
    return written;
  }

  /** Passes while `keep()` holds: after a change, at most one per interval. */
  async run(keep: () => boolean): Promise<void> {
    while (keep()) {
      if (!this.dirty) await new Promise<void>((resolve) => ((this.wake = resolve), void this.sleep(this.intervalMs * 10).then(resolve)));
      this.wake = undefined;
      if (!keep()) return;
      const started = this.now().getTime();
      await this.pass();
      const left = this.intervalMs - (this.now().getTime() - started);
      if (left > 0) await this.sleep(left);
    }
  }
}

/** Keeps only what a pass reads: 1000 nodes' statuses would otherwise be the writer's memory. */
function slimReport(object: KubeObject): KubeObject {
  return { metadata: { name: object.metadata.name }, report: reportOf(object as unknown as NodePinnedImages) };
}

function slimNode(object: KubeObject): KubeObject {
  return { metadata: { name: object.metadata.name, labels: object.metadata.labels ?? {} } };
}

/** The agent's own cache of the sets (`KubeAgentCluster`): the writer reads it rather than keep a second copy of every set. */
export interface SetsCache {
  pinnedImageSets(): readonly PinnedImageSet[];
  /** Resolves once the sets are listed. */
  untilSetsListed(): Promise<void>;
  /** Calls `listener` on every change of the sets, their status included; returns its removal. */
  onSetsChange(listener: () => void): () => void;
}

export interface SetStatusWriterOptions {
  readonly namespace: string;
  /** This node's name: the Lease's holder identity. */
  readonly holder: string;
  readonly log: Logger;
}

/** Runs on every agent; writes only while its agent holds the Lease. Never returns until `signal` aborts. */
export async function runSetStatusWriter(client: KubeClient, setsCache: SetsCache, options: SetStatusWriterOptions, signal: AbortSignal): Promise<void> {
  const lease = new LeasePacer(client, { namespace: options.namespace, slots: 1, holder: options.holder, log: options.log, prefix: SET_STATUS_LEASE_PREFIX, label: SET_STATUS_LEASE_LABEL, what: 'set status Lease' });
  signal.addEventListener('abort', () => lease.stop(), { once: true });
  while (!signal.aborted) {
    const slot = await lease.acquireUnless(() => signal.aborted);
    if (!slot) return;
    options.log.info('this agent writes the PinnedImageSets\' status');
    const watching = new AbortController();
    const stop = () => watching.abort();
    signal.addEventListener('abort', stop, { once: true });
    let loop: SetStatusLoop | undefined;
    let unsubscribe = (): unknown => undefined;
    const poke = () => loop?.poke();
    const onRetry = (error: Error, delayMs: number) => options.log.warn({ err: error.message, delayMs }, 'set status watch failed; retrying');
    const nodes = new Informer<KubeObject>(client, '/api/v1/nodes', { onChange: poke, onRetry, slim: slimNode });
    const reports = new Informer<KubeObject>(client, `/apis/${GROUP}/${VERSION}/${NODE_PINNED_IMAGES}`, { onChange: poke, onRetry, slim: slimReport });
    try {
      await Promise.all([setsCache.untilSetsListed(), nodes.start(watching.signal), reports.start(watching.signal)]);
      unsubscribe = setsCache.onSetsChange(poke);
      loop = new SetStatusLoop(
        {
          sets: () => setsCache.pinnedImageSets(),
          nodes: () => [...nodes.items.values()].map((node) => ({ name: node.metadata.name, labels: node.metadata.labels })),
          reports: () => new Map([...reports.items.values()].map((object) => [object.metadata.name, object['report'] as NodeReport])),
          write: async (name, status) => {
            await client.request('PATCH', `/apis/${GROUP}/${VERSION}/${PINNED_IMAGE_SETS}/${encodeURIComponent(name)}/status`, { body: { status }, contentType: 'application/merge-patch+json' });
          },
        },
        { log: options.log },
      );
      await loop.run(() => slot.held() && !signal.aborted);
    } catch (error) {
      options.log.warn({ err: (error as Error).message }, 'set status writer stopped; trying again');
      await sleep(SET_STATUS_INTERVAL_MS * 5);
    } finally {
      unsubscribe();
      stop();
      signal.removeEventListener('abort', stop);
    }
    if (slot.held()) await slot.release().catch(() => undefined);
  }
}
