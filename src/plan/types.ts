/**
 * The plan: prestage's stable contract (`plan -o json`), consumed by render, apply and
 * bundle. Additive changes only within an apiVersion; documented in docs/plan-contract.md.
 */
import type { PlanRelease } from '../release/payload.js';
import type { Platform } from './platform.js';

export const PLAN_API_VERSION = 'prestage.dev/v1alpha1';

/** Where an image must be on disk: control-plane nodes, workers, or both. */
export type ImageRole = 'control-plane' | 'worker' | 'all';
export type SetRole = 'control-plane' | 'worker';

/**
 * How a disk size was obtained: `gzip-isize` read the gzip trailer (exact), `gzip-inflated`
 * counted by inflating a layer that may hold 4 GiB or more, where the trailer wraps (exact),
 * `uncompressed` the layer is a plain tar (exact), `estimate-2x` twice the compressed size
 * (MCO's guess, used only where the exact size cannot be had cheaply).
 */
export type SizeMethod = 'gzip-isize' | 'gzip-inflated' | 'uncompressed' | 'estimate-2x';

export interface PlannedLayer {
  readonly digest: string;
  readonly mediaType: string;
  readonly compressedBytes: number;
  readonly diskBytes: number;
  readonly method: SizeMethod;
}

export interface PlannedImage {
  readonly name: string;
  /** Every tag name of the release that points at this digest. */
  readonly names: readonly string[];
  readonly pullSpec: string;
  readonly digest: string;
  /** `operator`: brought by an OLM bundle the plan stages; `catalog`: an operator catalog image. */
  readonly source: 'release' | 'component' | 'extra' | 'operator' | 'catalog';
  readonly role: ImageRole;
  readonly evidence: readonly string[];
  /** Config plus layers as pulled. */
  readonly compressedBytes: number;
  /** Uncompressed layers: what the image takes in container storage. */
  readonly diskBytes: number;
  readonly sizeMethod: SizeMethod | 'mixed';
  readonly config: { readonly digest: string; readonly size: number };
  readonly layers: readonly PlannedLayer[];
  /** An operator's image: the packages and bundles that bring it. */
  readonly operator?: { readonly packages: readonly string[]; readonly bundles: readonly string[] };
}

export interface SetEstimate {
  /** `exact` when every layer's size was read, else how many layers were estimated. */
  readonly method: 'exact' | 'partly-estimated';
  readonly exactLayers: number;
  readonly estimatedLayers: number;
}

export interface PlannedSet {
  /** The PinnedImageSet's name. */
  readonly name: string;
  readonly role: SetRole;
  /** Labels that select the MachineConfigPool (`machineconfiguration.openshift.io/role`). */
  readonly labels: Readonly<Record<string, string>>;
  /** Digest pullspecs, sorted. */
  readonly images: readonly string[];
  /** Layers and configs deduplicated within the set. */
  readonly compressedBytes: number;
  readonly diskBytes: number;
  readonly estimate: SetEstimate;
  /**
   * An operator's set: its package, the bundles whose images it holds, and the newest of them
   * (`head`): once the cluster runs it, the operator has moved on and `prune` deletes the set.
   */
  readonly operator?: { readonly package: string; readonly bundles: readonly string[]; readonly head?: string };
}

/**
 * An installed operator whose olm.maxOpenShiftVersion makes OLM report Upgradeable=False
 * (IncompatibleOperatorsInstalled), which holds back the planned minor or major update.
 */
export interface PlannedOperatorBlock {
  /** The installed CSV, `namespace/name`. */
  readonly csv: string;
  /** OLM's line for it in the condition's message (`maximum supported OCP version for ns/name is 4.16`). */
  readonly reason: string;
  /** The Subscription that installed it, `namespace/name`, when one did. */
  readonly subscription?: string;
  /** The first bundle on its upgrade walk whose olm.maxOpenShiftVersion allows the target; null: none does. */
  readonly liftedBy: string | null;
}

/** The operators a plan stages (`--config`, `--catalog`/`--package`, and a live cluster's Subscriptions and ClusterExtensions). */
export interface PlannedOperators {
  readonly catalogs: ReadonlyArray<{ readonly reference: string; readonly pullSpec: string; readonly digest: string; readonly packages: readonly string[] }>;
  readonly bundles: ReadonlyArray<{
    readonly catalog: string;
    readonly package: string;
    readonly name: string;
    readonly version: string;
    readonly image: string;
    readonly why: string;
    readonly maxOpenShiftVersion?: string;
  }>;
  /** From a live cluster: installed operators that hold back the planned update. */
  readonly blocked?: readonly PlannedOperatorBlock[];
}

/** What all the sets of a role put on one node: layers shared between sets (an operator's and the release's) counted once. */
export interface PlannedRoleTotal {
  readonly role: SetRole;
  readonly sets: readonly string[];
  readonly images: number;
  readonly compressedBytes: number;
  readonly diskBytes: number;
}

/** A release image the cluster never runs under the planned inclusion and platform: in no set. */
export interface SkippedImage {
  readonly name: string;
  readonly names: readonly string[];
  readonly pullSpec: string;
  readonly digest: string;
  readonly why: string;
}

/** What the plan assumed about the cluster (the CVO's inclusion inputs and the platform). */
export interface PlanCluster {
  readonly profile: string;
  readonly featureSet: string;
  /** Enabled capabilities, sorted. */
  readonly capabilities: readonly string[];
  readonly exclude: readonly string[];
  /** `null`: unknown, images of every platform kept. */
  readonly platform: string | null;
  /** The enabled feature gates, when the release's CVO reads gate annotations (4.22+), and where they came from. */
  readonly featureGates?: { readonly from: string; readonly enabled: readonly string[] };
  /** The release's node OS streams: which are pinned and why, what the others would cost each node. */
  readonly osStreams?: PlannedOsStreams;
  /** Planned from a live cluster (`--kubeconfig`, `stage`): what it showed. */
  readonly observed?: PlanObserved;
}

/** Node OS streams (os-streams.ts). */
export interface PlannedOsStreams {
  readonly available: readonly string[];
  readonly pinned: readonly string[];
  readonly why: string;
  /** Streams no node boots: in no set; their images' unique layers, what pinning them would add per node. */
  readonly skipped: ReadonlyArray<{ readonly stream: string; readonly images: readonly string[]; readonly compressedBytes: number; readonly diskBytes: number }>;
}

/** A live cluster as the plan saw it. */
export interface PlanObserved {
  readonly server: string;
  /** The release its nodes run now, as ClusterVersion names it. */
  readonly release: string;
  readonly version: string;
  readonly nodes: { readonly 'control-plane': number; readonly worker: number };
  /** Pods bound to nodes, and how many of them run a release image. */
  readonly pods: number;
  readonly releasePods: number;
  /** `stage`: image pins of prestage sets done on the nodes (summed over nodes), held there too. */
  readonly pinnedImages?: number;
}

/**
 * What a role's sets add to nodes that run the same images now (a live cluster only): nodes with
 * equal figures are one entry. Layers count as containers/storage stores them (by chain: a layer
 * over the same layers below it is stored once), so layers the node's running images hold are not
 * new; images it holds but runs in no Pod are not seen, so the new figures are upper bounds.
 */
export interface PlannedNodeBytes {
  readonly role: SetRole;
  /** Node names, sorted. */
  readonly nodes: readonly string[];
  /** The sets that target these nodes. */
  readonly sets: readonly string[];
  /** Uncompressed bytes the sets' images take on a node. */
  readonly diskBytes: number;
  /** Of those, already stored: layers of the images the node runs now. */
  readonly heldDiskBytes: number;
  /** Of those, not yet stored: what the node's disk must still hold. */
  readonly newDiskBytes: number;
  /** Blobs a node still downloads: its new layers (compressed) and the configs of images it does not run. */
  readonly newCompressedBytes: number;
}

export type { PlanRelease } from '../release/payload.js';

export interface Plan {
  readonly apiVersion: typeof PLAN_API_VERSION;
  readonly kind: 'Plan';
  readonly release: PlanRelease;
  readonly profile: string;
  readonly cluster: PlanCluster;
  readonly images: readonly PlannedImage[];
  /** Release images in no set, with why. */
  readonly skipped: readonly SkippedImage[];
  readonly sets: readonly PlannedSet[];
  /** Planned from a live cluster: new bytes per node, against what each runs now. */
  readonly nodes?: readonly PlannedNodeBytes[];
  /** Operators planned beside the release, and per role what every set together puts on a node. */
  readonly operators?: PlannedOperators;
  readonly perNode?: readonly PlannedRoleTotal[];
  readonly warnings: readonly string[];
}

/** Where a release component runs (classify.ts): its nodes, or none (no set). */
export type ComponentRole = 'control-plane' | 'worker' | 'all' | 'none';

export interface Classification {
  readonly role: ComponentRole;
  readonly evidence: readonly string[];
  /** The platforms the image serves, when the release ties it to some; absent = every platform. */
  readonly platforms?: readonly Platform[];
  /** How applied manifests name it: `container` of a workload the CVO runs, or only as an operand; absent = no applied manifest does. */
  readonly reference?: 'container' | 'operand';
}
