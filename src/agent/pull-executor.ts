/**
 * The pull executor: pulls the admitted images, a bounded number at a time, each with retries
 * and backoff, a deadline from its size and a minimum throughput (instead of one global
 * deadline), a rest after an error retrying cannot fix, and a detour past the in-cluster cache
 * when it served a corrupt blob. With a cache and cluster-wide pacing, pulls start only once
 * the cache is warm and while this node holds a pull slot.
 */
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import type { Gate } from '../api/staging.js';
import type { PullAuth } from '../cri/client.js';
import type { PullSecret } from '../registry/credentials.js';
import type { RelaySession } from './link-relay.js';
import { SYSTEM_CLOCK, type Clock } from '../net/link-rate.js';
import { LedgerMeter, type LedgerMeterOptions } from '../net/link-meter.js';
import type { CacheWarmer } from './cache-warm.js';
import type { AgentMetrics } from './metrics.js';
import { MemoryLinkLedger, type LinkCharge, type LinkLedger } from './link-share.js';
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
  /** Where pulls over the link are charged under a cap: the cluster's one ledger (`link-share.ts`). */
  readonly linkLedger?: LinkLedger;
  /**
   * Under a cap, CRI-O pulls through the agent's link relay (`link-relay.ts`), which asks for
   * each byte over the link only once it is paid: a pull is then not charged whole beforehand.
   */
  readonly linkRelay?: RelayPort;
  /** The agent's own link cap (`--link-rate`, bytes/s); a set's annotation may lower it. */
  readonly linkRate?: number;
  /** Images the in-cluster cache serves: their pulls do not cross the link (the warm did, under the cap). */
  readonly servedByCache?: (image: string) => boolean;
  /** Time and sleep (tests move them). */
  readonly clock?: Clock;
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

/** What the executor needs of the link relay. */
export interface RelayPort {
  /** CRI-O pulls these images' registries through the relay (drop-in written, CRI-O reloaded); false when that failed (said in the log). */
  wire(images: readonly string[]): Promise<boolean>;
  open(image: string, capBytesPerSecond: number, pullSecrets: readonly PullSecret[], expectedBytes?: number): RelaySession;
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
  /** Whether the image may start now: open when a selecting set naming it is neither paused nor outside its staging windows. */
  readonly gate?: (image: string) => Gate;
  /** The lowest link cap of the sets pulled (bytes/s), if any set carries one. */
  readonly linkRate?: number;
  /** Compressed bytes the image's pull moves over the link (`linkCharges`). */
  readonly linkBytes?: (image: string) => number;
  /** What the link relay reads upstream with: the node's and the sets' pull secrets. */
  readonly pullSecrets?: readonly PullSecret[];
}

/** What a round did not start, and why (paused, outside a window): the status says so and a later pass goes on. */
export type HeldBack = Map<string, Extract<Gate, { open: false }>>;

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
  private readonly clock: Clock;
  private stopped = false;
  /** Images the last round held back (paused, outside a window). */
  private heldBack: HeldBack = new Map();
  /** Compressed bytes of the pulls started over the link since the agent started (the status's `link.bytes`). */
  private linkBytesStarted = 0;
  /** Compressed bytes of this round's pulls over the link not started yet. */
  private linkBytesPending = 0;
  private readonly linkLedger: LinkLedger;

  constructor(private readonly options: PullExecutorOptions) {
    this.retry = options.retry ?? DEFAULT_RETRY;
    this.clock = options.clock ?? SYSTEM_CLOCK;
    this.linkLedger = options.linkLedger ?? new MemoryLinkLedger(this.clock);
  }

  /** The images the last round did not start, and why. */
  held(): ReadonlyMap<string, Extract<Gate, { open: false }>> {
    return this.heldBack;
  }

  /** Compressed bytes of the pulls this agent started over the link, and those of this round still to start. */
  linkBytes(): { bytes: number; pendingBytes: number } {
    return { bytes: this.linkBytesStarted, pendingBytes: this.linkBytesPending };
  }

  /** The cap in force: the lowest of the agent's and the round's. */
  linkCap(round: Pick<PullRound, 'linkRate'>): number | undefined {
    const caps = [this.options.linkRate, round.linkRate].filter((rate): rate is number => rate !== undefined && rate > 0);
    return caps.length ? Math.min(...caps) : undefined;
  }

  /** Under a cap: a meter on the ledger the pulls charge, for this agent's own reads over the link (its size reads). */
  linkMeter(cap: number | undefined, gate?: LedgerMeterOptions['gate']): LedgerMeter | undefined {
    return cap === undefined ? undefined : new LedgerMeter(this.linkLedger, cap, gate ? { gate } : {});
  }

  /** The image's pull history, for the status. */
  history(image: string): Readonly<PullRecord> | undefined {
    return this.records.get(image);
  }

  /** Resting after a permanent error: no attempt before its time. */
  resting(image: string, now = this.clock.now()): boolean {
    return (this.records.get(image)?.notBefore ?? 0) > now;
  }

  /** Whether every pull in flight is within its deadline; undefined with none in flight. */
  withinDeadlines(now = this.clock.now()): boolean | undefined {
    if (this.deadlines.size === 0) return undefined;
    return [...this.deadlines.values()].every((deadline) => now < deadline);
  }

  /** No retry starts after this; attempts under way end as CRI answers. */
  stop(): void {
    this.stopped = true;
  }

  /**
   * Pulls the admitted images not resting, `concurrency` at a time, holding the turn (cache warm,
   * pull slot) meanwhile. Under a link cap each pull over the link first waits for room in the
   * cluster's link ledger; a gate that is shut (paused, outside a window) starts nothing, and one
   * that shuts meanwhile starts nothing more (a strict window also stops the pulls under way).
   */
  async pullAll(round: PullRound): Promise<void> {
    const { admitted, progress } = round;
    this.heldBack = new Map();
    const gate: (image: string) => Gate = round.gate ?? (() => ({ open: true }));
    const due = [...admitted].filter(([image]) => !this.resting(image) && this.open(image, gate));
    const cap = this.linkCap(round);
    const overLink = (image: string) => !(this.options.servedByCache?.(image) ?? false);
    const charge = (image: string) => (overLink(image) ? (round.linkBytes?.(image) ?? 0) : 0);
    const slot = due.length > 0 ? await this.waitForTurn(due.map(([image]) => image), round.arch, cap) : undefined;
    const overLinkDue = due.filter(([image]) => charge(image) > 0).map(([image]) => image);
    // Through the relay each byte is paid as CRI-O asks for it; where it cannot be wired, each pull is charged whole.
    const relayed = cap !== undefined && this.options.linkRelay && overLinkDue.length > 0 ? await this.options.linkRelay.wire(overLinkDue) : false;
    this.linkBytesPending = due.reduce((total, [image]) => total + charge(image), 0);
    const pullOne = async (image: string, bytes: number | undefined): Promise<void> => {
      // A set deleted or unselected meanwhile no longer wants this image.
      if (!round.wanted(image)) return;
      const record = this.record(image);
      // Pulling again at once would only fill the disk or hammer the registry again.
      if ((record.notBefore ?? 0) > this.clock.now()) return;
      // The pull slot was lost (renewals failed, another node took it): pull in a later pass.
      if (slot && !slot.held()) return round.onSlotLost();
      if (!this.open(image, gate)) return progress.poke();
      // Room under the cap; the gate may shut while waiting for it (the room then goes unused).
      // The charge counts until a window after the pull ends (its bytes cross any time until
      // then), or after its deadline if this agent never says it ended.
      let charged: LinkCharge | undefined;
      let relay: RelaySession | undefined;
      if (cap !== undefined && charge(image) > 0 && !relayed) {
        // Waiting for room is progress, not a hang (a big image at a low cap waits minutes).
        const heartbeat = setInterval(() => this.options.progressed(), 10_000);
        try {
          charged = await this.linkLedger.start(charge(image), cap, undefined, this.pullTimeoutMs(bytes) + PULL_DEADLINE_GRACE_MS);
        } finally {
          clearInterval(heartbeat);
        }
      }
      try {
        const now = gate(image);
        if (!now.open) {
          this.heldBack.set(image, now);
          await charged?.end(0);
          charged = undefined;
          return progress.poke();
        }
        if (cap !== undefined) this.linkBytesStarted += charge(image);
        if (cap !== undefined && charge(image) > 0 && relayed) relay = this.options.linkRelay!.open(image, cap, round.pullSecrets ?? [], charge(image));
        record.pulling = true;
        progress.poke();
        // A strict window stops the pull at its close; it is started again in the next window.
        const signal = now.strict && now.closesAt !== undefined ? AbortSignal.timeout(Math.max(now.closesAt - this.clock.now(), 1)) : undefined;
        // Each failed attempt is published at once: the error shows while retries go on.
        await this.pull(image, bytes, round.auth(image), () => progress.poke(), signal);
        await charged?.end();
        charged = undefined;
        if (relay) await this.closeRelay(image, relay, charge(image), cap!);
        relay = undefined;
        if (signal?.aborted) {
          // The timer may fire a few ms before the wall clock reaches the close (libuv's loop time lags it).
          const early = (now.closesAt ?? 0) - this.clock.now();
          if (early > 0) await this.clock.sleep(early);
          const shut = gate(image);
          if (!shut.open) this.heldBack.set(image, shut);
        }
      } finally {
        await charged?.end();
        if (relay) await this.closeRelay(image, relay, charge(image), cap!);
      }
      progress.poke();
    };
    // Under a cap, pulls over the link one at a time: a pull's bytes then cross the link when it is
    // charged, not later behind the others in CRI-O (whose storage commits one image at a time),
    // and a layer two images share crosses once (CRI-O fetches it once per pull in flight). Pulls
    // the cache serves cross the LAN only and keep the node's concurrency.
    const overLinkUnderCap = cap !== undefined && overLinkDue.length > 0;
    const limit = pLimit(overLinkUnderCap ? 1 : round.concurrency);
    try {
      await Promise.all(
        due.map(([image, bytes]) =>
          limit(async () => {
            try {
              await pullOne(image, bytes);
            } finally {
              // Started or not, its bytes are no longer pending once its turn ends.
              this.linkBytesPending = Math.max(0, this.linkBytesPending - charge(image));
            }
          }),
        ),
      );
      await progress.settle();
    } finally {
      this.linkBytesPending = 0;
      await slot?.release();
    }
  }

  /**
   * A relayed pull is over. One that CRI-O took around the relay (a drop-in it did not read yet, a
   * relay it could not reach) moved its bytes uncounted: charged now, so the pulls after it wait for them.
   */
  private async closeRelay(image: string, relay: RelaySession, expected: number, cap: number): Promise<void> {
    const { requests } = await relay.close();
    if (requests > 0 || expected === 0) return;
    this.options.log.warn({ image }, 'CRI-O pulled this image around the link relay: its bytes are charged after they crossed');
    const late = await this.linkLedger.start(expected, cap, undefined, 0);
    await late.end();
  }

  /** One attempt's deadline: from the image's size at the minimum throughput, never under the minimum. */
  private pullTimeoutMs(bytes: number | undefined): number {
    return Math.max(
      this.options.minPullTimeoutMs ?? DEFAULT_MIN_PULL_TIMEOUT_MS,
      bytes === undefined ? 0 : (bytes / (this.options.minThroughputBytesPerSecond ?? DEFAULT_MIN_THROUGHPUT)) * 1000,
    );
  }

  /** Whether the gate lets the image start now; when not, it is held back with the reason. */
  private open(image: string, gate: (image: string) => Gate): boolean {
    const state = gate(image);
    if (!state.open) this.heldBack.set(image, state);
    return state.open;
  }

  /**
   * One image, up to the retry policy's attempts: a permanent error ends them (and rests the
   * image), a corrupt blob from the cache sends the next attempt past it at once.
   */
  async pull(image: string, bytes: number | undefined, auth: PullAuth | undefined, onRetry: () => void, signal?: AbortSignal): Promise<void> {
    const { runtime, log, metrics } = this.options;
    const record = this.record(image);
    const timeoutMs = this.pullTimeoutMs(bytes);
    let delay = this.retry.initialDelayMs;
    /** Set while this image is pulled past the cache. */
    let detour: (() => Promise<void>) | undefined;
    record.pulling = true;
    try {
      for (let attempt = 1; attempt <= this.retry.attempts; attempt++) {
        record.attempts++;
        const started = this.clock.now();
        this.deadlines.set(image, started + timeoutMs + PULL_DEADLINE_GRACE_MS);
        try {
          await runtime.pull(image, { auth, timeoutMs, ...(signal ? { signal } : {}) });
          record.lastError = undefined;
          record.notBefore = undefined;
          metrics?.pulls.inc({ outcome: 'ok' });
          if (bytes !== undefined) metrics?.pulledBytes.inc(bytes);
          metrics?.pullSeconds.observe((this.clock.now() - started) / 1000);
          log.info({ image, attempt, ms: this.clock.now() - started }, 'pulled');
          return;
        } catch (error) {
          // Stopped at a strict window's close: no failure, the next window pulls it again.
          if (signal?.aborted) {
            log.info({ image, attempt }, 'pull stopped: the staging window closed');
            record.attempts--;
            return;
          }
          record.lastError = explainPullError(image, oneLine((error as Error).message));
          const permanent = isPermanentPullError(record.lastError);
          metrics?.pulls.inc({ outcome: 'error' });
          log.warn({ image, attempt, permanent, err: record.lastError }, 'pull failed');
          if (permanent) record.notBefore = this.clock.now() + (this.options.permanentFailureBackoffMs ?? DEFAULT_PERMANENT_FAILURE_BACKOFF_MS);
          if (permanent || attempt === this.retry.attempts || this.stopped) return;
          onRetry();
          // A corrupt blob from the cache: the next attempt goes past it, at once.
          if (!detour && CORRUPT_BLOB_ERROR.test(record.lastError)) {
            detour = await this.options.bypassCache?.(image, record.lastError).catch(() => undefined);
            if (detour) continue;
          }
          await this.clock.sleep(delay);
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
  private async waitForTurn(images: readonly string[], arch: string, cap: number | undefined): Promise<PullSlot | undefined> {
    const { cacheWarmer, pacer, progressed } = this.options;
    if (!cacheWarmer && !pacer) return undefined;
    const heartbeat = setInterval(() => progressed(), 10_000);
    try {
      // The warm is where bytes cross the link when a cache serves the pulls: the whole cap is its own (one node warms at a time).
      await cacheWarmer?.warm(images, arch, () => progressed(), cap);
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
