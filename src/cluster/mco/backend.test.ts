import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube.js';
import { mcoPaths, projectMco, type McoVersions } from './backend.js';

const ALPHA: McoVersions = { pinnedImageSets: 'v1alpha1', machineConfigNodes: 'v1alpha1' };

/** One worker pool, one worker node, one set at generation 2, and the node's entry for it. */
function view(entry: Record<string, unknown>) {
  const paths = mcoPaths(ALPHA);
  const byName = (...objects: KubeObject[]) => new Map(objects.map((o) => [o.metadata.name, o]));
  return new Map([
    [paths.pinnedImageSets, byName({ metadata: { name: 's', generation: 2, labels: { 'machineconfiguration.openshift.io/role': 'worker' } } })],
    [paths.machineConfigPools, byName({ metadata: { name: 'worker' }, spec: { nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } }, machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': 'worker' } } } })],
    [paths.nodes, byName({ metadata: { name: 'w0', labels: { 'node-role.kubernetes.io/worker': '' } } })],
    [paths.machineConfigNodes, byName({ metadata: { name: 'w0' }, status: { pinnedImageSets: [{ name: 's', ...entry }] } })],
  ]);
}

const nodeOf = (entry: Record<string, unknown>) => projectMco(view(entry), ['s'], ALPHA).sets[0]!.nodes[0]!;

describe('projectMco reads every MachineConfigNode shape MCO has written', () => {
  it('v1: lastFailedGenerationError at the desired generation is degraded', () => {
    expect(nodeOf({ desiredGeneration: 2, currentGeneration: 1, lastFailedGeneration: 2, lastFailedGenerationError: 'ENOSPC' })).toMatchObject({ phase: 'degraded', error: 'ENOSPC' });
  });

  it('v1alpha1 of 4.16: a list of strings or of { message }, joined', () => {
    expect(nodeOf({ desiredGeneration: 2, lastFailedGeneration: 2, lastFailedGenerationErrors: ['a', 'b'] })).toMatchObject({ phase: 'degraded', error: 'a; b' });
    expect(nodeOf({ desiredGeneration: 2, lastFailedGeneration: 2, lastFailedGenerationErrors: [{ message: 'c' }] })).toMatchObject({ phase: 'degraded', error: 'c' });
  });

  it('a failure of an older generation does not make the new one degraded', () => {
    expect(nodeOf({ desiredGeneration: 2, currentGeneration: 1, lastFailedGeneration: 1, lastFailedGenerationErrors: ['old'] })).toMatchObject({ phase: 'progressing' });
  });

  it('later v1alpha1: lastPinnedImageSetError with no failed generation is degraded until current catches up', () => {
    expect(nodeOf({ desiredGeneration: 2, currentGeneration: 1, lastPinnedImageSetError: 'pull failed' })).toMatchObject({ phase: 'degraded', error: 'pull failed' });
    expect(nodeOf({ desiredGeneration: 2, currentGeneration: 2, lastPinnedImageSetError: 'pull failed' })).toMatchObject({ phase: 'done' });
    expect(nodeOf({ desiredGeneration: 2, currentGeneration: 1 })).toMatchObject({ phase: 'progressing' });
  });
});
