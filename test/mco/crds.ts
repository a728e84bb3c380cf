/**
 * The three MCO CRDs prestage reads and writes, from the documented OpenShift schema
 * (openshift/api machineconfiguration/v1; FACTS §3): PinnedImageSet (no status),
 * MachineConfigPool and MachineConfigNode (status subresources), with MachineConfigNode's
 * CEL rules on `status.pinnedImageSets[]`. Only the fields prestage and the simulator touch
 * are spelled out; the rest is preserved as unknown fields, as a real cluster would hold them.
 */
import type { KubeClient } from '../../src/cluster/kube.js';

const GROUP = 'machineconfiguration.openshift.io';

const labelSelector = {
  type: 'object',
  properties: {
    matchLabels: { type: 'object', additionalProperties: { type: 'string' } },
    matchExpressions: {
      type: 'array',
      items: {
        type: 'object',
        required: ['key', 'operator'],
        properties: { key: { type: 'string' }, operator: { type: 'string' }, values: { type: 'array', items: { type: 'string' } } },
      },
    },
  },
  'x-kubernetes-map-type': 'atomic',
};

const condition = {
  type: 'object',
  required: ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
  properties: {
    type: { type: 'string', maxLength: 316 },
    status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
    reason: { type: 'string', maxLength: 1024, minLength: 1, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$' },
    message: { type: 'string', maxLength: 32768 },
    lastTransitionTime: { type: 'string', format: 'date-time' },
    observedGeneration: { type: 'integer', format: 'int64', minimum: 0 },
  },
};

/** int32 >= 1 that never decreases once set (a transition rule). */
const generation = (field: string) => ({
  type: 'integer',
  format: 'int32',
  minimum: 1,
  'x-kubernetes-validations': [{ rule: 'self >= oldSelf', message: `${field} must not decrease` }],
});

function crd(plural: string, kind: string, schema: object, status: boolean, version = 'v1') {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Cluster',
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: [{ name: version, served: true, storage: true, ...(status ? { subresources: { status: {} } } : {}), schema: { openAPIV3Schema: schema } }],
    },
  };
}

const objectRoot = (properties: object, extra: object = {}) => ({
  type: 'object',
  properties: { apiVersion: { type: 'string' }, kind: { type: 'string' }, metadata: { type: 'object' }, ...properties },
  ...extra,
});

export const PINNED_IMAGE_SET_CRD = crd(
  'pinnedimagesets',
  'PinnedImageSet',
  objectRoot(
    {
      spec: {
        type: 'object',
        required: ['pinnedImages'],
        properties: {
          pinnedImages: {
            type: 'array',
            minItems: 1,
            maxItems: 500,
            'x-kubernetes-list-type': 'map',
            'x-kubernetes-list-map-keys': ['name'],
            items: {
              type: 'object',
              required: ['name'],
              properties: {
                name: {
                  type: 'string',
                  minLength: 1,
                  maxLength: 447,
                  'x-kubernetes-validations': [{ rule: `self.matches('@sha256:[a-f0-9]{64}$')`, message: 'the OCI Image reference must end with a valid @sha256:<digest> suffix' }],
                },
              },
            },
          },
        },
      },
    },
    { required: ['spec'] },
  ),
  false,
);

export const MACHINE_CONFIG_POOL_CRD = crd(
  'machineconfigpools',
  'MachineConfigPool',
  objectRoot({
    spec: {
      type: 'object',
      'x-kubernetes-preserve-unknown-fields': true,
      properties: {
        nodeSelector: labelSelector,
        machineConfigSelector: labelSelector,
        pinnedImageSets: {
          type: 'array',
          maxItems: 100,
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['name'],
          items: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 253 } } },
        },
      },
    },
    status: {
      type: 'object',
      'x-kubernetes-preserve-unknown-fields': true,
      properties: {
        machineCount: { type: 'integer', format: 'int32' },
        poolSynchronizersStatus: {
          type: 'array',
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['poolSynchronizerType'],
          items: {
            type: 'object',
            required: ['poolSynchronizerType', 'machineCount', 'updatedMachineCount', 'readyMachineCount', 'availableMachineCount', 'unavailableMachineCount'],
            properties: {
              poolSynchronizerType: { type: 'string', enum: ['PinnedImageSets'] },
              machineCount: { type: 'integer', format: 'int64', minimum: 0 },
              updatedMachineCount: { type: 'integer', format: 'int64', minimum: 0 },
              readyMachineCount: { type: 'integer', format: 'int64', minimum: 0 },
              availableMachineCount: { type: 'integer', format: 'int64', minimum: 0 },
              unavailableMachineCount: { type: 'integer', format: 'int64', minimum: 0 },
              observedGeneration: { type: 'integer', format: 'int64' },
            },
          },
        },
      },
    },
  }),
  true,
);

export const MACHINE_CONFIG_NODE_CRD = crd(
  'machineconfignodes',
  'MachineConfigNode',
  objectRoot(
    {
      spec: {
        type: 'object',
        required: ['node', 'pool', 'configVersion'],
        properties: {
          node: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 253 } } },
          pool: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 253 } } },
          configVersion: { type: 'object', required: ['desired'], properties: { desired: { type: 'string', minLength: 1, maxLength: 253 } } },
        },
      },
      status: {
        type: 'object',
        properties: {
          observedGeneration: { type: 'integer', format: 'int64' },
          conditions: { type: 'array', maxItems: 20, 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'], items: condition },
          configVersion: { type: 'object', properties: { current: { type: 'string' }, desired: { type: 'string' } } },
          pinnedImageSets: {
            type: 'array',
            maxItems: 100,
            'x-kubernetes-list-type': 'map',
            'x-kubernetes-list-map-keys': ['name'],
            items: {
              type: 'object',
              required: ['name'],
              'x-kubernetes-validations': [
                { rule: 'has(self.desiredGeneration) && has(self.currentGeneration) ? self.desiredGeneration >= self.currentGeneration : true', message: 'desired generation must be greater than or equal to the current generation' },
                { rule: 'has(self.lastFailedGeneration) && has(self.desiredGeneration) ? self.desiredGeneration >= self.lastFailedGeneration : true', message: 'desired generation must be greater than or equal to the last failed generation' },
                { rule: 'has(self.lastFailedGeneration) ? has(self.lastFailedGenerationError) : true', message: 'last failed generation error must be defined on image pull and pin failure' },
              ],
              properties: {
                name: { type: 'string', minLength: 1, maxLength: 253 },
                desiredGeneration: generation('desired generation'),
                currentGeneration: generation('current generation'),
                lastFailedGeneration: generation('last failed generation'),
                lastFailedGenerationError: { type: 'string', maxLength: 32768 },
              },
            },
          },
        },
      },
    },
    {
      required: ['spec'],
      'x-kubernetes-validations': [{ rule: 'self.metadata.name == self.spec.node.name', message: 'spec.node.name should match metadata.name' }],
    },
  ),
  true,
);

export const MCO_CRDS = [PINNED_IMAGE_SET_CRD, MACHINE_CONFIG_POOL_CRD, MACHINE_CONFIG_NODE_CRD];

type Crd = typeof PINNED_IMAGE_SET_CRD;

/** The same resource served at another version only, with `edit` applied to a copy of its schema. */
function atVersion(definition: Crd, version: string, edit: (schema: any) => void = () => undefined): Crd {
  const copy = structuredClone(definition);
  const [served] = copy.spec.versions;
  served!.name = version;
  edit(served!.schema.openAPIV3Schema);
  return copy;
}

/**
 * OpenShift 4.16-4.18 with TechPreviewNoUpgrade (openshift/api machineconfiguration/v1alpha1 of
 * that time): PinnedImageSet and MachineConfigNode served only at v1alpha1, and a set's errors
 * on a node as a list of strings, `lastFailedGenerationErrors` (max 10).
 */
export const MCO_4_16_CRDS = [
  atVersion(PINNED_IMAGE_SET_CRD, 'v1alpha1'),
  MACHINE_CONFIG_POOL_CRD,
  atVersion(MACHINE_CONFIG_NODE_CRD, 'v1alpha1', (schema) => {
    const item = schema.properties.status.properties.pinnedImageSets.items;
    delete item.properties.lastFailedGenerationError;
    item.properties.lastFailedGenerationErrors = { type: 'array', maxItems: 10, items: { type: 'string' } };
    item['x-kubernetes-validations'] = item['x-kubernetes-validations'].slice(0, 2);
  }),
];

/** Creates the CRDs and resolves once the API server serves every one at its version. */
export async function installMcoCrds(client: KubeClient, crds: readonly Crd[] = MCO_CRDS): Promise<void> {
  for (const definition of crds) {
    await client.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: definition });
  }
  const deadline = Date.now() + 30_000;
  const wanted = crds.map((definition) => ({ path: `/apis/${GROUP}/${definition.spec.versions[0]!.name}`, plural: definition.spec.names.plural }));
  for (;;) {
    const served = await Promise.all(wanted.map(async ({ path, plural }) => (await client.find<{ resources: Array<{ name: string }> }>(path))?.resources.some((r) => r.name === plural) ?? false));
    if (served.every(Boolean)) return;
    if (Date.now() > deadline) throw new Error('MCO CRDs were not served within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
