/**
 * How long MCO's daemon takes to prefetch a node's images, predicted from its own source
 * (pkg/daemon/pinned_image_set.go, 4.16 to 5.0); pure.
 *
 * One sync of a node: the disk check runs `podman manifest inspect` on every image whose size
 * the daemon has not cached, one after another; then the images are queued to its pull workers
 * (5, or 1 on a master) through a channel of 10. Every worker pauses 1 s after every image, on
 * every node. The sync's deadline (2 min before 4.22, 5 min from 4.22) is checked only while
 * queueing: pulls already queued go on past it, and once the last image is queued the sync
 * waits for them however long they take. A sync that hits its deadline is requeued rate-limited
 * (5 ms doubling per requeue, 15 times, then one minute, then again from 5 ms); the next sync
 * queues again every image not yet pulled, so the ones still queued are queued twice (each
 * second time costs a pause). The link is shared: every node pulls at once, at rate / nodes.
 */

import { majorMinor } from '../../plan/release-api.js';
import { formatSeconds } from '../../units.js';
import { count } from '../../plural.js';

/** Seconds a `podman manifest inspect` takes: 190 tiny images on a master at MCO main took 4 min 37 s (FACTS §3). */
export const INSPECT_SECONDS = 0.4;
const THROTTLE_SECONDS = 1;
const CHANNEL = 10;
const REQUEUES_RATE_LIMITED = 15;
const REQUEUE_BASE_SECONDS = 0.005;
const REQUEUE_AFTER_MAX_SECONDS = 60;
/** wait.Backoff{1s, x2, 5 steps}: the sleeps between a pull's tries. */
const PULL_RETRY_SLEEPS_SECONDS = 1 + 2 + 4 + 8;

export interface McoPace {
  /** The MCO release the pace is of; undefined when unknown (the older pace is assumed). */
  readonly version: string | undefined;
  readonly deadlineSeconds: number;
}

export function mcoPace(version: string | undefined): McoPace {
  const [major, minor] = (version && majorMinor(version)) || [0, 0];
  const from422 = major > 4 || (major === 4 && minor >= 22);
  return { version, deadlineSeconds: from422 ? 300 : 120 };
}

export interface NodeWork {
  readonly node: string;
  readonly master: boolean;
  /** Images the node still lacks (what its sets hold, unless the node is known to have some). */
  readonly images: number;
  readonly compressedBytes: number;
}

export interface NodePrediction {
  readonly node: string;
  readonly seconds: number;
  readonly workers: number;
  readonly images: number;
  readonly compressedBytes: number;
  /** Parts of `seconds`: the disk check's inspects, the pauses (per worker), the bytes, idle between syncs. */
  readonly inspectSeconds: number;
  readonly pauseSeconds: number;
  /** Undefined without a link rate: the bytes' time is not in `seconds`. */
  readonly bytesSeconds: number | undefined;
  readonly idleSeconds: number;
  readonly deadlines: number;
}

/**
 * One node's prefetch, sync by sync. `bytesPerSecond` is the node's share of the link (undefined:
 * bytes are not counted, only MCO's own pace).
 */
export function predictMcoNode(work: NodeWork, pace: McoPace, bytesPerSecond: number | undefined): NodePrediction {
  const workers = work.master ? 1 : 5;
  const averageBytes = work.images ? work.compressedBytes / work.images : 0;
  const pullSeconds = bytesPerSecond ? averageBytes / bytesPerSecond : 0;
  // One image through the workers: its bytes over the node's link share, its pause per worker.
  const perImage = pullSeconds + THROTTLE_SECONDS / workers;
  const inFlight = CHANNEL + workers;
  let time = 0;
  let unsized = work.images;
  let left = work.images;
  let duplicates = 0;
  let requeues = 0;
  let deadlines = 0;
  let idle = 0;
  let inspect = 0;
  while (left > 0) {
    const deadline = time + pace.deadlineSeconds;
    // The disk check: inspects one by one, cut by the deadline (the sizes seen stay cached).
    const checking = unsized * INSPECT_SECONDS;
    if (time + checking > deadline) {
      unsized -= Math.floor(pace.deadlineSeconds / INSPECT_SECONDS);
      inspect += pace.deadlineSeconds;
      time = deadline;
    } else {
      inspect += checking;
      time += checking;
      unsized = 0;
      // Queued twice: a pause each, on the workers, before the rest.
      time += (duplicates * THROTTLE_SECONDS) / workers;
      duplicates = 0;
      const queuedByDeadline = Math.max(0, (deadline - time) / perImage) + inFlight;
      if (left <= queuedByDeadline) {
        time += left * perImage;
        break;
      }
      // The deadline passes while queueing: what was pulled by then, and what is still queued.
      const pulled = Math.max(0, Math.floor((deadline - time) / perImage));
      left -= pulled;
      time = deadline;
    }
    deadlines++;
    const delay = requeues < REQUEUES_RATE_LIMITED ? REQUEUE_BASE_SECONDS * 2 ** requeues : REQUEUE_AFTER_MAX_SECONDS;
    requeues = requeues < REQUEUES_RATE_LIMITED ? requeues + 1 : 0;
    // While the sync waits to be requeued the workers drain what is queued, then idle.
    const queued = unsized > 0 ? 0 : Math.min(left, inFlight);
    const drained = Math.min(queued, Math.floor(delay / perImage));
    left -= drained;
    duplicates = queued - drained;
    idle += Math.max(0, delay - queued * perImage);
    time += delay;
  }
  const bytesSeconds = bytesPerSecond ? work.compressedBytes / bytesPerSecond : undefined;
  return {
    node: work.node,
    seconds: Math.round(time),
    workers,
    images: work.images,
    compressedBytes: work.compressedBytes,
    inspectSeconds: Math.round(inspect),
    pauseSeconds: Math.round((work.images * THROTTLE_SECONDS) / workers),
    bytesSeconds: bytesSeconds === undefined ? undefined : Math.round(bytesSeconds),
    idleSeconds: Math.round(idle),
    deadlines,
  };
}

/** Every node pulls at once (MCO paces nothing across nodes): each gets rate / nodes of the link. */
export function predictMcoNodes(works: readonly NodeWork[], pace: McoPace, linkBytesPerSecond: number | undefined): NodePrediction[] {
  const pulling = works.filter((w) => w.images > 0).length || 1;
  return works.map((w) => predictMcoNode(w, pace, linkBytesPerSecond === undefined ? undefined : linkBytesPerSecond / pulling));
}

export interface WaitDefaults {
  readonly timeoutMs: number;
  readonly failAfterMs: number;
  /** Why, in one line each. */
  readonly reasons: readonly string[];
}

export const DEFAULT_TIMEOUT_MS = 60 * 60_000;
export const DEFAULT_FAIL_AFTER_MS = 10 * 60_000;

/**
 * `--timeout` at least twice the slowest node's prediction; `--fail-after` long enough for a
 * failed pull to be retried by the next sync: a deadline, the longest rate-limited requeue
 * (82 s), and the pull's own five tries.
 */
export function mcoWaitDefaults(predictions: readonly NodePrediction[], pace: McoPace): WaitDefaults {
  const slowest = predictions.reduce<NodePrediction | undefined>((a, p) => (!a || p.seconds > a.seconds ? p : a), undefined);
  const timeoutMs = Math.max(DEFAULT_TIMEOUT_MS, roundUpToMinute(2 * (slowest?.seconds ?? 0) * 1000));
  const longestRequeue = REQUEUE_BASE_SECONDS * 2 ** (REQUEUES_RATE_LIMITED - 1);
  // One image alone at the node's share of the link: the pull a retry repeats.
  const pull = Math.max(0, ...predictions.map((p) => (p.bytesSeconds !== undefined && p.images ? p.bytesSeconds / p.images : 0)));
  const retry = pace.deadlineSeconds + longestRequeue + 5 * pull + PULL_RETRY_SLEEPS_SECONDS;
  const failAfterMs = Math.max(DEFAULT_FAIL_AFTER_MS, roundUpToMinute(retry * 1000));
  return {
    timeoutMs,
    failAfterMs,
    reasons: [
      `--timeout ${minutes(timeoutMs)}: ${slowest && 2 * slowest.seconds * 1000 > DEFAULT_TIMEOUT_MS ? `twice the slowest node's ${formatSeconds(slowest.seconds)} (${slowest.node})` : `the default; twice the slowest node's ${formatSeconds(slowest?.seconds ?? 0)} is less`}`,
      `--fail-after ${minutes(failAfterMs)}: ${failAfterMs > DEFAULT_FAIL_AFTER_MS ? 'a failed pull is retried by the next sync within' : 'the default; a failed pull is retried by the next sync within'} ${formatSeconds(Math.round(retry))} (a ${formatSeconds(pace.deadlineSeconds)} deadline, an ${Math.round(longestRequeue)} s requeue, 5 tries)`,
    ],
  };
}

/** One line per node: the prediction and what it is made of. */
export function paceLines(predictions: readonly NodePrediction[], pace: McoPace, linkBytesPerSecond: number | undefined, formatBytes: (n: number) => string): string[] {
  const head = `MCO ${pace.version ?? '(version unknown: 4.16-4.21 assumed)'} pace: ${formatSeconds(pace.deadlineSeconds)} sync deadline, 5 pull workers (1 on masters), a 1 s pause after every image${linkBytesPerSecond ? `; link ${formatBytes(linkBytesPerSecond)}/s shared by ${predictions.filter((p) => p.images > 0).length || 1} node(s)` : '; bytes not counted (give --link-rate for them)'}`;
  return [
    head,
    ...predictions.map((p) => {
      const parts = [`${formatSeconds(p.inspectSeconds)} disk check`, `${formatSeconds(p.pauseSeconds)} pauses on ${p.workers} worker${p.workers === 1 ? '' : 's'}`, ...(p.bytesSeconds !== undefined ? [`${formatSeconds(p.bytesSeconds)} for ${formatBytes(p.compressedBytes)}`] : []), ...(p.deadlines ? [`${p.deadlines} deadline${p.deadlines === 1 ? '' : 's'}${p.idleSeconds ? `, ${formatSeconds(p.idleSeconds)} idle between syncs` : ''}`] : [])];
      return `  ${p.node}: ${count(p.images, 'image')}, about ${formatSeconds(p.seconds)}${p.bytesSeconds === undefined ? '+' : ''} (${parts.join(', ')})`;
    }),
  ];
}

function roundUpToMinute(ms: number): number {
  return Math.ceil(ms / 60_000) * 60_000;
}

function minutes(ms: number): string {
  const m = Math.round(ms / 60_000);
  return m % 60 === 0 ? `${m / 60}h` : m > 60 ? `${Math.floor(m / 60)}h${m % 60}m` : `${m}m`;
}

