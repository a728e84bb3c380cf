/**
 * The prestage.dev API: what a user asks for (PinnedImageSet) and what each node agent
 * reports (NodePinnedImages, one per node). Shaped after MCO's PinnedImageSet and
 * MachineConfigNode so the two read alike, plus per-image state that MCO lacks.
 */
import type { V1LabelSelector } from '@kubernetes/client-node';

export const GROUP = 'prestage.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const PINNED_IMAGE_SETS = 'pinnedimagesets';
export const NODE_PINNED_IMAGES = 'nodepinnedimages';

/**
 * Set annotation `prestage verify` stamps (a fresh value per run): every agent the set selects
 * answers it with a CRI check of the set's images now, in its status's `verified`.
 */
export const VERIFY_REQUESTED_ANNOTATION = 'prestage.dev/verify-requested';
/** A verification names at most this many missing (and unpinned) images per set; its counts are exact. */
export const MAX_VERIFY_NAMES = 64;
/** A node answers at most this many sets' requests (the newest), each request value at most this long. */
export const MAX_VERIFIED_SETS = 100;
export const MAX_VERIFY_REQUEST_LENGTH = 256;

export const MAX_PINNED_IMAGES = 500;
/** A node's status names at most this many stored images (a kubelet reports 50 by default; a release is ~200). */
export const MAX_HELD_IMAGES = 1000;
/** A digest pullspec: whatever the repository, it must end in `@sha256:<64 hex>`. */
export const DIGEST_PULLSPEC_PATTERN = '^[^\\s@]+@sha256:[a-f0-9]{64}$';

export interface ObjectMeta {
  name: string;
  generation?: number;
  resourceVersion?: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  deletionTimestamp?: string | Date;
}

export interface PinnedImageSet {
  apiVersion: typeof API_VERSION;
  kind: 'PinnedImageSet';
  metadata: ObjectMeta;
  /** The set's progress over the nodes it selects, in kstatus's form (./set-status.ts). */
  status?: SetStatus;
  spec: {
    pinnedImages: Array<{ name: string }>;
    /** Empty or absent: every node. */
    nodeSelector?: V1LabelSelector;
    /**
     * Secrets (type kubernetes.io/dockerconfigjson) in the namespace the agent runs in, tried
     * before the node's pull secret for this set's images. prestage's own field: MCO has none.
     */
    pullSecrets?: Array<{ name: string }>;
  };
}

/** At most this many Secrets per set. */
export const MAX_SET_PULL_SECRETS = 16;

export type ImageState = 'Pending' | 'Pulling' | 'Pulled' | 'Pinned' | 'Failed';
export const IMAGE_STATES: readonly ImageState[] = ['Pending', 'Pulling', 'Pulled', 'Pinned', 'Failed'];

export interface ImageStatus {
  name: string;
  state: ImageState;
  attempts: number;
  lastError?: string;
  /** The image's unique layers, exact uncompressed bytes; absent when the agent could not read them. */
  bytes?: number;
  /** `bytes` once the image is stored. */
  pulledBytes?: number;
}

export interface PinnedImageSetStatus {
  name: string;
  /** The set's metadata.uid: a set deleted and created again under its name starts over. */
  uid?: string;
  desiredGeneration: number;
  /** The generation all of whose images are pinned NOW: dropped while one is missing, until repaired. */
  currentGeneration?: number;
  lastFailedGeneration?: number;
  lastFailedGenerationError?: string;
  /**
   * Uncompressed bytes of the set's UNIQUE layers (shared layers once: the plan's ON DISK
   * figure); absent unless the layers of every image are known.
   */
  bytes?: number;
  /** Of those, the bytes of the unique layers of the set's images stored on the node. */
  pulledBytes?: number;
  /** Why missing images are not pulled now: paused, or outside its staging windows (until when). */
  waiting?: string;
  images: ImageStatus[];
}

export type ConditionType = 'Progressing' | 'Degraded' | 'Ready';

/** metav1.Condition. */
export interface Condition {
  type: ConditionType;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

/** One set's images as the node's runtime listed them (CRI ListImages) when a verify request came. */
export interface SetVerification {
  name: string;
  uid?: string;
  /** The set's `prestage.dev/verify-requested` value this check answers. */
  request: string;
  /** Images in the set. */
  images: number;
  /** Not stored on the node: how many, and the first MAX_VERIFY_NAMES of them. */
  missingCount: number;
  missing: string[];
  /** Stored but not pinned (the kubelet's image GC may delete them). */
  unpinnedCount: number;
  unpinned: string[];
}

/** The node's last answer to verify requests: a CRI check made after the requests were seen. */
export interface NodeVerification {
  /** When the runtime was asked (RFC 3339). */
  time: string;
  sets: SetVerification[];
}

export interface NodePinnedImagesStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  pinnedImageSets?: PinnedImageSetStatus[];
  /** The image filesystem now, and the space the agent leaves free (`--reserve`): what its disk check admits against. */
  imageFilesystem?: { capacityBytes: number; freeBytes: number; reserveBytes?: number };
  /**
   * What the node's runtime stores, as CRI ListImages lists it: one digest pullspec per image (its
   * first repo digest; images stored only by tag are counted, not named), sorted, at most
   * MAX_HELD_IMAGES of them. `prestage preflight` reads their layers to know what a node still lacks.
   */
  held?: { count: number; images: string[] };
  /** Compressed bytes of the pulls this agent started over the link since it started; the cap in force. */
  link?: { bytes: number; pendingBytes?: number; capBytesPerSecond?: number };
  verified?: NodeVerification;
  /** Where this node's CRI-O pulls cached images from, in order: its leaf of the cache tree (if any), then the root. */
  cache?: NodeCacheRoute;
}

export interface NodeCacheRoute {
  /** The leaf's name (a label value, or `leaf-N`); absent: the node pulls from the root. */
  leaf?: string;
  /** The caches' locations in the order CRI-O asks them: the leaf, the root. */
  locations: string[];
}

export interface NodePinnedImages {
  apiVersion: typeof API_VERSION;
  kind: 'NodePinnedImages';
  metadata: ObjectMeta;
  spec: { nodeName: string };
  status?: NodePinnedImagesStatus;
}

/** A set is done on a node when the node reached the generation it was asked for (as MCO's MachineConfigNode). */
export function isSetDone(status: Pick<PinnedImageSetStatus, 'desiredGeneration' | 'currentGeneration'>): boolean {
  return status.desiredGeneration > 0 && status.currentGeneration === status.desiredGeneration;
}

/** kstatus's conditions (sigs.k8s.io/cli-utils): what Flux, Argo CD's Lua check and `kubectl wait` read. */
export type SetConditionType = 'Ready' | 'Reconciling' | 'Stalled';

export interface SetCondition {
  type: SetConditionType;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

/** A PinnedImageSet's status: written by one writer, the agent that holds the set-status Lease. */
export interface SetStatus {
  /**
   * The generation the conditions speak of. Defaulted to 0 by the CRD while nothing has written
   * it, so a set just created reads InProgress (kstatus calls an object without status Current).
   */
  observedGeneration: number;
  conditions?: SetCondition[];
  /** Nodes the set selects, and of those the ones that hold and pin every image. */
  nodes?: number;
  readyNodes?: number;
}
