import { describe, expect, it } from 'vitest';
import type { NodePinnedImages, PinnedImageSet, PinnedImageSetStatus } from '../../api/prestage.js';
import type { KubeObject } from '../../kube/client.js';
import type { ClusterView } from '../observed-backend.js';
import { AGENT_PATHS, projectAgent } from './backend.js';

const MiB = 2 ** 20;

function view(generation: number, entry: PinnedImageSetStatus, uid?: string): ClusterView {
  const set: PinnedImageSet = {
    apiVersion: 'prestage.dev/v1alpha1',
    kind: 'PinnedImageSet',
    metadata: { name: 'workers', generation, ...(uid ? { uid } : {}) },
    spec: { pinnedImages: entry.images.map((image) => ({ name: image.name })) },
  };
  const status: NodePinnedImages = { apiVersion: 'prestage.dev/v1alpha1', kind: 'NodePinnedImages', metadata: { name: 'worker-0' }, spec: { nodeName: 'worker-0' }, status: { pinnedImageSets: [entry] } };
  const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'worker-0', labels: {} } };
  const byName = (object: { metadata: { name: string } }) => new Map([[object.metadata.name, object as unknown as KubeObject]]);
  return new Map([
    [AGENT_PATHS.pinnedImageSets, byName(set)],
    [AGENT_PATHS.nodePinnedImages, byName(status)],
    [AGENT_PATHS.nodes, byName(node)],
  ]);
}

const images = [
  { name: 'quay.io/a@sha256:' + 'a'.repeat(64), state: 'Pinned' as const, attempts: 1, bytes: 4 * MiB, pulledBytes: 4 * MiB },
  { name: 'quay.io/b@sha256:' + 'b'.repeat(64), state: 'Pulling' as const, attempts: 1, bytes: 5 * MiB },
];

describe('projectAgent bytes', () => {
  it("takes the set's bytes over unique layers, never a sum over images (which counts shared layers again)", () => {
    const [node] = projectAgent(view(1, { name: 'workers', desiredGeneration: 1, bytes: 7 * MiB, pulledBytes: 4 * MiB, images }), ['workers']).sets[0]!.nodes;
    expect(node).toMatchObject({ phase: 'progressing', imagesDone: 1, imagesTotal: 2, bytes: 7 * MiB, pulledBytes: 4 * MiB });
  });

  it('reports no bytes when the agent did not (sizes unknown), nor for a generation the node has not taken yet', () => {
    const [unknown] = projectAgent(view(1, { name: 'workers', desiredGeneration: 1, images }), ['workers']).sets[0]!.nodes;
    expect(unknown?.bytes).toBeUndefined();
    expect(unknown?.pulledBytes).toBeUndefined();
    const [stale] = projectAgent(view(2, { name: 'workers', desiredGeneration: 1, bytes: 7 * MiB, pulledBytes: 7 * MiB, images }), ['workers']).sets[0]!.nodes;
    expect(stale).toMatchObject({ phase: 'pending' });
    expect(stale?.bytes).toBeUndefined();
  });
});

describe('projectAgent set identity', () => {
  const done = { name: 'workers', uid: 'uid-old', desiredGeneration: 1, currentGeneration: 1, images: [{ ...images[0]! }] };
  it('reads a node entry only for the set it was written for: a set deleted and created again is pending until the agent reports it', () => {
    expect(projectAgent(view(1, done, 'uid-old'), ['workers']).sets[0]!.nodes[0]).toMatchObject({ phase: 'done' });
    expect(projectAgent(view(1, done, 'uid-new'), ['workers']).sets[0]!.nodes[0]).toMatchObject({ phase: 'pending', currentGeneration: 0 });
  });
});

describe('projectAgent cache route', () => {
  it("carries each node's cache route as the node reports it", () => {
    const base = view(1, { name: 'workers', desiredGeneration: 1, images });
    const status = [...base.get(AGENT_PATHS.nodePinnedImages)!.values()][0] as unknown as NodePinnedImages;
    status.status!.cache = { leaf: 'zone-a', locations: ['10.0.0.7:5000', '10.0.0.5:5000'] };
    const snapshot = projectAgent(base, ['workers']);
    expect(snapshot.caches).toEqual([{ node: 'worker-0', leaf: 'zone-a', locations: ['10.0.0.7:5000', '10.0.0.5:5000'] }]);
    status.status!.cache = { locations: ['10.0.0.5:5000', 7 as unknown as string] };
    expect(projectAgent(base, ['workers']).caches).toEqual([{ node: 'worker-0', locations: ['10.0.0.5:5000'] }]);
    delete status.status!.cache;
    expect(projectAgent(base, ['workers']).caches).toBeUndefined();
  });
});
