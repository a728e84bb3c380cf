/**
 * The prestage.dev API: what a user asks for (PinnedImageSet) and what each node agent
 * reports (NodePinnedImages, one per node). Shaped after MCO's PinnedImageSet and
 * MachineConfigNode so the two read alike, plus per-image state that MCO lacks.
 */
import type { V1LabelSelector } from '@kubernetes/client-node';

/**
 * A CRD as the API server reads it (raw JSON keys such as `x-kubernetes-list-type`): kept
 * apart from client-node's camelCase model so it serialises verbatim.
 */
export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string };
  spec: Record<string, unknown>;
}

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
  imageFilesystem?: { capacityBytes: number; freeBytes: number };
  verified?: NodeVerification;
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

const labelSelectorSchema = {
  type: 'object',
  description: 'metav1.LabelSelector over Node labels; empty or absent selects every node.',
  properties: {
    matchLabels: { type: 'object', additionalProperties: { type: 'string' } },
    matchExpressions: {
      type: 'array',
      items: {
        type: 'object',
        required: ['key', 'operator'],
        properties: {
          key: { type: 'string' },
          operator: { type: 'string', enum: ['In', 'NotIn', 'Exists', 'DoesNotExist'] },
          values: { type: 'array', items: { type: 'string' } },
        },
      },
    },
  },
  'x-kubernetes-map-type': 'atomic',
};

const generation = { type: 'integer', format: 'int64', minimum: 0 };

interface CrdNames {
  readonly plural: string;
  readonly singular: string;
  readonly kind: string;
  readonly shortNames: readonly string[];
}

/**
 * The apiextensions boilerplate both prestage CRDs share: group `prestage.dev`, cluster scope,
 * one served and stored version, optionally the status subresource.
 */
function clusterScopedCrd(
  names: CrdNames,
  version: { statusSubresource: boolean; printerColumns: readonly object[]; schema: Record<string, unknown> },
): CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${names.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Cluster',
      names: { plural: names.plural, singular: names.singular, kind: names.kind, listKind: `${names.kind}List`, shortNames: [...names.shortNames] },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          ...(version.statusSubresource ? { subresources: { status: {} } } : {}),
          additionalPrinterColumns: [...version.printerColumns],
          schema: { openAPIV3Schema: version.schema },
        },
      ],
    },
  };
}

const AGE_COLUMN = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

export const PINNED_IMAGE_SET_CRD: CustomResourceDefinition = clusterScopedCrd(
  { plural: PINNED_IMAGE_SETS, singular: 'pinnedimageset', kind: 'PinnedImageSet', shortNames: ['pis'] },
  {
    statusSubresource: false,
    printerColumns: [AGE_COLUMN],
    schema: {
      type: 'object',
      required: ['spec'],
      properties: {
        apiVersion: { type: 'string' },
        kind: { type: 'string' },
        metadata: { type: 'object' },
        spec: {
          type: 'object',
          required: ['pinnedImages'],
          properties: {
            pinnedImages: {
              type: 'array',
              minItems: 1,
              maxItems: MAX_PINNED_IMAGES,
              'x-kubernetes-list-type': 'map',
              'x-kubernetes-list-map-keys': ['name'],
              items: {
                type: 'object',
                required: ['name'],
                properties: { name: { type: 'string', minLength: 1, maxLength: 512, pattern: DIGEST_PULLSPEC_PATTERN } },
              },
            },
            nodeSelector: labelSelectorSchema,
            pullSecrets: {
              type: 'array',
              description: "Secrets of type kubernetes.io/dockerconfigjson in the agent's namespace; their credentials are tried before the node's pull secret.",
              maxItems: MAX_SET_PULL_SECRETS,
              'x-kubernetes-list-type': 'map',
              'x-kubernetes-list-map-keys': ['name'],
              items: {
                type: 'object',
                required: ['name'],
                properties: { name: { type: 'string', minLength: 1, maxLength: 253, pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' } },
              },
            },
          },
        },
      },
    },
  },
);

const conditionSchema = {
  type: 'object',
  required: ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
  properties: {
    type: { type: 'string', enum: ['Progressing', 'Degraded', 'Ready'] },
    status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
    reason: { type: 'string', maxLength: 1024, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$' },
    message: { type: 'string', maxLength: 32768 },
    lastTransitionTime: { type: 'string', format: 'date-time' },
    observedGeneration: generation,
  },
};

export const NODE_PINNED_IMAGES_CRD: CustomResourceDefinition = clusterScopedCrd(
  { plural: NODE_PINNED_IMAGES, singular: 'nodepinnedimages', kind: 'NodePinnedImages', shortNames: ['npi'] },
  {
    statusSubresource: true,
    printerColumns: [
      { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
      { name: 'Degraded', type: 'string', jsonPath: '.status.conditions[?(@.type=="Degraded")].status' },
      AGE_COLUMN,
    ],
    schema: {
      type: 'object',
      required: ['spec'],
      'x-kubernetes-validations': [{ rule: 'self.metadata.name == self.spec.nodeName', message: 'metadata.name must be the node name' }],
      properties: {
        apiVersion: { type: 'string' },
        kind: { type: 'string' },
        metadata: { type: 'object' },
        spec: {
          type: 'object',
          required: ['nodeName'],
          properties: { nodeName: { type: 'string', minLength: 1, maxLength: 253 } },
        },
        status: {
          type: 'object',
          properties: {
            observedGeneration: generation,
            conditions: {
              type: 'array',
              maxItems: 20,
              'x-kubernetes-list-type': 'map',
              'x-kubernetes-list-map-keys': ['type'],
              items: conditionSchema,
            },
            imageFilesystem: {
              type: 'object',
              properties: { capacityBytes: { type: 'integer', format: 'int64' }, freeBytes: { type: 'integer', format: 'int64' } },
            },
            verified: {
              type: 'object',
              description: "The node's last answer to `prestage verify`: per set carrying prestage.dev/verify-requested, its images as CRI ListImages reported them then.",
              required: ['time', 'sets'],
              properties: {
                time: { type: 'string', format: 'date-time' },
                sets: {
                  type: 'array',
                  maxItems: MAX_VERIFIED_SETS,
                  'x-kubernetes-list-type': 'map',
                  'x-kubernetes-list-map-keys': ['name'],
                  items: {
                    type: 'object',
                    required: ['name', 'request', 'images', 'missingCount', 'missing', 'unpinnedCount', 'unpinned'],
                    properties: {
                      name: { type: 'string', minLength: 1, maxLength: 253 },
                      uid: { type: 'string', maxLength: 64 },
                      request: { type: 'string', maxLength: MAX_VERIFY_REQUEST_LENGTH },
                      images: { type: 'integer', format: 'int32', minimum: 0 },
                      missingCount: { type: 'integer', format: 'int32', minimum: 0 },
                      missing: { type: 'array', maxItems: MAX_VERIFY_NAMES, items: { type: 'string', maxLength: 512 } },
                      unpinnedCount: { type: 'integer', format: 'int32', minimum: 0 },
                      unpinned: { type: 'array', maxItems: MAX_VERIFY_NAMES, items: { type: 'string', maxLength: 512 } },
                    },
                  },
                },
              },
            },
            pinnedImageSets: {
              type: 'array',
              maxItems: 100,
              'x-kubernetes-list-type': 'map',
              'x-kubernetes-list-map-keys': ['name'],
              items: {
                type: 'object',
                required: ['name', 'desiredGeneration', 'images'],
                'x-kubernetes-validations': [
                  { rule: '!has(self.currentGeneration) || self.desiredGeneration >= self.currentGeneration', message: 'desiredGeneration must be >= currentGeneration' },
                  { rule: '!has(self.lastFailedGeneration) || self.desiredGeneration >= self.lastFailedGeneration', message: 'desiredGeneration must be >= lastFailedGeneration' },
                  { rule: '!has(self.lastFailedGeneration) || has(self.lastFailedGenerationError)', message: 'lastFailedGeneration requires lastFailedGenerationError' },
                ],
                properties: {
                  name: { type: 'string', minLength: 1, maxLength: 253 },
                  uid: { type: 'string', maxLength: 64 },
                  desiredGeneration: generation,
                  currentGeneration: generation,
                  lastFailedGeneration: generation,
                  lastFailedGenerationError: { type: 'string', maxLength: 32768 },
                  bytes: {
                    type: 'integer',
                    format: 'int64',
                    minimum: 0,
                    description: "Uncompressed bytes of the set's unique layers (shared layers counted once); absent when not every image's layers are known.",
                  },
                  pulledBytes: { type: 'integer', format: 'int64', minimum: 0, description: 'Uncompressed bytes of the unique layers of the images of the set stored on the node.' },
                  images: {
                    type: 'array',
                    maxItems: MAX_PINNED_IMAGES,
                    'x-kubernetes-list-type': 'map',
                    'x-kubernetes-list-map-keys': ['name'],
                    items: {
                      type: 'object',
                      required: ['name', 'state', 'attempts'],
                      properties: {
                        name: { type: 'string' },
                        state: { type: 'string', enum: [...IMAGE_STATES] },
                        attempts: { type: 'integer', format: 'int32', minimum: 0 },
                        lastError: { type: 'string', maxLength: 4096 },
                        bytes: { type: 'integer', format: 'int64', minimum: 0 },
                        pulledBytes: { type: 'integer', format: 'int64', minimum: 0 },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
);

export const CRDS: readonly CustomResourceDefinition[] = [PINNED_IMAGE_SET_CRD, NODE_PINNED_IMAGES_CRD];
