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
 *
 * This module selects the sets and runs the passes; the rooms do the work: `pull-credentials.ts`
 * (what to pull with), `disk-admission.ts` (what may start), `pull-executor.ts` (pulling),
 * `pinning.ts` (pin and reload), `verify-answers.ts` (verify requests), `node-status.ts` and
 * `status-publishing.ts` (what the status says, and writing it).
 */
import type { Logger } from 'pino';
import { isSetDone, type NodePinnedImagesStatus, type PinnedImageSet } from '../api/prestage.js';
import { scheduleOf } from '../api/staging.js';
import type { RuntimeImage } from '../cri/client.js';
import type { AgentCluster } from './agent-cluster.js';
import { DiskAdmission } from './disk-admission.js';
import type { ImageSizeSource } from './image-sizes.js';
import type { AgentMetrics } from './metrics.js';
import { buildStatus, isSetFailed } from './node-status.js';
import { imagesToPin, pinImages } from './pinning.js';
import { pullAuthForSets, readNodePullSecret, readSetPullSecrets } from './pull-credentials.js';
import { PullExecutor, type PullExecutorOptions } from './pull-executor.js';
import { LinkShutError } from '../net/link-meter.js';
import type { QuietCollector } from './quiet-collector.js';
import { presentNames, type ImageRuntime } from './runtime.js';
import { isControlPlane, selectingSets } from './selector.js';
import { FailureEvents, progressIntervalMs, ProgressPublisher, StatusWriter } from './status-publishing.js';
import { VerifyAnswers } from './verify-answers.js';
import { capOf, gateFor, holdUnsized, rateOf, shutNow, waitingSets } from './staging-gate.js';

export type { AgentCluster } from './agent-cluster.js';
export type { RetryPolicy } from './pull-executor.js';

/** The pull executor's settings (retries, timeouts, pacing, the cache) are the agent's own. */
type PullSettings = Pick<
  PullExecutorOptions,
  'retry' | 'minThroughputBytesPerSecond' | 'minPullTimeoutMs' | 'pacer' | 'linkLedger' | 'linkRelay' | 'linkRate' | 'servedByCache' | 'cacheWarmer' | 'bypassCache' | 'permanentFailureBackoffMs'
>;

export interface NodeAgentOptions extends PullSettings {
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
  /** Where cached images come from now (`--cache-mirror`, `--cache-leaf`): reported in the status. */
  readonly cacheRoute?: () => NodePinnedImagesStatus['cache'];
  /** `/var/lib/kubelet/config.json`: the node's pull secret; absent file = anonymous pulls. */
  readonly pullSecretPath?: string;
  /**
   * Exact image sizes for the disk check (the node's registries.conf and pull secret). Without
   * it, or where it cannot tell, a set's `prestage.dev/disk-bytes` annotation is the estimate.
   */
  readonly imageSizes?: ImageSizeSource;
  /** Periodic re-check from CRI truth: repairs drift and retries failures. */
  readonly resyncMs?: number;
  /** Liveness: unhealthy once the loop made no progress for this long (a pull within its own deadline is progress). */
  readonly stallMs?: number;
  /** Told when passes start and when they go quiet: the idle agent gives back what its last pass filled. */
  readonly quietCollector?: Pick<QuietCollector, 'busy' | 'quiet'>;
}

const DEFAULT_RESYNC_MS = 60_000;
const DEFAULT_STALL_MS = 5 * 60_000;
/** While sets wait for a window: look again at least this often (the clock may have been set meanwhile). */
const WINDOW_RECHECK_MS = 10_000;

/** A window that shuts while the pass sizes its sets stops the size reads at once: nothing crosses the link while it is shut. */
function closedMidPass(open: readonly PinnedImageSet[]): void {
  const shut = shutNow(open);
  if (shut.length > 0) throw new LinkShutError(`${shut[0]!.metadata.name} may not use the link now (paused or outside its staging windows); its images are sized at the opening`);
}

export class NodeAgent {
  private readonly admission: DiskAdmission;
  private readonly pulls: PullExecutor;
  private readonly verifyAnswers: VerifyAnswers;
  private readonly writer: StatusWriter;
  private readonly failureEvents: FailureEvents;
  private running: Promise<void> | undefined;
  private rerun = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Set failures of the current pass that are not per-image (disk, pinning, its Secret). */
  private setErrors = new Map<string, string>();
  private windowTimer: NodeJS.Timeout | undefined;
  /** The last step forward (a pull attempt ended, a status written, a pass completed), ms since epoch. */
  private lastProgressAt = Date.now();

  constructor(private readonly options: NodeAgentOptions) {
    const { cluster, runtime, log } = options;
    this.admission = new DiskAdmission(options);
    this.pulls = new PullExecutor({ ...options, progressed: () => this.progressed() });
    this.verifyAnswers = new VerifyAnswers({ cluster, runtime, log, selectingSets: () => this.selectingSets(), write: (status) => this.writer.write(status) });
    this.writer = new StatusWriter(cluster, () => this.verifyAnswers.answer);
    this.failureEvents = new FailureEvents(cluster, log);
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
    this.options.quietCollector?.busy();
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
      if (!this.stopped) this.options.quietCollector?.quiet();
    })();
  }

  /**
   * Answers the verify requests of the sets that select this node from what the runtime holds
   * now (`verify-answers.ts`). Calls during one coalesce into one more.
   */
  verify(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return this.verifyAnswers.verify();
  }

  /**
   * Liveness, from progress rather than from whole passes (a pass includes every pull, which may
   * take hours): healthy while every pull in flight is within its deadline, or, with none in
   * flight, while the last step (a pass started or done, a pull attempt ended, a status written)
   * is recent; between passes, within a resync of that. A pass that fails is no hang: a runtime
   * that is down fails each pass within CRI's call timeout, and restarting the agent would not help.
   */
  healthy(now = Date.now()): boolean {
    const pullsOnTime = this.pulls.withinDeadlines(now);
    if (pullsOnTime !== undefined) return pullsOnTime;
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
    this.pulls.stop();
    this.verifyAnswers.stop();
    if (this.timer) clearInterval(this.timer);
    if (this.windowTimer) clearTimeout(this.windowTimer);
    await this.idle();
    await this.verifyAnswers.idle();
    await this.writer.drained();
  }

  /** One full pass. Exposed so tests and the CLI's `--once` can run exactly one. */
  async reconcile(): Promise<NodePinnedImagesStatus> {
    const { runtime, cluster, log } = this.options;
    this.setErrors = new Map();
    const labels = cluster.nodeLabels();
    if (!labels) throw new Error(`node ${this.options.nodeName} not seen yet`);
    // Failures announced, and verify requests answered, before a restart are in the status the previous agent left.
    if (!this.failureEvents.primed) {
      const left = await cluster.readStatus();
      this.failureEvents.prime(left);
      this.verifyAnswers.adopt(left?.verified);
    }

    // Phase 1: pull what the selecting sets need and the disk allows.
    const sets = this.selectingSets();
    const arch = labels['kubernetes.io/arch'] || 'amd64';
    const present = presentNames(await runtime.listImages());
    const filesystem = await runtime.imageFilesystem();
    const nodeSecrets = readNodePullSecret(this.options.pullSecretPath, log);
    const setSecrets = await readSetPullSecrets(sets, present, cluster.readPullSecret?.bind(cluster), log);
    for (const [name, reason] of setSecrets.failures) this.setErrors.set(name, reason);
    // A set whose staging windows cannot be read pulls nothing: when it may is unknown.
    for (const set of sets) {
      try {
        scheduleOf(set.metadata.annotations);
      } catch (error) {
        this.setErrors.set(set.metadata.name, (error as Error).message);
      }
    }
    // A set whose Secret cannot be read pulls nothing: its pulls would only be denied.
    const pullable = sets.filter((set) => !this.setErrors.has(set.metadata.name));
    const allSetSecrets = [...new Set([...setSecrets.bySet.values()].flat())];
    // Outside its windows (or paused) a set costs the link nothing: it is sized and charged at its opening.
    const shut = shutNow(pullable);
    const open = pullable.filter((set) => !shut.includes(set));
    const { admitted, failures, linkBytes } = await this.admission.admit(open, present, filesystem.freeBytes, [...allSetSecrets, ...nodeSecrets], arch, { shut, meter: () => this.pulls.linkMeter(this.pulls.linkCap(rateOf(open)), () => closedMidPass(open)) });
    for (const [name, error] of failures) this.setErrors.set(name, error);
    // The shut sets' missing images are handed on unsized, held for this pass: the status says why they wait.
    const sized = new Set(open.flatMap((set) => set.spec.pinnedImages.map((entry) => entry.name)));
    const unsized = new Set(shut.flatMap((set) => set.spec.pinnedImages.map((entry) => entry.name)).filter((image) => !present.has(image) && !sized.has(image)));
    for (const image of unsized) admitted.set(image, undefined);
    const progress = new ProgressPublisher(
      async () => {
        await this.writer.write(await this.snapshot());
        this.progressed();
      },
      progressIntervalMs(sets.reduce((images, set) => images + set.spec.pinnedImages.length, 0)),
    );
    await this.pulls.pullAll({
      admitted,
      arch,
      concurrency: isControlPlane(labels) ? (this.options.controlPlaneConcurrency ?? this.options.concurrency) : this.options.concurrency,
      auth: pullAuthForSets(pullable, setSecrets.bySet, nodeSecrets),
      wanted: (image) => this.selectingSets().some((set) => set.spec.pinnedImages.some((entry) => entry.name === image)),
      progress,
      onSlotLost: () => {
        this.rerun = true;
      },
      // From the sets as they are now: a pause or a new window applies to pulls not started yet.
      gate: holdUnsized(gateFor(() => this.selectingSets().filter((set) => !this.setErrors.has(set.metadata.name))), unsized),
      ...rateOf(pullable),
      linkBytes: (image) => linkBytes.get(image) ?? 0,
      pullSecrets: [...allSetSecrets, ...nodeSecrets],
    });
    this.noteWaiting();

    // Phase 2: pin LAST, from a fresh look at sets and the runtime.
    const status = await this.pinAndReport(filesystem);
    await this.writer.write(status);
    await this.failureEvents.announce(status);
    log.debug({ sets: status.pinnedImageSets?.length }, 'reconciled');
    return status;
  }

  /** The status as it stands, without pulling or pinning: for progress while pulls run. */
  async snapshot(): Promise<NodePinnedImagesStatus> {
    const stored = await this.options.runtime.listImages();
    const filesystem = await this.options.runtime.imageFilesystem();
    return this.status(this.selectingSets(), stored, filesystem, await this.options.cluster.readStatus(), false);
  }

  private async pinAndReport(filesystem: { capacityBytes: number; freeBytes: number }): Promise<NodePinnedImagesStatus> {
    const { runtime, cluster, log, metrics } = this.options;
    const sets = this.selectingSets();
    const stored = await runtime.listImages();
    const previous = await cluster.readStatus();
    const failure = await pinImages(runtime, imagesToPin(sets, stored, this.setErrors), log, metrics);
    if (failure !== undefined) for (const set of sets) if (!this.setErrors.has(set.metadata.name)) this.setErrors.set(set.metadata.name, failure);
    // pin() returns once CRI reports the pins (or fails): what is listed now is what holds.
    const after = await runtime.listImages();
    const status = this.status(sets, after, filesystem, previous, true);
    metrics?.setsDone.set(status.pinnedImageSets?.filter(isSetDone).length ?? 0);
    metrics?.setsFailed.set(status.pinnedImageSets?.filter(isSetFailed).length ?? 0);
    return status;
  }

  /** A pass again at the earliest opening of a window that holds images back (re-checked every 10 s: the clock may be set meanwhile). */
  private noteWaiting(): void {
    let opensAt = Infinity;
    for (const gate of this.pulls.held().values()) if (gate.opensAt !== undefined) opensAt = Math.min(opensAt, gate.opensAt);
    if (this.windowTimer) clearTimeout(this.windowTimer);
    this.windowTimer = undefined;
    if (opensAt === Infinity || this.stopped) return;
    this.windowTimer = setTimeout(() => this.trigger(), Math.min(Math.max(opensAt - Date.now(), 1_000), WINDOW_RECHECK_MS));
    this.windowTimer.unref();
  }

  private status(
    sets: readonly PinnedImageSet[],
    stored: readonly RuntimeImage[],
    filesystem: { capacityBytes: number; freeBytes: number },
    previous: NodePinnedImagesStatus | undefined,
    afterPin: boolean,
  ): NodePinnedImagesStatus {
    return buildStatus({
      sets,
      stored,
      filesystem,
      reserveBytes: this.options.reserveBytes,
      previous,
      afterPin,
      setErrors: this.setErrors,
      history: (image) => this.pulls.history(image),
      imageBytes: (image) => this.admission.imageBytes(image),
      setBytes: (images, isStored) => this.admission.setBytes(images, isStored),
      waiting: waitingSets(sets, this.pulls.held()),
      link: { ...this.pulls.linkBytes(), ...capOf(this.pulls.linkCap(rateOf(sets))) },
      cache: this.options.cacheRoute?.(),
    });
  }

  private selectingSets(): PinnedImageSet[] {
    return selectingSets(this.options.cluster.pinnedImageSets(), this.options.cluster.nodeLabels() ?? {});
  }
}
