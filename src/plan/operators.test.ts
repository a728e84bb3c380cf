import { describe, expect, it } from 'vitest';
import type { BundleDeployment, CatalogBundle } from '../catalog/declcfg.js';
import { placeOperatorImages, type ChosenBundle } from './operators.js';

const CATALOG = { reference: 'registry.redhat.io/redhat/redhat-operator-index:v4.16', pullSpec: 'registry.redhat.io/redhat/redhat-operator-index@sha256:aa', packages: ['etcd'] };

function bundle(deployments?: BundleDeployment[], related: string[] = []): CatalogBundle {
  return {
    name: 'etcd.v0.9.4',
    package: 'etcd',
    image: 'quay.io/operatorhubio/etcd:v0.9.4',
    version: '0.9.4',
    provides: [],
    requiresApis: [],
    requiresPackages: [],
    constraints: [],
    relatedImages: [{ name: '', image: 'quay.io/operatorhubio/etcd:v0.9.4' }, ...related.map((image) => ({ name: image.includes('backup') ? 'backup' : '', image }))],
    ...(deployments ? { deployments } : {}),
  };
}
const deployment = (extra: Partial<BundleDeployment> = {}): BundleDeployment => ({ name: 'etcd-operator', nodeSelector: {}, tolerations: [], images: ['quay.io/coreos/etcd-operator:v0.9.4'], ...extra });
const chosen = (b: CatalogBundle): ChosenBundle[] => [{ catalog: CATALOG.reference, bundle: b, why: 'head of channel alpha' }];
const roleOf = (images: ReturnType<typeof placeOperatorImages>, reference: string) => images.find((i) => i.reference === reference)?.role;

describe('placeOperatorImages', () => {
  it('puts the catalog and bundle images on every node: the registry pod and the unpack Job run anywhere', () => {
    const images = placeOperatorImages(chosen(bundle([deployment()])), [CATALOG]);
    expect(roleOf(images, CATALOG.pullSpec)).toBe('all');
    expect(roleOf(images, 'quay.io/operatorhubio/etcd:v0.9.4')).toBe('all');
    expect(images.find((i) => i.reference === CATALOG.pullSpec)!.packages).toEqual(['etcd']);
    expect(images.find((i) => i.reference === CATALOG.pullSpec)!.bundles).toEqual([]);
  });

  it('puts a deployment with no selector and no control-plane toleration on workers', () => {
    const images = placeOperatorImages(chosen(bundle([deployment()])), []);
    expect(roleOf(images, 'quay.io/coreos/etcd-operator:v0.9.4')).toBe('worker');
  });

  it('puts a deployment that selects control-plane nodes on control-plane nodes, with the evidence', () => {
    const images = placeOperatorImages(chosen(bundle([deployment({ nodeSelector: { 'node-role.kubernetes.io/control-plane': '' } })])), []);
    const operator = images.find((i) => i.reference === 'quay.io/coreos/etcd-operator:v0.9.4')!;
    expect(operator.role).toBe('control-plane');
    expect(operator.evidence).toEqual(['runs in etcd.v0.9.4 (head of channel alpha): deployment etcd-operator selects control-plane nodes (nodeSelector node-role.kubernetes.io/control-plane)']);
  });

  it('puts a deployment that tolerates the control-plane taint and selects nothing on every node', () => {
    const tolerant = deployment({ tolerations: [{ key: 'node-role.kubernetes.io/master', operator: 'Exists', effect: 'NoSchedule' }] });
    expect(roleOf(placeOperatorImages(chosen(bundle([tolerant])), []), 'quay.io/coreos/etcd-operator:v0.9.4')).toBe('all');
    const everything = deployment({ tolerations: [{ operator: 'Exists' }] });
    expect(roleOf(placeOperatorImages(chosen(bundle([everything])), []), 'quay.io/coreos/etcd-operator:v0.9.4')).toBe('all');
  });

  it('puts operands (related images no deployment runs) on workers, named by their related-image name', () => {
    const images = placeOperatorImages(chosen(bundle([deployment({ nodeSelector: { 'node-role.kubernetes.io/master': '' } })], ['quay.io/coreos/etcd-backup:v1'])), []);
    const operand = images.find((i) => i.reference === 'quay.io/coreos/etcd-backup:v1')!;
    expect(operand.role).toBe('worker');
    expect(operand.name).toBe('backup');
  });

  it('says so when the catalog carries no CSV, and places its related images by the worker default', () => {
    const images = placeOperatorImages(chosen(bundle(undefined, ['quay.io/coreos/etcd-operator:v0.9.4'])), []);
    const operator = images.find((i) => i.reference === 'quay.io/coreos/etcd-operator:v0.9.4')!;
    expect(operator.role).toBe('worker');
    expect(operator.evidence[0]).toMatch(/the catalog carries no CSV \(olm\.csv\.metadata only\), so the worker set by default$/);
  });

  it('gives an image two bundles bring one entry, with the wider role and both bundles', () => {
    const a = bundle([deployment({ nodeSelector: { 'node-role.kubernetes.io/master': '' } })]);
    const b: CatalogBundle = { ...bundle([deployment()]), name: 'etcd.v0.9.5', image: 'quay.io/operatorhubio/etcd:v0.9.5' };
    const images = placeOperatorImages([{ catalog: CATALOG.reference, bundle: a, why: 'x' }, { catalog: CATALOG.reference, bundle: b, why: 'y' }], []);
    const operator = images.find((i) => i.reference === 'quay.io/coreos/etcd-operator:v0.9.4')!;
    expect(operator.role).toBe('all');
    expect(operator.bundles).toEqual(['etcd.v0.9.4', 'etcd.v0.9.5']);
    expect(operator.evidence).toHaveLength(2);
  });
});
