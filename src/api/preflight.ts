/**
 * What `prestage preflight` answers before a window (kind Preflight) and what `prestage report`
 * shows (kind StagingReport): shapes only, shared by the model (cluster/preflight/), the
 * printers (render/) and the CLI. Bytes are exact where the registry gave sizes.
 */
export const PREFLIGHT_API_VERSION = 'prestage.dev/v1alpha1';

export type Verdict = 'GO' | 'NO-GO';

/**
 * The rule a node's free space is checked by, as its backend decides:
 * - `agent`: prestage's agent, set by set in name order, the unique new layers (uncompressed)
 *   within the image filesystem's free bytes less its `--reserve` (agent/disk.ts);
 * - `mco`: MCO's daemon, per set, 2 x the compressed layers of its images not on the node, below
 *   allocatable ephemeral storage less 16 GiB (FACTS §3);
 * - `allocatable`: no agent has reported the node's filesystem: its allocatable ephemeral
 *   storage must hold the new bytes (what `stage` checks), said as an assumption.
 */
export type StorageRule = 'agent' | 'mco' | 'allocatable' | 'unknown';

export interface PreflightNodeSet {
  readonly set: string;
  readonly images: number;
  /** Images of the set the node stores already. */
  readonly present: number;
  /** Compressed bytes this set alone still brings to the node (layers and configs it lacks, each once). */
  readonly fetchBytes: number;
  /** Uncompressed bytes this set alone still writes to the node's image store. */
  readonly writeBytes: number;
  /** Why the backend's disk rule refuses the set on this node; absent when it fits. */
  readonly refused?: string;
}

export interface PreflightNode {
  readonly node: string;
  readonly role?: string;
  readonly sets: readonly PreflightNodeSet[];
  readonly images: number;
  readonly present: number;
  /** Images it will pull: of the sets its backend admits, those it does not store. */
  readonly pulls: number;
  /** Compressed bytes the node downloads for all its sets: a layer shared by two images (or sets) once. */
  readonly fetchBytes: number;
  /** Uncompressed bytes its image store must still take (containers/storage keeps a layer per chain). */
  readonly writeBytes: number;
  readonly storage: {
    readonly rule: StorageRule;
    /** Free bytes of the image filesystem (agent), or allocatable ephemeral storage (mco, allocatable). */
    readonly availableBytes?: number;
    /** What the rule leaves free (the agent's reserve, MCO's 16 GiB). */
    readonly reserveBytes?: number;
    /** What the rule counts against the space: new bytes (agent, allocatable) or 2 x compressed (mco), its largest set's for mco. */
    readonly neededBytes: number;
  };
  /** Where the node's stored images were learnt: its agent's CRI listing, or only the prestage sets done on it (none: nothing known). */
  readonly heldFrom: 'agent' | 'sets' | 'none';
  readonly verdict: Verdict;
  /** One line per reason for NO-GO, naming the node and the shortfall. */
  readonly reasons: readonly string[];
}

export interface PreflightEta {
  readonly seconds: number;
  readonly bytesPerSecond: number;
  /** The rate: the cap (`--link-rate` or the sets'), or measured from the agents' link counters. */
  readonly rateFrom: 'cap' | 'measured';
  /** Of `seconds`, the busiest node's pulls one after another beyond their bytes (cluster/preflight/eta.ts); 0 on MCO. */
  readonly pullSeconds: number;
  /** When staging started now would be done (RFC 3339), staging windows kept. */
  readonly doneBy: string;
  /** The window checked (`--window`): its next opening and close, and whether staging fits in it. */
  readonly window?: { readonly opens: string; readonly closes: string; readonly fits: boolean };
}

export interface Preflight {
  readonly apiVersion: typeof PREFLIGHT_API_VERSION;
  readonly kind: 'Preflight';
  readonly time: string;
  readonly backend: string;
  readonly verdict: Verdict;
  /** Every NO-GO reason, one line each (the nodes' and the stage's). */
  readonly reasons: readonly string[];
  readonly sets: readonly string[];
  readonly nodes: readonly PreflightNode[];
  readonly totals: {
    readonly nodes: number;
    /** What the nodes download, summed over nodes. */
    readonly fetchBytes: number;
    /**
     * What crosses the slow link for the sets the backends admit (a refused set pulls nothing):
     * the nodes' downloads, or through the cache each blob once per repository, less what it holds.
     */
    readonly linkBytes: number;
    readonly writeBytes: number;
  };
  readonly cache?: { readonly name: string; readonly heldImages: number };
  readonly eta?: PreflightEta;
  /** What prestage could not see and assumed instead; never a silent guess. */
  readonly assumptions: readonly string[];
}

/** One node × set as the report shows it. */
export interface ReportCell {
  readonly node: string;
  readonly set: string;
  readonly state: 'ready' | 'pulling' | 'waiting' | 'failed' | 'pending';
  readonly images: number;
  readonly pulled: number;
  /** Uncompressed bytes over the set's unique layers, and of those stored; absent when unknown. */
  readonly bytes?: number;
  readonly pulledBytes?: number;
  readonly error?: string;
  readonly waiting?: string;
}

export interface StagingReport {
  readonly apiVersion: typeof PREFLIGHT_API_VERSION;
  readonly kind: 'StagingReport';
  readonly time: string;
  readonly backend: string;
  readonly sets: readonly string[];
  readonly nodes: readonly string[];
  readonly cells: readonly ReportCell[];
  readonly preflight?: Preflight;
  /** Link use over time: bytes per interval against the cap, where the agents' ledger or `wait -o json` events have it. */
  readonly link?: {
    readonly capBytesPerSecond?: number;
    readonly source: string;
    readonly samples: ReadonlyArray<{ readonly time: string; readonly bytesPerSecond: number }>;
  };
  /** Errors named: node, set and text. */
  readonly errors: ReadonlyArray<{ readonly node: string; readonly set: string; readonly error: string }>;
}
