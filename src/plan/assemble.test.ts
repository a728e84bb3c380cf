import { describe, expect, it } from 'vitest';
import type { ReleaseInfo } from '../release/payload.js';
import type { ComponentImage } from '../release/image-references.js';
import { assemblePlan, MAX_IMAGES_PER_SET, type PlanInput } from './assemble.js';
import type { Classification } from './classify.js';
import type { MeasuredImage } from './sizes.js';

const digest = (n: number) => `sha256:${n.toString(16).padStart(64, '0')}`;
const release: ReleaseInfo = {
  pullSpec: `quay.io/o/ocp-release@${digest(0)}`, digest: digest(0), manifestDigest: digest(0), version: '4.16.3',
  architecture: 'amd64', multiArch: false, channels: ['stable-4.16'], previous: [],
};
const layer = (n: number, size: number, method: 'gzip-isize' | 'estimate-2x' = 'gzip-isize') =>
  ({ digest: digest(100_000 + n), mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', compressedBytes: size, diskBytes: method === 'gzip-isize' ? size * 3 : size * 2, method });
const measured = (n: number, layers = [layer(0, 1000), layer(n, 10)]): MeasuredImage => ({ digest: digest(n), config: { digest: digest(200_000 + n), size: 1 }, layers });

function input(count: number, roleOf: (i: number) => Classification['role']): PlanInput {
  const components: ComponentImage[] = Array.from({ length: count }, (_, i) => ({
    name: `c${String(i).padStart(4, '0')}`, names: [`c${i}`], pullSpec: `quay.io/o/art@${digest(i + 1)}`, digest: digest(i + 1), annotations: {},
  }));
  return {
    release, releaseImage: measured(0, [layer(0, 1000)]), components,
    classifications: new Map(components.map((c, i) => [c.digest, { role: roleOf(i), evidence: ['test'] }])),
    sizes: new Map(components.map((c, i) => [c.digest, measured(i + 1)])),
    extras: [], cluster: { profile: 'p', featureSet: 'Default', capabilities: [], exclude: [], platform: null }, namePrefix: 'prestage', warnings: ['b', 'a', 'b'],
  };
}

describe('assemblePlan', () => {
  it('lists images the cluster never runs under skipped, in no set, with why', () => {
    const plan = assemblePlan(input(3, (i) => (i === 1 ? 'none' : 'all')));
    expect(plan.skipped).toEqual([{ name: 'c0001', names: ['c1'], pullSpec: `quay.io/o/art@${digest(2)}`, digest: digest(2), why: 'test' }]);
    expect(plan.images.map((i) => i.name)).toEqual(['release', 'c0000', 'c0002']);
    for (const set of plan.sets) expect(set.images).not.toContain(`quay.io/o/art@${digest(2)}`);
  });
  it('puts all-nodes images in both sets and control-plane-only ones in the control-plane set, with the release image', () => {
    const plan = assemblePlan(input(4, (i) => (i % 2 === 0 ? 'control-plane' : 'all')));
    const [cp, worker] = plan.sets;
    expect(cp!.name).toBe('prestage-4.16.3-control-plane');
    expect(cp!.labels).toEqual({ 'machineconfiguration.openshift.io/role': 'master' });
    expect(cp!.images).toHaveLength(5);
    expect(cp!.images).toContain(release.pullSpec);
    expect(worker!.name).toBe('prestage-4.16.3-worker');
    expect(worker!.labels).toEqual({ 'machineconfiguration.openshift.io/role': 'worker' });
    expect(worker!.images).toEqual([`quay.io/o/art@${digest(2)}`, `quay.io/o/art@${digest(4)}`]);
    expect(plan.warnings).toEqual(['a', 'b']);
  });

  it('counts a layer shared by images once per set', () => {
    const plan = assemblePlan(input(3, () => 'all'));
    const worker = plan.sets.find((s) => s.role === 'worker')!;
    // shared layer 1000 + 3 unique layers of 10 + 3 configs of 1
    expect(worker.compressedBytes).toBe(1000 + 30 + 3);
    expect(worker.diskBytes).toBe(3000 + 90);
    expect(worker.estimate).toEqual({ method: 'exact', exactLayers: 4, estimatedLayers: 0 });
  });

  it('says how many layers were estimated', () => {
    const base = input(1, () => 'all');
    const plan = assemblePlan({ ...base, sizes: new Map([[digest(1), measured(1, [layer(0, 1000), layer(1, 10, 'estimate-2x')])]]) });
    expect(plan.sets[1]!.estimate).toEqual({ method: 'partly-estimated', exactLayers: 1, estimatedLayers: 1 });
    expect(plan.images.find((i) => i.name === 'c0000')!.sizeMethod).toBe('mixed');
  });

  it(`splits a set of more than ${MAX_IMAGES_PER_SET} images into parts`, () => {
    const plan = assemblePlan(input(1001, () => 'all'));
    const worker = plan.sets.filter((s) => s.role === 'worker');
    expect(worker.map((s) => [s.name, s.images.length])).toEqual([
      ['prestage-4.16.3-worker-part-1', 500], ['prestage-4.16.3-worker-part-2', 500], ['prestage-4.16.3-worker-part-3', 1],
    ]);
    expect(new Set(worker.flatMap((s) => s.images)).size).toBe(1001);
  });

  it('is deterministic', () => {
    const a = JSON.stringify(assemblePlan(input(20, (i) => (i % 3 ? 'all' : 'control-plane'))));
    const b = JSON.stringify(assemblePlan(input(20, (i) => (i % 3 ? 'all' : 'control-plane'))));
    expect(a).toBe(b);
  });

  it('merges an extra image that is already in the release, widening its role', () => {
    const base = input(2, () => 'control-plane');
    const plan = assemblePlan({ ...base, extras: [{ name: 'c', pullSpec: `quay.io/o/art@${digest(1)}`, digest: digest(1), role: 'worker', measured: measured(1) }] });
    const merged = plan.images.filter((i) => i.digest === digest(1));
    expect(merged).toHaveLength(1);
    expect(merged[0]!.role).toBe('all');
  });
});

describe('assemblePlan with operators', () => {
  const summary = { catalogs: [], bundles: [] };
  const operatorImage = (n: number, packages: string[], role: 'all' | 'worker' | 'control-plane') => ({
    reference: `quay.io/op/i${n}:v1`, name: `i${n}`, role, evidence: ['test'], packages, bundles: packages.map((p) => `${p}.v1.0.0`),
    pullSpec: `quay.io/op/i${n}@${digest(50_000 + n)}`, digest: digest(50_000 + n), source: 'operator' as const,
    measured: measured(50_000 + n),
  });

  it('gives each package a set per role its images need, labelled with the package, beside the release sets', () => {
    const plan = assemblePlan({ ...input(2, () => 'all'), operators: { images: [operatorImage(1, ['etcd'], 'worker'), operatorImage(2, ['etcd'], 'all'), operatorImage(3, ['kv'], 'worker')], summary } });
    expect(plan.sets.map((s) => s.name)).toEqual(['prestage-4.16.3-control-plane', 'prestage-4.16.3-op-etcd-control-plane', 'prestage-4.16.3-worker', 'prestage-4.16.3-op-etcd-worker', 'prestage-4.16.3-op-kv-worker']);
    const etcdWorker = plan.sets.find((s) => s.name === 'prestage-4.16.3-op-etcd-worker')!;
    expect(etcdWorker.labels).toEqual({ 'machineconfiguration.openshift.io/role': 'worker', 'prestage.dev/operator-package': 'etcd' });
    expect(etcdWorker.operator).toEqual({ package: 'etcd', bundles: ['etcd.v1.0.0'] });
    expect(etcdWorker.images).toEqual([`quay.io/op/i1@${digest(50_001)}`, `quay.io/op/i2@${digest(50_002)}`]);
    expect(plan.sets.find((s) => s.name === 'prestage-4.16.3-worker')!.images).not.toContain(`quay.io/op/i1@${digest(50_001)}`);
  });

  it("names each operator set's newest bundle (by semver, not by name), which prune waits for", () => {
    const image = { ...operatorImage(1, ['etcd'], 'worker'), bundles: ['etcd.v0.10.0', 'etcd.v0.9.4'] };
    const bundles = [{ name: 'etcd.v0.9.4', version: '0.9.4' }, { name: 'etcd.v0.10.0', version: '0.10.0' }].map((b) => ({ ...b, catalog: 'c', package: 'etcd', image: '', why: 'x' }));
    const plan = assemblePlan({ ...input(1, () => 'all'), operators: { images: [image], summary: { catalogs: [], bundles } } });
    expect(plan.sets.find((s) => s.name === 'prestage-4.16.3-op-etcd-worker')!.operator).toEqual({ package: 'etcd', bundles: ['etcd.v0.10.0', 'etcd.v0.9.4'], head: 'etcd.v0.10.0' });
  });

  it("puts an image two packages bring in both packages' sets", () => {
    const plan = assemblePlan({ ...input(1, () => 'all'), operators: { images: [operatorImage(1, ['a', 'b'], 'worker')], summary } });
    for (const name of ['prestage-4.16.3-op-a-worker', 'prestage-4.16.3-op-b-worker']) expect(plan.sets.find((s) => s.name === name)!.images).toEqual([`quay.io/op/i1@${digest(50_001)}`]);
  });

  it("counts a layer shared between the release's and an operator's sets once per node", () => {
    const plan = assemblePlan({ ...input(1, () => 'all'), operators: { images: [operatorImage(1, ['etcd'], 'worker')], summary } });
    const sets = plan.sets.filter((s) => s.role === 'worker');
    const worker = plan.perNode!.find((t) => t.role === 'worker')!;
    // Both sets hold the shared 1000-byte layer (3000 on disk); a node stores it once.
    expect(sets.reduce((n, s) => n + s.diskBytes, 0) - worker.diskBytes).toBe(3000);
    expect(worker).toEqual({ role: 'worker', sets: sets.map((s) => s.name), images: 2, compressedBytes: 1000 + 10 + 10 + 2, diskBytes: 3000 + 30 + 30 });
  });

  it("shares one set per role among the operators past MCO's 100 sets a pool, and says so", () => {
    const images = Array.from({ length: 120 }, (_, i) => operatorImage(i, [`p${String(i).padStart(3, '0')}`], 'worker'));
    const plan = assemblePlan({ ...input(1, () => 'all'), operators: { images, summary } });
    const worker = plan.sets.filter((s) => s.role === 'worker');
    expect(worker.map((s) => s.name)).toEqual(['prestage-4.16.3-worker', 'prestage-4.16.3-operators-worker']);
    expect(worker[1]!.images).toHaveLength(120);
    expect(plan.warnings).toContain("120 operator packages would make 121 sets for the worker pool, over MCO's 100: their images share one set per role");
  });
});
