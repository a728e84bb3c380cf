/**
 * The node agent's reconcile loop for ONE node: from the PinnedImageSets that select this node
 * and what the runtime really stores (never memory, so a restart resumes), check disk, pull
 * what is missing, pin LAST, and report per set and per image on the node's NodePinnedImages.
 *
 * Compared with MCO's loop: free space (not allocatable) of the image filesystem, counted
 * cumulatively across sets and per set; one failing image or set never blocks the others;
 * per-image state and attempts; timeouts from size and a minimum throughput instead of one
 * global deadline; a failed reload restores the previous pin list; a periodic pass repairs
 * images removed by hand.
 */
import { existsSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import {
  MAX_VERIFIED_SETS,
  MAX_VERIFY_REQUEST_LENGTH,
  VERIFY_REQUESTED_ANNOTATION,
  isSetDone,
  type Condition,
  type ImageStatus,
  type NodePinnedImagesStatus,
  type NodeVerification,
  type PinnedImageSet,
  type PinnedImageSetStatus,
} from '../api/prestage.js';
import { DISK_BYTES_ANNOTATION } from '../api/set-metadata.js';
import type { PullAuth, RuntimeImage } from '../cri/client.js';
import { findCredential, parsePullSecretFile, type PullSecret } from '../registry/credentials.js';
import { parseReference } from '../registry/reference.js';
import { verifySet } from '../verify/verdict.js';
import { explainPullError, isPermanentPullError } from './pull-errors.js';
import { checkDisk, imageBytes } from './disk.js';
import { hasLayers, type ImageLayers, type ImageSizeSource, type SizeResult } from './image-sizes.js';
import type { AgentMetrics } from './metrics.js';
import type { CacheWarmer } from './cache-warm.js';
import type { PullPacer, PullSlot } from './pacing.js';
import { imageNames, type ImageRuntime } from './runtime.js';
import { selectorMatches } from './selector.js';

/** What the agent reads from and writes to the Kubernetes API; informer-backed in production. */
export interface AgentCluster {
  /** Every PinnedImageSet as last seen. */
  pinnedImageSets(): readonly PinnedImageSet[];
  /** This node's labels; undefined until the Node has been seen. */
  nodeLabels(): Readonly<Record<string, string>> | undefined;
  /**
   * A Secret a set names in `spec.pullSecrets`, read afresh (it may rotate); rejects with a
   * one-line reason (not found, wrong type, not readable) that never holds a credential.
   */
  readPullSecret?(name: string): Promise<PullSecret>;
  readStatus(): Promise<NodePinnedImagesStatus | undefined>;
  writeStatus(status: NodePinnedImagesStatus): Promise<void>;
  /** A Warning Event on this Node, for `kubectl describe node`. */
  recordWarning?(reason: string, message: string): Promise<void>;
}

export interface RetryPolicy {
  readonly attempts: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
}

export interface NodeAgentOptions {
  readonly nodeName: string;
  readonly runtime: ImageRuntime;
  readonly cluster: AgentCluster;
  readonly log: Logger;
  readonly metrics?: AgentMetrics;
  /** Parallel pulls on this node (MCO: 5). */
  readonly concurrency: number;
  /** Parallel pulls on a control-plane node, which must keep serving the API (MCO: 1). Default: concurrency. */
  readonly controlPlaneConcurrency?: number;
  /** Bytes of the image filesystem that pre-loading must leave free. */
  readonly reserveBytes: number;
  /** `/var/lib/kubelet/config.json`: the node's pull secret; absent file = anonymous pulls. */
  readonly pullSecretPath?: string;
  /**
   * Exact image sizes for the disk check (the node's registries.conf and pull secret). Without
   * it, or where it cannot tell, a set's `prestage.dev/disk-bytes` annotation is the estimate.
   */
  readonly imageSizes?: ImageSizeSource;
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
  /** Periodic re-check from CRI truth: repairs drift and retries failures. */
  readonly resyncMs?: number;
  /** Liveness: unhealthy once the loop made no progress for this long (a pull within its own deadline is progress). */
  readonly stallMs?: number;
}

const DEFAULT_RETRY: RetryPolicy = { attempts: 5, initialDelayMs: 1_000, maxDelayMs: 10_000 };
const DEFAULT_MIN_THROUGHPUT = 1024 * 1024;
const DEFAULT_MIN_PULL_TIMEOUT_MS = 5 * 60_000;
const DEFAULT_PERMANENT_FAILURE_BACKOFF_MS = 10 * 60_000;
const DEFAULT_RESYNC_MS = 60_000;
const DEFAULT_STALL_MS = 5 * 60_000;
/** CRI ends a pull at its timeout; past this much more, the call itself is stuck. */
const PULL_DEADLINE_GRACE_MS = 60_000;
/** An image whose sizes could not be read only for the status is asked about again after this. */
const STATUS_SIZE_RETRY_MS = 10 * 60_000;
/** CRI-O's digest check refused a blob (containers/image: "Digest did not match, expected …, got …"). */
const CORRUPT_BLOB_ERROR = /digest did not match|digest mismatch|checksum mismatch/i;

interface ImageRecord {
  attempts: number;
  lastError?: string;
  pulling: boolean;
  /** After a permanent error: no new attempt before this time (ms since epoch). */
  notBefore?: number;
}

export class NodeAgent {
  /** Per-image pull history; a restart forgets it, which only resets attempt counts. */
  private readonly records = new Map<string, ImageRecord>();
  private readonly retry: RetryPolicy;
  private running: Promise<void> | undefined;
  private rerun = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Set failures of the current pass that are not per-image (disk, pinning). */
  private setErrors = new Map<string, string>();
  /** Layers with their uncompressed sizes of the selecting sets' images, for the status's bytes. */
  private readonly knownLayers = new Map<string, ImageLayers>();
  /** Images whose sizes could not be read: when to ask again just for the status. */
  private readonly sizesRetryAt = new Map<string, number>();
  /** Set → `generation error` of the failure last announced with an Event. */
  private announced: Map<string, string> | undefined;
  /** The last step forward (a pull attempt ended, a status written, a pass completed), ms since epoch. */
  private lastProgressAt = Date.now();
  /** Pulls in flight: by when CRI must have answered. */
  private readonly pullDeadlines = new Map<string, number>();
  /** The last answer to verify requests, carried in every status written (the previous agent's after a restart). */
  private verified: NodeVerification | undefined;
  /** Status writes, one at a time, so a write never lands over a newer one that carries the latest answer. */
  private writes: Promise<void> = Promise.resolve();
  private verifying: Promise<void> | undefined;
  private verifyAgain = false;

  constructor(private readonly options: NodeAgentOptions) {
    this.retry = options.retry ?? DEFAULT_RETRY;
  }

  /**
   * Reconcile now and on every resync tick; call trigger() when sets or the Node change, verify()
   * when a set's verify request does. Requests made while the agent was down are answered now.
   */
  start(): void {
    if (this.stopped) return;
    this.trigger();
    void this.verify();
    const resyncMs = this.options.resyncMs ?? DEFAULT_RESYNC_MS;
    this.timer = setInterval(() => this.trigger(), resyncMs);
    this.timer.unref();
  }

  /** Requests a pass; passes never overlap, and triggers during one coalesce into one more. */
  trigger(): void {
    if (this.stopped) return;
    if (this.running) {
      this.rerun = true;
      return;
    }
    this.running = (async () => {
      do {
        this.rerun = false;
        this.progressed();
        try {
          await this.reconcile();
          this.progressed();
          this.options.metrics?.reconciles.inc({ outcome: 'ok' });
        } catch (error) {
          this.options.metrics?.reconciles.inc({ outcome: 'error' });
          this.options.log.error({ err: (error as Error).message }, 'reconcile failed');
        }
      } while (this.rerun && !this.stopped);
      this.running = undefined;
    })();
  }

  /**
   * Liveness, from progress rather than from whole passes (a pass includes every pull, which may
   * take hours): healthy while every pull in flight is within its deadline, or, with none in
   * flight, while the last step (a pass started or done, a pull attempt ended, a status written)
   * is recent; between passes, within a resync of that. A pass that fails is no hang: a runtime
   * that is down fails each pass within CRI's call timeout, and restarting the agent would not help.
   */
  healthy(now = Date.now()): boolean {
    if (this.pullDeadlines.size > 0) return [...this.pullDeadlines.values()].every((deadline) => now < deadline);
    const idleMs = this.running ? 0 : (this.options.resyncMs ?? DEFAULT_RESYNC_MS);
    return now - this.lastProgressAt < (this.options.stallMs ?? DEFAULT_STALL_MS) + idleMs;
  }

  private progressed(): void {
    this.lastProgressAt = Date.now();
  }

  /** Resolves when no pass is running or queued. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.idle();
    await this.verifying;
    await this.writes;
  }

  /** One full pass. Exposed so tests and the CLI's `--once` can run exactly one. */
  async reconcile(): Promise<NodePinnedImagesStatus> {
    const { runtime, log } = this.options;
    this.setErrors = new Map();
    const labels = this.options.cluster.nodeLabels();
    if (!labels) throw new Error(`node ${this.options.nodeName} not seen yet`);
    // Failures announced, and verify requests answered, before a restart are in the status the previous agent left.
    if (!this.announced) {
      const left = await this.options.cluster.readStatus();
      this.announced = failuresOf(left);
      this.verified ??= left?.verified;
    }

    // Phase 1: pull what the selecting sets need and the disk allows.
    const sets = this.selectingSets();
    const stored = await runtime.listImages();
    const present = presentNames(stored);
    const filesystem = await runtime.imageFilesystem();
    const nodeSecrets = this.readPullSecrets();
    const setSecrets = await this.readSetPullSecrets(sets, present);
    // A set whose Secret cannot be read pulls nothing: its pulls would only be denied.
    const pullable = sets.filter((set) => !this.setErrors.has(set.metadata.name));
    const allSetSecrets = [...new Set([...setSecrets.values()].flat())];
    const toPull = await this.admitByDisk(pullable, present, filesystem.freeBytes, [...allSetSecrets, ...nodeSecrets], labels['kubernetes.io/arch'] || 'amd64');
    // An image's credentials: the Secrets of the sets that list it, then the node's pull secret.
    const imageSecrets = new Map<string, PullSecret[]>();
    for (const set of pullable) {
      for (const { name } of set.spec.pinnedImages) imageSecrets.set(name, [...(imageSecrets.get(name) ?? []), ...(setSecrets.get(set.metadata.name) ?? [])]);
    }
    const auth = pullAuthFrom((image) => [...(imageSecrets.get(image) ?? []), ...nodeSecrets]);
    const due = [...toPull].filter(([image]) => (this.records.get(image)?.notBefore ?? 0) <= Date.now());
    const slot = due.length > 0 ? await this.waitForTurn(due.map(([image]) => image), labels['kubernetes.io/arch'] || 'amd64') : undefined;
    const limit = pLimit(isControlPlane(labels) ? (this.options.controlPlaneConcurrency ?? this.options.concurrency) : this.options.concurrency);
    const progress = new StatusPublisher(async () => {
      await this.writeStatus(await this.snapshot());
      this.progressed();
    });
    try {
      await Promise.all(
        due.map(([image, bytes]) =>
          limit(async () => {
            // A set deleted or unselected meanwhile no longer wants this image.
            if (!this.selectingSets().some((set) => set.spec.pinnedImages.some((entry) => entry.name === image))) return;
            const record = this.record(image);
            // Pulling again at once would only fill the disk or hammer the registry again.
            if ((record.notBefore ?? 0) > Date.now()) return;
            // The pull slot was lost (renewals failed, another node took it): pull in a later pass.
            if (slot && !slot.held()) {
              this.rerun = true;
              return;
            }
            record.pulling = true;
            progress.poke();
            // Each failed attempt is published at once: the error shows while retries go on.
            await this.pullWithRetries(image, bytes, auth(image), () => progress.poke());
            progress.poke();
          }),
        ),
      );
      await progress.settle();
    } finally {
      await slot?.release();
    }

    // Phase 2: pin LAST, from a fresh look at sets and the runtime.
    const status = await this.pinAndReport(filesystem);
    await this.writeStatus(status);
    await this.announceNewFailures(status);
    log.debug({ sets: status.pinnedImageSets?.length }, 'reconciled');
    return status;
  }

  /**
   * Before pulling `images`: the cache warmed with them (by this node or another), then a pull
   * slot when pulls are paced. Waiting one's turn is progress, not a hang, for liveness.
   */
  private async waitForTurn(images: readonly string[], arch: string): Promise<PullSlot | undefined> {
    const { cacheWarmer, pacer } = this.options;
    if (!cacheWarmer && !pacer) return undefined;
    const heartbeat = setInterval(() => this.progressed(), 10_000);
    try {
      await cacheWarmer?.warm(images, arch, () => this.progressed());
      return await pacer?.acquire();
    } finally {
      clearInterval(heartbeat);
    }
  }

  /**
   * Answers the verify requests of the sets that select this node (their
   * `prestage.dev/verify-requested` annotation): one CRI ListImages made after the requests were
   * seen, per set its missing and unpinned images, in the status's `verified`. No pull, no pin:
   * what the runtime holds now, not after a repair. Calls during one coalesce into one more.
   */
  verify(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.verifying) {
      this.verifyAgain = true;
      return this.verifying;
    }
    this.verifying = (async () => {
      do {
        this.verifyAgain = false;
        try {
          await this.answerVerifyRequests();
        } catch (error) {
          this.options.log.error({ err: (error as Error).message }, 'verify failed');
        }
      } while (this.verifyAgain && !this.stopped);
      this.verifying = undefined;
    })();
    return this.verifying;
  }

  private async answerVerifyRequests(): Promise<void> {
    if (!this.options.cluster.nodeLabels()) return;
    // The sets first, then the runtime: the check is made after each request was seen.
    // The newest requests first (`verify` stamps an RFC 3339 time first), as many as the status holds.
    const requestOf = (set: PinnedImageSet) => (set.metadata.annotations?.[VERIFY_REQUESTED_ANNOTATION] ?? '').slice(0, MAX_VERIFY_REQUEST_LENGTH);
    const requested = this.selectingSets()
      .filter((set) => requestOf(set))
      .sort((a, b) => requestOf(b).localeCompare(requestOf(a)))
      .slice(0, MAX_VERIFIED_SETS);
    if (requested.length === 0) return;
    const stored = await this.options.runtime.listImages();
    this.verified = {
      time: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      sets: requested.map((set) =>
        verifySet(
          { name: set.metadata.name, ...(set.metadata.uid ? { uid: set.metadata.uid } : {}), images: set.spec.pinnedImages.map((entry) => entry.name) },
          requestOf(set),
          stored,
        ),
      ),
    };
    const missing = this.verified.sets.reduce((total, set) => total + set.missingCount + set.unpinnedCount, 0);
    this.options.log.info({ sets: this.verified.sets.length, missingOrUnpinned: missing }, 'verify request answered');
    // The status as last written, with this answer.
    await this.writeStatus(async () => (await this.options.cluster.readStatus()) ?? {});
  }

  /**
   * Every status write goes through here, in order: each carries the latest verify answer as of
   * its turn (`status` may be a function, to read what to write only then).
   */
  private writeStatus(status: NodePinnedImagesStatus | (() => Promise<NodePinnedImagesStatus>)): Promise<void> {
    const write = this.writes.then(async () => {
      const { verified: previous, ...base } = typeof status === 'function' ? await status() : status;
      const verified = this.verified ?? previous;
      await this.options.cluster.writeStatus(verified ? { ...base, verified } : base);
    });
    this.writes = write.catch(() => undefined);
    return write;
  }

  /**
   * One Event per set per new failure (not per pass), so Events do not flood. What was announced
   * is remembered here, not read back from the status: progress writes during the pass already
   * carry the failure. A restarted agent starts from the status it finds.
   */
  private async announceNewFailures(status: NodePinnedImagesStatus): Promise<void> {
    const record = this.options.cluster.recordWarning?.bind(this.options.cluster);
    const failures = failuresOf(status);
    const announced = this.announced ?? new Map<string, string>();
    this.announced = failures;
    if (!record) return;
    for (const set of status.pinnedImageSets ?? []) {
      const failure = failures.get(set.name);
      if (failure === undefined || announced.get(set.name) === failure) continue;
      await record('PinnedImageSetFailed', `${set.name} generation ${set.desiredGeneration}: ${set.lastFailedGenerationError}`).catch((error: Error) =>
        this.options.log.warn({ err: error.message }, 'cannot record an Event'),
      );
    }
  }

  /** The status as it stands, without pulling or pinning: for progress while pulls run. */
  async snapshot(): Promise<NodePinnedImagesStatus> {
    const stored = await this.options.runtime.listImages();
    const filesystem = await this.options.runtime.imageFilesystem();
    return this.buildStatus(this.selectingSets(), stored, filesystem, await this.options.cluster.readStatus(), false);
  }

  /**
   * The Secrets each set names, for the sets with images still to pull (a set that is done
   * never reads them). A Secret that cannot be read fails its set with the reason; one read
   * per Secret per pass, however many sets name it.
   */
  private async readSetPullSecrets(sets: readonly PinnedImageSet[], present: ReadonlySet<string>): Promise<Map<string, PullSecret[]>> {
    const bySet = new Map<string, PullSecret[]>();
    const reads = new Map<string, Promise<PullSecret>>();
    const read = this.options.cluster.readPullSecret?.bind(this.options.cluster);
    for (const set of sets) {
      const names = (set.spec.pullSecrets ?? []).map((reference) => reference.name);
      if (names.length === 0 || set.spec.pinnedImages.every((entry) => present.has(entry.name))) continue;
      try {
        if (!read) throw new Error(`set ${set.metadata.name} names pull secrets, and this agent cannot read Secrets`);
        const secrets: PullSecret[] = [];
        for (const name of names) {
          if (!reads.has(name)) reads.set(name, read(name));
          secrets.push(await (reads.get(name) as Promise<PullSecret>));
        }
        bySet.set(set.metadata.name, secrets);
      } catch (error) {
        const reason = oneLine((error as Error).message);
        this.setErrors.set(set.metadata.name, reason);
        this.options.log.warn({ set: set.metadata.name, err: reason }, 'pull secret unreadable; not pulling this set');
      }
    }
    return bySet;
  }

  private selectingSets(): PinnedImageSet[] {
    const labels = this.options.cluster.nodeLabels() ?? {};
    return this.options.cluster
      .pinnedImageSets()
      .filter((set) => !set.metadata.deletionTimestamp && selectorMatches(set.spec.nodeSelector, labels))
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  }

  /**
   * Which missing images fit, set by set in name order: a set whose new layers do not fit in
   * what is left (free minus reserve minus earlier sets' needs) fails whole with nothing pulled.
   * Sizes are the exact uncompressed sizes of the layers not on the node yet (`disk.ts`); where
   * they cannot be found the set's annotation is the estimate, and the log and error say so.
   */
  private async admitByDisk(
    sets: readonly PinnedImageSet[],
    present: ReadonlySet<string>,
    freeBytes: number,
    pullSecrets: readonly PullSecret[],
    arch: string,
  ): Promise<Map<string, number | undefined>> {
    const wanted = new Set(sets.flatMap((set) => set.spec.pinnedImages.map((entry) => entry.name)));
    for (const image of this.knownLayers.keys()) if (!wanted.has(image)) this.knownLayers.delete(image);
    for (const image of this.sizesRetryAt.keys()) if (!wanted.has(image)) this.sizesRetryAt.delete(image);
    if (![...wanted].some((image) => !present.has(image))) {
      // Nothing missing, nothing to check. Only the status's bytes may still lack sizes (after a
      // restart): look those up once; in the steady state there is no registry traffic.
      const unknown = [...wanted].filter((image) => !this.knownLayers.has(image) && (this.sizesRetryAt.get(image) ?? 0) <= Date.now());
      if (this.options.imageSizes && unknown.length > 0) this.rememberLayers(await this.options.imageSizes.layers(unknown, { arch, pullSecrets }));
      return new Map();
    }
    // Stored images are looked up too: their layers are on the node already.
    const sizes: Map<string, SizeResult> = this.options.imageSizes ? await this.options.imageSizes.layers([...wanted], { arch, pullSecrets }) : new Map();
    this.rememberLayers(sizes);
    const { admitted, failures, notExact } = checkDisk({
      sets: sets.map((set) => ({ name: set.metadata.name, images: set.spec.pinnedImages.map((entry) => entry.name), annotationBytes: annotationBytes(set) })),
      present,
      sizes,
      freeBytes,
      reserveBytes: this.options.reserveBytes,
    });
    for (const [name, why] of notExact) this.options.log.warn({ set: name, err: why }, 'no exact disk check for this set');
    for (const [name, error] of failures) {
      this.setErrors.set(name, error);
      this.options.log.warn({ set: name, err: error }, 'set does not fit on disk');
    }
    return admitted;
  }

  private rememberLayers(sizes: ReadonlyMap<string, SizeResult>): void {
    for (const [image, result] of sizes) {
      if (hasLayers(result)) {
        this.knownLayers.set(image, result);
        this.sizesRetryAt.delete(image);
      } else {
        this.sizesRetryAt.set(image, Date.now() + STATUS_SIZE_RETRY_MS);
      }
    }
  }

  /**
   * A set's bytes over its UNIQUE layers, exact uncompressed sizes (the plan's ON DISK figure):
   * all of them, and those of its images stored already. Unknown (undefined) unless every image's
   * layers are known: a partial sum would be a wrong number.
   */
  private setBytes(images: readonly string[], stored: (image: string) => boolean): { bytes: number; pulledBytes: number } | undefined {
    const all = new Map<string, number>();
    const pulled = new Map<string, number>();
    for (const image of images) {
      const known = this.knownLayers.get(image);
      if (!known) return undefined;
      for (const layer of known.layers) {
        all.set(layer.digest, layer.diskBytes);
        if (stored(image)) pulled.set(layer.digest, layer.diskBytes);
      }
    }
    return { bytes: sum([...all.values()]), pulledBytes: sum([...pulled.values()]) };
  }

  private async pullWithRetries(image: string, bytes: number | undefined, auth: PullAuth | undefined, onRetry: () => void): Promise<void> {
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
        this.pullDeadlines.set(image, started + timeoutMs + PULL_DEADLINE_GRACE_MS);
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
          this.pullDeadlines.delete(image);
          this.progressed();
        }
      }
    } finally {
      record.pulling = false;
      await detour?.().catch(() => undefined);
    }
  }

  private async pinAndReport(filesystem: { capacityBytes: number; freeBytes: number }): Promise<NodePinnedImagesStatus> {
    const { runtime, log, metrics } = this.options;
    const sets = this.selectingSets();
    const stored = await runtime.listImages();
    const present = presentNames(stored);
    const pinnedNow = pinnedNames(stored);
    const previous = await this.options.cluster.readStatus();
    // Satisfied sets pin all their images; a set repairing drift (an image removed by hand) keeps
    // what is still pinned, so one removed image never unpins its siblings.
    const pinList = new Set<string>();
    for (const set of sets) {
      const images = set.spec.pinnedImages.map((entry) => entry.name);
      const satisfied = !this.setErrors.has(set.metadata.name) && images.every((image) => present.has(image));
      for (const image of images) if (satisfied || (present.has(image) && pinnedNow.has(image))) pinList.add(image);
    }
    try {
      await runtime.pin([...pinList]);
      metrics?.pinnedImages.set(pinList.size);
    } catch (error) {
      const message = oneLine((error as Error).message);
      log.error({ err: message }, 'pinning failed');
      for (const set of sets) if (!this.setErrors.has(set.metadata.name)) this.setErrors.set(set.metadata.name, message);
    }
    // pin() returns once CRI reports the pins (or fails): what is listed now is what holds.
    const after = await runtime.listImages();
    const status = this.buildStatus(sets, after, filesystem, previous, true);
    metrics?.setsDone.set(status.pinnedImageSets?.filter(isSetDone).length ?? 0);
    metrics?.setsFailed.set(status.pinnedImageSets?.filter((set) => set.lastFailedGeneration === set.desiredGeneration).length ?? 0);
    return status;
  }

  private buildStatus(
    sets: readonly PinnedImageSet[],
    stored: readonly RuntimeImage[],
    filesystem: { capacityBytes: number; freeBytes: number },
    previous: NodePinnedImagesStatus | undefined,
    /** After this pass pinned: a pulled image that is not pinned now means the reload did not take. */
    afterPin: boolean,
  ): NodePinnedImagesStatus {
    const byName = new Map<string, RuntimeImage>();
    for (const image of stored) for (const name of imageNames(image)) byName.set(name, image);
    const previousSets = new Map((previous?.pinnedImageSets ?? []).map((set) => [set.name, set]));

    const setStatuses = sets.map((set): PinnedImageSetStatus => {
      const generation = set.metadata.generation ?? 1;
      const setError = this.setErrors.get(set.metadata.name);
      const images = set.spec.pinnedImages.map(({ name }): ImageStatus => {
        const record = this.records.get(name);
        const image = byName.get(name);
        const status: ImageStatus = { name, state: 'Pending', attempts: record?.attempts ?? 0 };
        // One unit whether stored or not: the image's unique layers, exact uncompressed sizes
        // (not CRI's size, which differs by runtime and storage driver); none when unknown.
        const bytes = imageBytes(this.knownLayers.get(name));
        if (bytes !== undefined) status.bytes = bytes;
        if (image) {
          if (bytes !== undefined) status.pulledBytes = bytes;
          status.state = image.pinned ? 'Pinned' : 'Pulled';
        } else {
          if (record?.pulling) status.state = 'Pulling';
          else if (record?.lastError) status.state = 'Failed';
        }
        if (record?.lastError && status.state !== 'Pinned' && status.state !== 'Pulled') status.lastError = record.lastError;
        return status;
      });
      // Status is per set object: one deleted and created again under its name starts over.
      const before = [previousSets.get(set.metadata.name)].find((entry) => entry && entry.uid === set.metadata.uid);
      const bytes = this.setBytes(
        images.map((image) => image.name),
        (image) => byName.has(image),
      );
      const result: PinnedImageSetStatus = { name: set.metadata.name, ...(set.metadata.uid ? { uid: set.metadata.uid } : {}), desiredGeneration: generation, ...bytes, images };
      // An earlier generation stays current while a newer one is pulled; the desired one counts
      // only while every image is pinned (below), so an image removed by hand makes it not ready.
      if (before?.currentGeneration && before.currentGeneration < generation) result.currentGeneration = before.currentGeneration;
      const failure =
        setError ??
        // An image whose last attempt failed fails the set while it is retried too (as MCO's
        // degraded-while-retrying): the failure stays visible from the first failed attempt until
        // one succeeds, instead of flipping back to progressing with every retry.
        firstFailure(images, (image) => image.lastError !== undefined && `image ${image.name}: ${image.lastError}`) ??
        // Pulled but CRI does not report the pin: the reload did not take.
        (afterPin && images.every((image) => image.state === 'Pulled' || image.state === 'Pinned')
          ? firstFailure(images, (image) => image.state === 'Pulled' && `image ${image.name} is not pinned after reloading the runtime`)
          : undefined);
      if (images.every((image) => image.state === 'Pinned') && !setError) {
        result.currentGeneration = generation;
      } else if (failure) {
        result.lastFailedGeneration = generation;
        result.lastFailedGenerationError = failure.slice(0, 32_768);
      }
      return result;
    });

    const done = setStatuses.filter(isSetDone).length;
    const failed = setStatuses.filter((set) => set.lastFailedGeneration === set.desiredGeneration);
    const progressing = setStatuses.length - done - failed.length;
    const conditions = [
      condition('Ready', done === setStatuses.length, done === setStatuses.length ? 'AllSetsPinned' : 'SetsPending', `${done}/${setStatuses.length} sets pulled and pinned`),
      condition('Progressing', progressing > 0, progressing > 0 ? 'ImagePrefetch' : 'Idle', `${progressing} sets in progress`),
      condition('Degraded', failed.length > 0, failed.length > 0 ? 'PrefetchFailed' : 'AsExpected', failed.map((set) => `${set.name}: ${set.lastFailedGenerationError}`).join('; ')),
    ].map((next) => keepTransitionTime(next, previous?.conditions));
    return {
      conditions,
      pinnedImageSets: setStatuses,
      imageFilesystem: { capacityBytes: filesystem.capacityBytes, freeBytes: filesystem.freeBytes },
    };
  }

  private record(image: string): ImageRecord {
    let record = this.records.get(image);
    if (!record) {
      record = { attempts: 0, pulling: false };
      this.records.set(image, record);
    }
    return record;
  }

  /** The kubelet's pull secret, re-read each pass (it may rotate); never logged. */
  private readPullSecrets(): PullSecret[] {
    const path = this.options.pullSecretPath;
    if (!path || !existsSync(path)) return [];
    // An empty file is no pull secret: the DaemonSet's FileOrCreate mount makes one on nodes without it.
    if (statSync(path).size === 0) return [];
    try {
      return [parsePullSecretFile(path)];
    } catch (error) {
      this.options.log.warn({ err: (error as Error).message }, 'pull secret unreadable; pulling anonymously');
      return [];
    }
  }
}

/** CRI credentials per image: the first secret with a matching key, the most specific key in it. */
function pullAuthFrom(secretsFor: (image: string) => readonly PullSecret[]): (image: string) => PullAuth | undefined {
  return (image) => {
    const reference = parseReference(image);
    const credential = findCredential(secretsFor(image), reference.registry, reference.repository);
    if (!credential) return undefined;
    return credential.identityToken
      ? { identityToken: credential.identityToken, serverAddress: reference.registry }
      : { username: credential.username, password: credential.password, serverAddress: reference.registry };
  };
}

/** The node's status is written at most this often while pulls run (1000 nodes: 1000 writes/s at most). */
const PROGRESS_WRITE_INTERVAL_MS = 1_000;

/**
 * Publishes progress while pulls run: at most one write at a time, at most one per
 * PROGRESS_WRITE_INTERVAL_MS (pokes in between coalesce into the next), none after settle().
 */
class StatusPublisher {
  private writing: Promise<void> | undefined;
  private again = false;
  private settled = false;
  private lastWriteAt = 0;
  private wake: (() => void) | undefined;
  constructor(private readonly publish: () => Promise<void>) {}

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
        const wait = this.lastWriteAt + PROGRESS_WRITE_INTERVAL_MS - Date.now();
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

function isControlPlane(labels: Readonly<Record<string, string>>): boolean {
  return 'node-role.kubernetes.io/control-plane' in labels || 'node-role.kubernetes.io/master' in labels;
}

/** The set's `prestage.dev/disk-bytes` annotation (the plan's estimate of its total), when valid. */
function annotationBytes(set: PinnedImageSet): number | undefined {
  const total = Number(set.metadata.annotations?.[DISK_BYTES_ANNOTATION]);
  return Number.isFinite(total) && total > 0 ? total : undefined;
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

function presentNames(stored: readonly RuntimeImage[]): Set<string> {
  return new Set(stored.flatMap(imageNames));
}

function pinnedNames(stored: readonly RuntimeImage[]): Set<string> {
  return new Set(stored.filter((image) => image.pinned).flatMap(imageNames));
}

function failuresOf(status: NodePinnedImagesStatus | undefined): Map<string, string> {
  const failed = (status?.pinnedImageSets ?? []).filter((set) => set.lastFailedGeneration !== undefined && set.lastFailedGeneration === set.desiredGeneration);
  return new Map(failed.map((set) => [set.name, `${set.desiredGeneration} ${set.lastFailedGenerationError}`]));
}

function firstFailure(images: readonly ImageStatus[], describe: (image: ImageStatus) => string | false): string | undefined {
  for (const image of images) {
    const text = describe(image);
    if (text) return text;
  }
  return undefined;
}

function condition(type: Condition['type'], value: boolean, reason: string, message: string): Condition {
  return { type, status: value ? 'True' : 'False', reason, message, lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') };
}

/** metav1.Condition semantics: the transition time moves only when the status does. */
function keepTransitionTime(next: Condition, previous: readonly Condition[] | undefined): Condition {
  const before = previous?.find((candidate) => candidate.type === next.type);
  return before && before.status === next.status ? { ...next, lastTransitionTime: before.lastTransitionTime } : next;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 4096);
}
