/**
 * The prestage.dev CRDs as `install` applies them: the OpenAPI schemas the API server checks
 * PinnedImageSets and NodePinnedImages against, and their printer columns.
 */
import { GROUP, VERSION, PINNED_IMAGE_SETS, NODE_PINNED_IMAGES, DIGEST_PULLSPEC_PATTERN, MAX_HELD_IMAGES, MAX_PINNED_IMAGES, MAX_SET_PULL_SECRETS, IMAGE_STATES, MAX_VERIFY_NAMES, MAX_VERIFIED_SETS, MAX_VERIFY_REQUEST_LENGTH } from './prestage.js';

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

/**
 * A set's status (written by the agent holding the set-status Lease). Its default matters: the
 * API server drops `status` on create and fills this default in on every read until the writer
 * writes one, so a set just created reads observedGeneration 0 != generation 1 (kstatus:
 * InProgress, not Current) and has no Ready condition (`kubectl wait` keeps waiting).
 */
const setStatusSchema = {
  type: 'object',
  default: { observedGeneration: 0 },
  required: ['observedGeneration'],
  properties: {
    observedGeneration: generation,
    conditions: {
      type: 'array',
      maxItems: 8,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
      items: {
        type: 'object',
        required: ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
        properties: {
          type: { type: 'string', enum: ['Ready', 'Reconciling', 'Stalled'] },
          status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
          reason: { type: 'string', maxLength: 1024, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$' },
          message: { type: 'string', maxLength: 32768 },
          lastTransitionTime: { type: 'string', format: 'date-time' },
          observedGeneration: { type: 'integer', format: 'int64', minimum: 0 },
        },
      },
    },
    nodes: { type: 'integer', format: 'int32', minimum: 0, description: 'Nodes the set selects.' },
    readyNodes: { type: 'integer', format: 'int32', minimum: 0, description: 'Of those, the nodes that hold and pin every image of this generation.' },
  },
};

export const PINNED_IMAGE_SET_CRD: CustomResourceDefinition = clusterScopedCrd(
  { plural: PINNED_IMAGE_SETS, singular: 'pinnedimageset', kind: 'PinnedImageSet', shortNames: ['pis'] },
  {
    statusSubresource: true,
    printerColumns: [
      { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
      { name: 'Nodes', type: 'integer', jsonPath: '.status.nodes' },
      { name: 'Staged', type: 'integer', jsonPath: '.status.readyNodes' },
      { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason', priority: 1 },
      AGE_COLUMN,
    ],
    schema: {
      type: 'object',
      required: ['spec'],
      properties: {
        apiVersion: { type: 'string' },
        kind: { type: 'string' },
        metadata: { type: 'object' },
        status: setStatusSchema,
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
              properties: { capacityBytes: { type: 'integer', format: 'int64' }, freeBytes: { type: 'integer', format: 'int64' }, reserveBytes: { type: 'integer', format: 'int64', minimum: 0 } },
            },
            held: {
              type: 'object',
              description: "What the node's runtime stores (CRI ListImages): how many images, and a digest pullspec for each (at most MAX_HELD_IMAGES, sorted). prestage preflight reads them.",
              required: ['count', 'images'],
              properties: {
                count: { type: 'integer', minimum: 0 },
                images: { type: 'array', maxItems: MAX_HELD_IMAGES, items: { type: 'string', maxLength: 447, pattern: DIGEST_PULLSPEC_PATTERN } },
              },
            },
            cache: {
              type: 'object',
              description: "Where the node's CRI-O pulls cached images from, in order: its leaf of the cache tree (if any), then the root cache.",
              required: ['locations'],
              properties: {
                leaf: { type: 'string', maxLength: 63 },
                locations: { type: 'array', maxItems: 8, items: { type: 'string', maxLength: 300 } },
              },
            },
            link: {
              type: 'object',
              description: 'The slow link as this agent uses it: compressed bytes of the pulls it started over the link (not through the in-cluster cache) since it started, and the cap in force.',
              required: ['bytes'],
              properties: {
                bytes: { type: 'integer', format: 'int64', minimum: 0 },
                pendingBytes: { type: 'integer', format: 'int64', minimum: 0, description: 'Compressed bytes of the pulls over the link still to start in the current pass.' },
                capBytesPerSecond: { type: 'integer', format: 'int64', minimum: 1 },
              },
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
                  waiting: { type: 'string', maxLength: 1024, description: 'Why images of the set are not being pulled now though missing: paused, or outside its staging windows (and until when).' },
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
