/**
 * The pinning backend contract: what `apply`, `wait`, `status` and `stage` need from a
 * cluster, implemented by the MCO-native backend (`mco/`) and prestage's own agent
 * (`agent/`). One shared test suite runs against each.
 */
import type { DesiredSet } from '../api/desired-set.js';

export type { DesiredSet } from '../api/desired-set.js';

export type BackendKind = 'mco' | 'agent';

export interface ApplyOutcome {
  readonly set: string;
  /** `kind.group`, where a command applies sets of two backends (default: the backend's own, `pinnedimageset`). */
  readonly resource?: string;
  readonly action: 'created' | 'configured' | 'unchanged';
  readonly addedImages: readonly string[];
  readonly removedImages: readonly string[];
  /** Label and annotation keys whose value changes. */
  readonly changedMetadata: readonly string[];
}

/**
 * One set on one node. `pending`: the node has not taken the set's current generation yet;
 * `progressing`: pulling; `degraded`: the last attempt failed and the node is retrying;
 * `done`: desiredGeneration > 0, current == desired, and desired is the set's generation.
 */
export type NodeSetPhase = 'pending' | 'progressing' | 'degraded' | 'done';

export interface NodeSetProgress {
  readonly node: string;
  readonly set: string;
  readonly phase: NodeSetPhase;
  readonly desiredGeneration: number;
  readonly currentGeneration: number;
  /** The node's error for this set (degraded), as the node reported it. */
  readonly error?: string;
  /** What the node reports while it still works on the set (not a failure of this set). */
  readonly note?: string;
  /**
   * Set while nothing reports this node at all (no status object): why, and what to check.
   * `wait` fails with it once it lasts --fail-after, instead of waiting silently.
   */
  readonly unreported?: string;
  readonly imagesTotal?: number;
  readonly imagesDone?: number;
  /** Bytes to pull and pulled so far, where the backend reports them (the agent does, MCO does not). */
  readonly bytes?: number;
  readonly pulledBytes?: number;
}

export interface SetProgress {
  readonly name: string;
  /** False when the set is not on the cluster (yet). */
  readonly exists: boolean;
  /** metadata.generation of the set: what every node must reach. */
  readonly generation: number;
  /** One entry per node the set targets now, sorted by node name. */
  readonly nodes: readonly NodeSetProgress[];
}

/** A pool's own account of its nodes' pins, where the backend keeps one (MCO's MachineConfigPool). */
export interface PoolProgress {
  readonly name: string;
  /** `status.poolSynchronizersStatus[PinnedImageSets]`: nodes updated = every set current. */
  readonly machineCount: number;
  readonly updatedMachineCount: number;
  /** The pool's PinnedImageSetsDegraded condition message, when True. */
  readonly degraded?: string;
}

export interface ProgressSnapshot {
  readonly sets: readonly SetProgress[];
  /** The pools the sets target, as the pools report themselves (MCO only). */
  readonly pools?: readonly PoolProgress[];
  /** The slow link as the nodes report it (prestage's agent only), summed over nodes. */
  readonly link?: LinkProgress;
  /** Which cache each node pulls from (prestage's agent with a cache): its leaf, then the root. */
  readonly caches?: readonly NodeCache[];
}

export interface NodeCache {
  readonly node: string;
  /** The leaf of the cache tree; absent: the root. */
  readonly leaf?: string;
  /** In the order the node's CRI-O asks them. */
  readonly locations: readonly string[];
}

export interface LinkProgress {
  /** Compressed bytes of the pulls the nodes started over the link since their agents started. */
  readonly bytes: number;
  /** Compressed bytes of the pulls over the link still to start in the nodes' current passes. */
  readonly pendingBytes: number;
  /** The cap in force, where one is. */
  readonly capBytesPerSecond?: number;
}

export interface WatchOptions {
  readonly signal: AbortSignal;
  /** A watch broke and is being re-established (API server restart, network). */
  readonly onRetry?: (error: Error, delayMs: number) => void;
}

export interface PinningBackend {
  readonly kind: BackendKind;
  /**
   * Server-side apply (field manager `prestage`); `dryRun: true` asks the server (`dryRun=All`)
   * and changes nothing; `'client'` reads what is there and sends no write (kubectl's client dry run).
   */
  apply(sets: readonly DesiredSet[], options: { dryRun: boolean | 'client' }): Promise<ApplyOutcome[]>;
  /** Names of the nodes a set targets now: of a set on the cluster, or of one about to be applied. */
  targetNodes(set: string | DesiredSet): Promise<string[]>;
  /** The progress of `sets` (default: every prestage-managed set) as of now. */
  snapshot(sets?: readonly string[]): Promise<ProgressSnapshot>;
  /** Calls `onSnapshot` at start and after every change, until the signal aborts. */
  watch(sets: readonly string[] | undefined, onSnapshot: (snapshot: ProgressSnapshot) => void, options: WatchOptions): Promise<void>;
}

export const FIELD_MANAGER = 'prestage';

export function setReady(set: SetProgress): boolean {
  return set.exists && set.nodes.length > 0 && set.nodes.every((n) => n.phase === 'done');
}
