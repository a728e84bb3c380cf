import { describe, expect, it } from 'vitest';
import { PLAN_API_VERSION, type Plan, type PlannedImage } from '../plan/types.js';
import { osImageAdvice, osRebaseSource } from './os-image-via-mco.js';

const image = (name: string, n: number): PlannedImage => ({
  name, names: [name], pullSpec: `quay.io/o/art@sha256:${String(n).repeat(64)}`, digest: `sha256:${String(n).repeat(64)}`, source: 'component', role: 'all', evidence: [],
  compressedBytes: 2 ** 30, diskBytes: 2 ** 31, sizeMethod: 'gzip-isize', config: { digest: 'sha256:c', size: 1 },
  layers: [{ digest: `sha256:${String(n + 5).repeat(64)}`, mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', compressedBytes: 2 ** 30, diskBytes: 2 ** 31, method: 'gzip-isize' }],
});

function plan(version: string, featureSet = 'Default'): Plan {
  const images = [image('rhel-coreos', 1), image('cli', 2)];
  const set = (role: 'control-plane' | 'worker') => ({ name: `p-${role}`, role, labels: { 'machineconfiguration.openshift.io/role': role === 'worker' ? 'worker' : 'master' }, images: images.map((i) => i.pullSpec), compressedBytes: 0, diskBytes: 0, estimate: { method: 'exact' as const, exactLayers: 0, estimatedLayers: 0 } });
  return {
    apiVersion: PLAN_API_VERSION, kind: 'Plan', profile: 'self-managed-high-availability',
    release: { pullSpec: 'quay.io/r@sha256:x', digest: 'sha256:x', manifestDigest: 'sha256:x', version, architecture: 'amd64', multiArch: false, channels: [] },
    cluster: { profile: 'self-managed-high-availability', featureSet, capabilities: [], exclude: [], platform: null },
    images, skipped: [], sets: [set('control-plane'), set('worker')], warnings: [],
  };
}

describe('the node OS image on the agent backend', () => {
  it('knows where each release\'s MCO rebases from (update.go of each branch)', () => {
    expect(['4.16.3', '4.17.1', '4.18.9', '4.19.0', '4.22.2', '5.0.2'].map(osRebaseSource)).toEqual(['registry', 'local-with-gate', 'local-with-gate', 'local-if-pool-lists-a-set', 'local-if-pool-lists-a-set', 'local']);
  });

  it('4.19-4.22: warns for the pools listing no MCO set; the flag gives one MCO set per plan set, of the OS image alone', () => {
    expect(osImageAdvice({ plan: plan('4.21.4'), poolsListingSets: new Set(['master']), viaMco: false }).warnings).toEqual([
      "MCO 4.21.4 rebases a node from its own storage only when the node's pool lists a PinnedImageSet of MCO's; pool worker lists none, so its nodes pull the OS image (1.0 GiB) again at the upgrade: --os-image-via-mco writes one MCO set per pool holding it",
    ]);
    expect(osImageAdvice({ plan: plan('4.21.4'), poolsListingSets: new Set(['master', 'worker']), viaMco: false }).warnings).toEqual([]);
    const { mcoSets } = osImageAdvice({ plan: plan('4.21.4'), poolsListingSets: new Set(), viaMco: true });
    expect(mcoSets.map((s) => [s.name, s.labels['machineconfiguration.openshift.io/role'], s.images.length, s.mcoCheckBytes])).toEqual([['p-control-plane-os-image', 'master', 1, 2 ** 30], ['p-worker-os-image', 'worker', 1, 2 ** 30]]);
    expect(() => osImageAdvice({ plan: plan('4.21.4'), poolsListingSets: undefined, viaMco: true })).toThrow('--os-image-via-mco: this cluster serves no MCO PinnedImageSets');
  });

  it('4.16 pulls it anyway; 4.17-4.18 take it locally only with TechPreviewNoUpgrade; the flag is refused where no set changes anything', () => {
    expect(osImageAdvice({ plan: plan('4.16.3'), poolsListingSets: undefined, viaMco: false }).warnings).toEqual(['MCO 4.16.3 pulls the node OS image (1.0 GiB) from the registry at the upgrade whatever is on the node: staging it saves no download on 4.16']);
    expect(osImageAdvice({ plan: plan('4.18.2'), poolsListingSets: undefined, viaMco: false }).warnings[0]).toMatch(/only with the PinnedImages feature gate \(TechPreviewNoUpgrade\); this plan's feature set is Default/);
    expect(osImageAdvice({ plan: plan('4.18.2', 'TechPreviewNoUpgrade'), poolsListingSets: undefined, viaMco: false }).warnings).toEqual([]);
    expect(() => osImageAdvice({ plan: plan('4.16.3'), poolsListingSets: undefined, viaMco: true })).toThrow(/always pulls the OS image from the registry/);
    expect(() => osImageAdvice({ plan: plan('4.17.3'), poolsListingSets: new Set(), viaMco: true })).toThrow(/PinnedImages feature gate/);
  });
});
