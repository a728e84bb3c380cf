/**
 * The pull executor: pulls the admitted images, a bounded number at a time, each with retries
 * and backoff, a deadline from its size and a minimum throughput (instead of one global
 * deadline), a rest after an error retrying cannot fix, and a detour past the in-cluster cache
 * when it served a corrupt blob. With a cache and cluster-wide pacing, pulls start only once
 * the cache is warm and while this node holds a pull slot.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import type { PullAuth } from '../cri/client.js';
import type { CacheWarmer } from './cache-warm.js';
import type { AgentMetrics } from './metrics.js';
import { oneLine } from './one-line.js';
import type { PullPacer, PullSlot } from './pacing.js';
import { explainPullError, isPermanentPullError } from './pull-errors.js';
import type { ImageRuntime } from './runtime.js';

export interface RetryPolicy {
  readonly attempts: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
}

export interface PullExecutorOptions {
  readonly runtime: ImageRuntime;
  readonly log: Logger;
  readonly metrics?: AgentMetrics;
  readonly retry?: RetryPolicy;
  /** A pull slower than this (bytes/s, from the image's known size) is stalled. */
  readonly minThroughputBytesPerSecond?: number;
  readonly minPullTimeoutMs?: number;
  /** Cluster-wide pacing: hold a pull slot while pulling. */
  readonly pacer?: PullPacer;
  /** With an in-cluster cache: one node fills it with the due images before any node pulls them. */
  readonly cacheWarmer?: CacheWarmer;
  /**
   * With an in-cluster cache: an image whose pull failed CRI-O's digest check is pulled again past
   * the cache (it holds the blob corrupt: retries through it would get the same bytes). Resolves
   * with what ends the detour once this image's pulling is over, or undefined when nothing changed.
   */
  readonly bypassCache?: (image: string, error: string) => Promise<(() => Promise<void>) | undefined>;
  /** How long an image that failed permanently (ENOSPC, not found, denied) rests before another try. */
  readonly permanentFailureBackoffMs?: number;
  /** A step forward for liveness: an attempt ended, or waiting for the turn goes on. */
  readonly progressed: () => void;
}

/** One image's pull history; a restart forgets it, which only resets attempt counts. */
export interface PullRecord {
  attempts: number;
  lastError?: string;
  pulling: boolean;
  /** After a permanent error: no new attempt before this time (ms since epoch). */
  notBefore?: number;
}

/** What one pass hands the executor. */
export interface PullRound {
  /** Image → its size for the pull timeout (undefined: unknown), in the order admitted. */
  readonly admitted: ReadonlyMap<string, number | undefined>;
  readonly arch: string;
  /** Parallel pulls on this node. */
  readonly concurrency: number;
  readonly auth: (image: string) => PullAuth | undefined;
  /** Whether a selecting set still names the image (one deleted or unselected meanwhile does not). */
  readonly wanted: (image: string) => boolean;
  /** The status while pulls run: poked at each change, settled once they are over. */
  readonly progress: { poke(): void; settle(): Promise<void> };
  /** The pull slot was lost: what is left is pulled in a later pass. */
  readonly onSlotLost: () => void;
}

const DEFAULT_RETRY: RetryPolicy = { attempts: 5, initialDelayMs: 1_000, maxDelayMs: 10_000 };
const DEFAULT_MIN_THROUGHPUT = 1024 * 1024;
const DEFAULT_MIN_PULL_TIMEOUT_MS = 5 * 60_000;
const DEFAULT_PERMANENT_FAILURE_BACKOFF_MS = 10 * 60_000;
/** CRI ends a pull at its timeout; past this much more, the call itself is stuck. */
export const PULL_DEADLINE_GRACE_MS = 60_000;
/** CRI-O's digest check refused a blob (containers/image: "Digest did not match, expected …, got …"). */
const CORRUPT_BLOB_ERROR = /digest did not match|digest mismatch|checksum mismatch/i;

export class PullExecutor {
  private readonly records = new Map<string, PullRecord>();
  /** Pulls in flight: by when CRI must have answered. */
  private readonly deadlines = new Map<string, number>();
  private readonly retry: RetryPolicy;
  private stopped = false;

  constructor(private readonly options: PullExecutorOptions) {
    this.retry = options.retry ?? DEFAULT_RETRY;
  }

  /** The image's pull history, for the status. */
  history(image: string): Readonly<PullRecord> | undefined {
    return this.records.get(image);
  }

  /** Resting after a permanent error: no attempt before its time. */
  resting(image: string, now = Date.now()): boolean {
    return (this.records.get(image)?.notBefore ?? 0) > now;
  }

  /** Whether every pull in flight is within its deadline; undefined with none in flight. */
  withinDeadlines(now = Date.now()): boolean | undefined {
    if (this.deadlines.size === 0) return undefined;
    return [...this.deadlines.values()].every((deadline) => now < deadline);
  }

  /** No retry starts after this; attempts under way end as CRI answers. */
  stop(): void {
    this.stopped = true;
  }

  /** Pulls the admitted images not resting, `concurrency` at a time, holding the turn (cache warm, pull slot) meanwhile. */
  async pullAll(round: PullRound): Promise<void> {
    const { admitted, progress } = round;
    const due = [...admitted].filter(([image]) => !this.resting(image));
    const slot = due.length > 0 ? await this.waitForTurn(due.map(([image]) => image), round.arch) : undefined;
    const limit = pLimit(round.concurrency);
    try {
      await Promise.all(
        due.map(([image, bytes]) =>
          limit(async () => {
            // A set deleted or unselected meanwhile no longer wants this image.
            if (!round.wanted(image)) return;
            const record = this.record(image);
            // Pulling again at once would only fill the disk or hammer the registry again.
            if ((record.notBefore ?? 0) > Date.now()) return;
            // The pull slot was lost (renewals failed, another node took it): pull in a later pass.
            if (slot && !slot.held()) {
              round.onSlotLost();
              return;
            }
            record.pulling = true;
            progress.poke();
            // Each failed attempt is published at once: the error shows while retries go on.
            await this.pull(image, bytes, round.auth(image), () => progress.poke());
            progress.poke();
          }),
        ),
      );
      await progress.settle();
    } finally {
      await slot?.release();
    }
  }

  /**
   * One image, up to the retry policy's attempts: a permanent error ends them (and rests the
   * image), a corrupt blob from the cache sends the next attempt past it at once.
   */
  async pull(image: string, bytes: number | undefined, auth: PullAuth | undefined, onRetry: () => void): Promise<void> {
    const { runtime, log, metrics } = this.options;
    const record = this.record(image);
    const timeoutMs = Math.max(
      this.options.minPullTimeoutMs ?? DEFAULT_MIN_PULL_TIMEOUT_MS,
      bytes === undefined ? 0 : (bytes / (this.options.minThroughputBytesPerSecond ?? DEFAULT_MIN_THROUGHPUT)) * 1000,
    );
    let delay = this.retry.initialDelayMs;
    /** Set while this image is pulled past the cache. */
    let detour: (() => Promise<void>) | undefined;
    record.pulling = true;
    try {
      for (let attempt = 1; attempt <= this.retry.attempts; attempt++) {
        record.attempts++;
        const started = Date.now();
        this.deadlines.set(image, started + timeoutMs + PULL_DEADLINE_GRACE_MS);
        try {
          await runtime.pull(image, { auth, timeoutMs });
          record.lastError = undefined;
          record.notBefore = undefined;
          metrics?.pulls.inc({ outcome: 'ok' });
          if (bytes !== undefined) metrics?.pulledBytes.inc(bytes);
          metrics?.pullSeconds.observe((Date.now() - started) / 1000);
          log.info({ image, attempt, ms: Date.now() - started }, 'pulled');
          return;
        } catch (error) {
          record.lastError = explainPullError(image, oneLine((error as Error).message));
          const permanent = isPermanentPullError(record.lastError);
          metrics?.pulls.inc({ outcome: 'error' });
          log.warn({ image, attempt, permanent, err: record.lastError }, 'pull failed');
          if (permanent) record.notBefore = Date.now() + (this.options.permanentFailureBackoffMs ?? DEFAULT_PERMANENT_FAILURE_BACKOFF_MS);
          if (permanent || attempt === this.retry.attempts || this.stopped) return;
          onRetry();
          // A corrupt blob from the cache: the next attempt goes past it, at once.
          if (!detour && CORRUPT_BLOB_ERROR.test(record.lastError)) {
            detour = await this.options.bypassCache?.(image, record.lastError).catch(() => undefined);
            if (detour) continue;
          }
          await sleep(delay);
          delay = Math.min(delay * 2, this.retry.maxDelayMs);
        } finally {
          this.deadlines.delete(image);
          this.options.progressed();
        }
      }
    } finally {
      record.pulling = false;
      await detour?.().catch(() => undefined);
    }
  }

  /**
   * Before pulling `images`: the cache warmed with them (by this node or another), then a pull
   * slot when pulls are paced. Waiting one's turn is progress, not a hang, for liveness.
   */
  private async waitForTurn(images: readonly string[], arch: string): Promise<PullSlot | undefined> {
    const { cacheWarmer, pacer, progressed } = this.options;
    if (!cacheWarmer && !pacer) return undefined;
    const heartbeat = setInterval(() => progressed(), 10_000);
    try {
      await cacheWarmer?.warm(images, arch, () => progressed());
      return await pacer?.acquire();
    } finally {
      clearInterval(heartbeat);
    }
  }

  private record(image: string): PullRecord {
    let record = this.records.get(image);
    if (!record) {
      record = { attempts: 0, pulling: false };
      this.records.set(image, record);
    }
    return record;
  }
}
