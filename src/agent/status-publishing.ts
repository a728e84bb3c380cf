/**
 * Status publishing: every write of the node's NodePinnedImages status in order, each with the
 * latest verify answer; progress while pulls run, at most one write a second (more apart for big statuses: progressIntervalMs); one Warning Event
 * per set per new failure.
 */
import type { Logger } from 'pino';
import type { NodePinnedImagesStatus, NodeVerification } from '../api/prestage.js';
import type { AgentCluster } from './agent-cluster.js';
import { failuresOf } from './node-status.js';

/** The node's status is written at most this often while pulls run (1000 nodes: 1000 writes/s at most). */
export const PROGRESS_WRITE_INTERVAL_MS = 1_000;
/** Images per second of interval beyond the first: a status of N images is written at most every N/100 s. */
const IMAGES_PER_PROGRESS_SECOND = 100;

/**
 * How often progress is written for a status of `images` entries. Each write sends, and each
 * watcher of NodePinnedImages parses, the whole status: at one a second, a set of 1000 images
 * cost the agent 19x the CPU of 100 images, mostly JSON and collection (npm run bench:agent,
 * BENCH_IMAGES). Spaced with the size, the bytes written a second stay those of 100 images.
 */
export function progressIntervalMs(images: number): number {
  return Math.max(PROGRESS_WRITE_INTERVAL_MS, Math.ceil(images / IMAGES_PER_PROGRESS_SECOND) * 1_000);
}

/** Status writes, one at a time, so a write never lands over a newer one that carries the latest answer. */
export class StatusWriter {
  private writes: Promise<void> = Promise.resolve();

  constructor(
    private readonly cluster: Pick<AgentCluster, 'writeStatus'>,
    /** The last answer to verify requests, carried in every status written. */
    private readonly verified: () => NodeVerification | undefined,
  ) {}

  /**
   * Every status write goes through here, in order: each carries the latest verify answer as of
   * its turn (`status` may be a function, to read what to write only then).
   */
  write(status: NodePinnedImagesStatus | (() => Promise<NodePinnedImagesStatus>)): Promise<void> {
    const write = this.writes.then(async () => {
      const { verified: previous, ...base } = typeof status === 'function' ? await status() : status;
      const verified = this.verified() ?? previous;
      await this.cluster.writeStatus(verified ? { ...base, verified } : base);
    });
    this.writes = write.catch(() => undefined);
    return write;
  }

  /** Resolves once every write asked for so far is over. */
  async drained(): Promise<void> {
    await this.writes;
  }
}

/**
 * Publishes progress while pulls run: at most one write at a time, at most one per
 * PROGRESS_WRITE_INTERVAL_MS (pokes in between coalesce into the next), none after settle().
 */
export class ProgressPublisher {
  private writing: Promise<void> | undefined;
  private again = false;
  private settled = false;
  private lastWriteAt = 0;
  private wake: (() => void) | undefined;
  constructor(
    private readonly publish: () => Promise<void>,
    private readonly intervalMs = PROGRESS_WRITE_INTERVAL_MS,
  ) {}

  poke(): void {
    if (this.settled) return;
    if (this.writing) {
      this.again = true;
      return;
    }
    this.writing = this.write();
  }

  /** Drops a write waiting for its turn; waits for one under way. */
  async settle(): Promise<void> {
    this.settled = true;
    this.again = false;
    this.wake?.();
    await this.writing;
  }

  private async write(): Promise<void> {
    try {
      do {
        this.again = false;
        const wait = this.lastWriteAt + this.intervalMs - Date.now();
        if (wait > 0) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, wait);
            this.wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          this.wake = undefined;
        }
        if (this.settled) return;
        this.lastWriteAt = Date.now();
        await this.publish();
      } while (this.again);
    } catch {
      // Progress is best effort; the end of the pass writes the status that counts.
    } finally {
      this.writing = undefined;
    }
  }
}

/**
 * One Event per set per new failure (not per pass), so Events do not flood. What was announced
 * is remembered here, not read back from the status: progress writes during the pass already
 * carry the failure. A restarted agent starts from the status it finds.
 */
export class FailureEvents {
  /** Set → `generation error` of the failure last announced with an Event. */
  private announced: Map<string, string> | undefined;

  constructor(
    private readonly cluster: Pick<AgentCluster, 'recordWarning'>,
    private readonly log: Logger,
  ) {}

  /** Whether the failures announced before a restart were taken from the status it left. */
  get primed(): boolean {
    return this.announced !== undefined;
  }

  /** Failures announced before a restart are in the status the previous agent left. */
  prime(left: NodePinnedImagesStatus | undefined): void {
    this.announced = failuresOf(left);
  }

  async announce(status: NodePinnedImagesStatus): Promise<void> {
    const record = this.cluster.recordWarning?.bind(this.cluster);
    const failures = failuresOf(status);
    const announced = this.announced ?? new Map<string, string>();
    this.announced = failures;
    if (!record) return;
    for (const set of status.pinnedImageSets ?? []) {
      const failure = failures.get(set.name);
      if (failure === undefined || announced.get(set.name) === failure) continue;
      await record('PinnedImageSetFailed', `${set.name} generation ${set.desiredGeneration}: ${set.lastFailedGenerationError}`).catch((error: Error) =>
        this.log.warn({ err: error.message }, 'cannot record an Event'),
      );
    }
  }
}
