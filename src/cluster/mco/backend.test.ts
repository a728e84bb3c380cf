import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../kube/client.js';
import { DaemonErrors, judgeMcoError, MCO_V1, mcoPaths, projectMco, type McoVersions } from './backend.js';

const ALPHA: McoVersions = { pinnedImageSets: 'v1alpha1', machineConfigNodes: 'v1alpha1' };
const OURS = 'quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:' + 'a'.repeat(64);
const THEIRS = 'quay.io/example/app@sha256:' + 'b'.repeat(64);

/** One worker pool, one worker node, set `s` (ours, generation 2) and set `other`, and the node's entry for `s`. */
function view(entry: Record<string, unknown> | undefined, versions: McoVersions, conditions: unknown[] = []) {
  const paths = mcoPaths(versions);
  const byName = (...objects: KubeObject[]) => new Map(objects.map((o) => [o.metadata.name, o]));
  const worker = { 'machineconfiguration.openshift.io/role': 'worker' };
  return new Map([
    [paths.pinnedImageSets, byName(
      { metadata: { name: 's', generation: 2, labels: worker }, spec: { pinnedImages: [{ name: OURS }] } } as KubeObject,
      { metadata: { name: 'other', generation: 1, labels: worker }, spec: { pinnedImages: [{ name: THEIRS }] } } as KubeObject,
    )],
    [paths.machineConfigPools, byName({ metadata: { name: 'worker' }, spec: { nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } }, machineConfigSelector: { matchLabels: worker } } } as KubeObject)],
    [paths.nodes, byName({ metadata: { name: 'w0', labels: { 'node-role.kubernetes.io/worker': '' } } })],
    [paths.machineConfigNodes, entry === undefined ? new Map() : byName({ metadata: { name: 'w0' }, status: { conditions, pinnedImageSets: [{ name: 's', ...entry }] } } as KubeObject)],
  ]);
}

const nodeOf = (entry: Record<string, unknown> | undefined, versions: McoVersions = ALPHA, conditions: unknown[] = []) => projectMco(view(entry, versions, conditions), ['s'], versions).sets[0]!.nodes[0]!;
const degradedCondition = (message: string) => ({ type: 'PinnedImageSetsDegraded', status: 'True', reason: 'PrefetchFailed', message, lastTransitionTime: '2026-01-01T00:00:00Z' });
const pullError = (image: string) => `failed to pull image "${image}" (5 tries): timed out waiting for the condition: rpc error: code = Unknown desc = manifest unknown`;

describe('projectMco reads the MachineConfigNode shapes MCO writes', () => {
  it('v1: lastFailedGenerationError at the desired generation is degraded', () => {
    expect(nodeOf({ desiredGeneration: 2, currentGeneration: 1, lastFailedGeneration: 2, lastFailedGenerationError: 'ENOSPC' }, MCO_V1)).toMatchObject({ phase: 'degraded', error: 'ENOSPC' });
  });

  it('v1alpha1 (4.16-4.18): lastFailedGenerationErrors, a list of strings, joined', () => {
    expect(nodeOf({ desiredGeneration: 2, lastFailedGeneration: 2, lastFailedGenerationErrors: ['a', 'b'] })).toMatchObject({ phase: 'degraded', error: 'a; b' });
  });

  it("4.16's zero generations on a rewritten entry are no failure", () => {
    expect(nodeOf({ desiredGeneration: 2, currentGeneration: 0, lastFailedGeneration: 0 })).toMatchObject({ phase: 'progressing', currentGeneration: 0 });
  });

  it('a failure of an older generation does not make the new one degraded', () => {
    expect(nodeOf({ desiredGeneration: 2, currentGeneration: 1, lastFailedGeneration: 1, lastFailedGenerationErrors: ['old'] })).toMatchObject({ phase: 'progressing' });
  });

  it('the sync deadline is progress: the failure fields, then the Degraded condition the next sync leaves behind', () => {
    const requeue = 'requeue: prefetching images incomplete after timeout: 2m0s';
    expect(nodeOf({ desiredGeneration: 2, lastFailedGeneration: 2, lastFailedGenerationError: requeue }, MCO_V1)).toMatchObject({ phase: 'progressing', note: `MCO sync deadline passed, pulling on (${requeue})` });
    expect(nodeOf({ desiredGeneration: 2 }, MCO_V1, [degradedCondition(requeue)])).toMatchObject({ phase: 'progressing' });
  });

  it('4.19+: a generic Degraded after a deadline requeue is progress until an entry error or success says otherwise; after a real error it is that error', () => {
    const requeue = 'requeue: prefetching images incomplete after timeout: 2m0s';
    const generic = degradedCondition('One or more PinnedImageSet is experiencing an error. See PinnedImageSet list for more details.');
    const memory = new DaemonErrors();
    const at = (entry: Record<string, unknown>, conditions: unknown[]) => projectMco(view(entry, MCO_V1, conditions), ['s'], MCO_V1, memory).sets[0]!.nodes[0]!;
    // The deadline sync writes the requeue into the entry; the next sync drops it, Degraded (generic) stays.
    expect(at({ desiredGeneration: 2, lastFailedGeneration: 2, lastFailedGenerationError: requeue }, [generic])).toMatchObject({ phase: 'progressing' });
    expect(at({ desiredGeneration: 2 }, [generic])).toMatchObject({ phase: 'progressing', note: `MCO reports Degraded since its last deadline (${requeue}); still pulling` });
    // A real error follows: the entry names it, and the next sync's generic Degraded keeps failing with it.
    expect(at({ desiredGeneration: 2, lastFailedGeneration: 2, lastFailedGenerationError: pullError(OURS) }, [generic])).toMatchObject({ phase: 'degraded', error: pullError(OURS) });
    expect(at({ desiredGeneration: 2 }, [generic])).toMatchObject({ phase: 'degraded', error: pullError(OURS) });
    // Degraded cleared: forgotten.
    expect(at({ desiredGeneration: 2 }, [])).toMatchObject({ phase: 'progressing' });
    expect(at({ desiredGeneration: 2 }, [generic])).toMatchObject({ phase: 'progressing', note: expect.stringMatching(/^MCO reports Degraded without naming an error/) });
  });

  it("another set's image error is named as foreign and does not fail this set", () => {
    const node = nodeOf({ desiredGeneration: 2, lastFailedGeneration: 2, lastFailedGenerationError: pullError(THEIRS) }, MCO_V1);
    expect(node).toMatchObject({ phase: 'progressing' });
    expect(node.error).toBeUndefined();
    expect(node.note).toBe(`error from set other (image ${THEIRS}), not from this set; MCO finishes no set of the pool until it is fixed`);
  });

  it("an error naming this set's image, or naming no image (disk, NotReady), fails it", () => {
    expect(nodeOf({ desiredGeneration: 2, lastFailedGeneration: 2, lastFailedGenerationError: pullError(OURS) }, MCO_V1)).toMatchObject({ phase: 'degraded', error: pullError(OURS) });
    expect(nodeOf({ desiredGeneration: 2 }, MCO_V1, [degradedCondition('Error: storage available is less than minimum required')])).toMatchObject({ phase: 'degraded', error: 'Error: storage available is less than minimum required' });
  });

  it('a targeted node without a MachineConfigNode is pending and says no daemon reports it', () => {
    expect(nodeOf(undefined, MCO_V1)).toMatchObject({ phase: 'pending', unreported: expect.stringMatching(/^no MachineConfigNode for this node: no MCO daemon reports it/) });
  });
});

describe('judgeMcoError', () => {
  const owners = (image: string) => (image === THEIRS ? ['other'] : []);
  it('an image removed during sync counts against the set holding it', () => {
    expect(judgeMcoError(`failed to pull image: image removed during sync: ${OURS}`, new Set([OURS]), owners)).toEqual({ failure: true });
    expect(judgeMcoError(`failed to pull image: image removed during sync: ${THEIRS}`, new Set([OURS]), owners)).toMatchObject({ failure: false });
  });
  it('reads the disk check\'s podman error (an image the registry lacks) as naming that image', () => {
    const podman = (image: string) => `failed to execute podman manifest inspect for "${image}": exit status 125`;
    expect(judgeMcoError(podman(OURS), new Set([OURS]), owners)).toEqual({ failure: true });
    expect(judgeMcoError(podman(THEIRS), new Set([OURS]), owners)).toMatchObject({ failure: false, note: expect.stringMatching(/^error from set .* \(image /) });
  });
  it('reads a disk check cut by the sync deadline (podman killed, ImageStatus past it) as the deadline, not the image', () => {
    expect(judgeMcoError(`failed to execute podman manifest inspect for "${OURS}": signal: killed`, new Set([OURS]), owners)).toMatchObject({ failure: false, note: expect.stringMatching(/^MCO sync deadline passed during its disk check/) });
    expect(judgeMcoError(`failed to get image status for "${OURS}": rpc error: code = DeadlineExceeded desc = context deadline exceeded`, new Set([OURS]), owners)).toMatchObject({ failure: false });
    // Any other exit of podman is the image's.
    expect(judgeMcoError(`failed to execute podman manifest inspect for "${OURS}": exit status 125`, new Set([OURS]), owners)).toEqual({ failure: true });
  });
});

describe('DaemonErrors', () => {
  it('shows a failed pull\'s own error for the "image removed during sync" that follows it (the daemon marks a failed image pulled)', () => {
    const memory = new DaemonErrors();
    const pull = `failed to pull image "${OURS}" (5 tries): timed out waiting for the condition: manifest unknown`;
    memory.seen('worker-0', pull);
    expect(memory.explained('worker-0', `failed to pull image: image removed during sync: ${OURS}`)).toBe(pull);
    // Another image, or another node: the text as written.
    expect(memory.explained('worker-0', `failed to pull image: image removed during sync: ${THEIRS}`)).toBe(`failed to pull image: image removed during sync: ${THEIRS}`);
    expect(memory.explained('worker-1', `failed to pull image: image removed during sync: ${OURS}`)).toBe(`failed to pull image: image removed during sync: ${OURS}`);
  });
});
