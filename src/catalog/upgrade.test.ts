import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import type { CatalogBundle, CatalogChannel, ChannelEntry } from './declcfg.js';
import { openShiftAllows, upgradeBlockers, upgradeWalkV0, upgradeWalkV1 } from './upgrade.js';
import { parseBlangRange } from './semver-grammar.js';
import type { UpgradeWalk } from './upgrade.js';

function bundle(pkg: string, name: string, version: string, extra: Partial<CatalogBundle> = {}): CatalogBundle {
  return { name, package: pkg, image: `quay.io/community-operator-pipeline-prod/${pkg}@sha256:${'0'.repeat(64)}`, version, provides: [], requiresApis: [], requiresPackages: [], constraints: [], relatedImages: [], ...extra };
}

function entry(name: string, edges: Partial<ChannelEntry> = {}): ChannelEntry {
  return { name, skips: [], ...edges };
}

function channel(pkg: string, name: string, entries: ChannelEntry[]): CatalogChannel {
  return { name, package: pkg, entries };
}

function byName(...bundles: CatalogBundle[]): Map<string, CatalogBundle> {
  return new Map(bundles.map((b) => [b.name, b]));
}

function walked(walk: UpgradeWalk): string[] {
  return walk.steps.map((s) => `${s.from} -> ${s.bundle.name} (${s.via})`);
}

// community-operators prometheus, channel beta: a plain replaces chain of five.
const prometheus = byName(...['0.22.2', '0.27.0', '0.32.0', '0.37.0', '0.47.0'].map((v) => bundle('prometheus', `prometheusoperator.${v}`, v)));
const beta = channel('prometheus', 'beta', [
  entry('prometheusoperator.0.22.2'),
  entry('prometheusoperator.0.27.0', { replaces: 'prometheusoperator.0.22.2' }),
  entry('prometheusoperator.0.32.0', { replaces: 'prometheusoperator.0.27.0' }),
  entry('prometheusoperator.0.37.0', { replaces: 'prometheusoperator.0.32.0' }),
  entry('prometheusoperator.0.47.0', { replaces: 'prometheusoperator.0.37.0' }),
]);

// strimzi-kafka-operator, channel stable: the head replaces the previous and skips several.
const strimzi = byName(...['0.36.0', '0.37.0', '0.38.0', '0.39.0', '0.40.0'].map((v) => bundle('strimzi-kafka-operator', `strimzi-cluster-operator.v${v}`, v)));
const strimziStable = channel('strimzi-kafka-operator', 'stable', [
  entry('strimzi-cluster-operator.v0.36.0'),
  entry('strimzi-cluster-operator.v0.37.0', { replaces: 'strimzi-cluster-operator.v0.36.0' }),
  entry('strimzi-cluster-operator.v0.38.0', { replaces: 'strimzi-cluster-operator.v0.37.0' }),
  entry('strimzi-cluster-operator.v0.39.0', { replaces: 'strimzi-cluster-operator.v0.38.0' }),
  entry('strimzi-cluster-operator.v0.40.0', { replaces: 'strimzi-cluster-operator.v0.39.0', skips: ['strimzi-cluster-operator.v0.36.0', 'strimzi-cluster-operator.v0.37.0', 'strimzi-cluster-operator.v0.38.0'] }),
]);

// A Red Hat-style head: a skipRange over the previous minor, with blang's x wildcard.
const gitops = byName(bundle('gitops', 'gitops-operator.v2.1.0', '2.1.0'), bundle('gitops', 'gitops-operator.v2.2.0', '2.2.0'), bundle('gitops', 'gitops-operator.v2.2.1', '2.2.1'));
const gitopsLatest = channel('gitops', 'latest', [
  entry('gitops-operator.v2.1.0'),
  entry('gitops-operator.v2.2.0', { replaces: 'gitops-operator.v2.1.0' }),
  entry('gitops-operator.v2.2.1', { replaces: 'gitops-operator.v2.2.0', skipRange: '>=2.1.x <2.2.1' }),
]);

describe('upgradeWalkV0', () => {
  it('installs every bundle of a replaces chain in turn, one hop per resolution', () => {
    const walk = upgradeWalkV0(beta, prometheus, { name: 'prometheusoperator.0.22.2', version: '0.22.2' }, 'community-operators');
    expect(walked(walk)).toEqual([
      'prometheusoperator.0.22.2 -> prometheusoperator.0.27.0 (replaces)',
      'prometheusoperator.0.27.0 -> prometheusoperator.0.32.0 (replaces)',
      'prometheusoperator.0.32.0 -> prometheusoperator.0.37.0 (replaces)',
      'prometheusoperator.0.37.0 -> prometheusoperator.0.47.0 (replaces)',
    ]);
    expect(walk.stranded).toBeUndefined();
  });

  it('is empty when the installed bundle is the channel head', () => {
    expect(upgradeWalkV0(beta, prometheus, { name: 'prometheusoperator.0.47.0', version: '0.47.0' }, 'community-operators')).toEqual({ steps: [], warnings: [] });
  });

  it('jumps straight to a head whose skips name the installed bundle', () => {
    const walk = upgradeWalkV0(strimziStable, strimzi, { name: 'strimzi-cluster-operator.v0.37.0', version: '0.37.0' }, 'community-operators');
    expect(walked(walk)).toEqual(['strimzi-cluster-operator.v0.37.0 -> strimzi-cluster-operator.v0.40.0 (skips)']);
  });

  it('takes the replaces edge to the head from the one entry the head does not skip', () => {
    const walk = upgradeWalkV0(strimziStable, strimzi, { name: 'strimzi-cluster-operator.v0.39.0', version: '0.39.0' }, 'community-operators');
    expect(walked(walk)).toEqual(['strimzi-cluster-operator.v0.39.0 -> strimzi-cluster-operator.v0.40.0 (replaces)']);
  });

  it('lands on the head from a bundle off the channel whose version the skipRange >=2.1.x <2.2.1 holds', () => {
    const walk = upgradeWalkV0(gitopsLatest, gitops, { name: 'gitops-operator.v2.1.4', version: '2.1.4' }, 'redhat-operators');
    expect(walked(walk)).toEqual(['gitops-operator.v2.1.4 -> gitops-operator.v2.2.1 (skipRange)']);
  });

  it('prefers the entry closest to the head over the one that replaces the installed bundle', () => {
    const walk = upgradeWalkV0(gitopsLatest, gitops, { name: 'gitops-operator.v2.1.0', version: '2.1.0' }, 'redhat-operators');
    expect(walked(walk)).toEqual(['gitops-operator.v2.1.0 -> gitops-operator.v2.2.1 (skipRange)']);
  });

  it('strands a bundle off the channel that nothing replaces, skips or covers, with the reason', () => {
    const walk = upgradeWalkV0(gitopsLatest, gitops, { name: 'gitops-operator.v2.0.9', version: '2.0.9' }, 'redhat-operators');
    expect(walk.steps).toEqual([]);
    expect(walk.stranded).toBe('catalog redhat-operators: package gitops channel latest: gitops-operator.v2.0.9 (2.0.9) is not in it, and no entry of it replaces or skips it or has a skipRange holding its version: OLM v0 does not upgrade it');
  });

  it('walks each channel of a package to its own head', () => {
    const bundles = byName(bundle('etcd', 'etcdoperator.v0.9.0', '0.9.0'), bundle('etcd', 'etcdoperator.v0.9.2', '0.9.2'), bundle('etcd', 'etcdoperator.v0.9.4', '0.9.4'));
    const singleNamespace = channel('etcd', 'singlenamespace-alpha', [entry('etcdoperator.v0.9.0'), entry('etcdoperator.v0.9.2', { replaces: 'etcdoperator.v0.9.0' })]);
    const clusterwide = channel('etcd', 'clusterwide-alpha', [entry('etcdoperator.v0.9.0'), entry('etcdoperator.v0.9.2', { replaces: 'etcdoperator.v0.9.0' }), entry('etcdoperator.v0.9.4', { replaces: 'etcdoperator.v0.9.2' })]);
    const installed = { name: 'etcdoperator.v0.9.0', version: '0.9.0' };
    expect(walked(upgradeWalkV0(singleNamespace, bundles, installed, 'community-operators'))).toEqual(['etcdoperator.v0.9.0 -> etcdoperator.v0.9.2 (replaces)']);
    expect(walked(upgradeWalkV0(clusterwide, bundles, installed, 'community-operators'))).toEqual(['etcdoperator.v0.9.0 -> etcdoperator.v0.9.2 (replaces)', 'etcdoperator.v0.9.2 -> etcdoperator.v0.9.4 (replaces)']);
  });

  it('refuses a channel whose replaces chain cycles, as OLM does', () => {
    const cyclic = channel('prometheus', 'beta', [
      entry('prometheusoperator.0.47.0', { replaces: 'prometheusoperator.0.37.0' }),
      entry('prometheusoperator.0.37.0', { replaces: 'prometheusoperator.0.32.0' }),
      entry('prometheusoperator.0.32.0', { replaces: 'prometheusoperator.0.37.0' }),
    ]);
    const walk = () => upgradeWalkV0(cyclic, prometheus, { name: 'prometheusoperator.0.32.0', version: '0.32.0' }, 'community-operators');
    expect(walk).toThrow(BadInputError);
    expect(walk).toThrow(/replaces cycle/);
  });

  it('ends a walk that a hostile skipRange turns back on itself, after the bundles OLM installs', () => {
    // x.v3 is skipped, so x.v2's way to the head is gone; x.v1's skipRange reaches back over x.v2.
    const hostile = channel('x', 'stable', [
      entry('x.v4', { replaces: 'x.v3', skips: ['x.v3'] }),
      entry('x.v3', { replaces: 'x.v2' }),
      entry('x.v2', { replaces: 'x.v1' }),
      entry('x.v1', { skipRange: '>=2.0.0 <3.0.0' }),
    ]);
    const bundles = byName(bundle('x', 'x.v1', '1.0.0'), bundle('x', 'x.v2', '2.0.0'), bundle('x', 'x.v3', '3.0.0'), bundle('x', 'x.v4', '4.0.0'));
    const walk = upgradeWalkV0(hostile, bundles, { name: 'x.v2', version: '2.0.0' }, 'hostile');
    expect(walked(walk)).toEqual(['x.v2 -> x.v1 (skipRange)']);
    expect(walk.stranded).toBe('catalog hostile: package x channel stable: the upgrade from x.v1 leads back to x.v2, already installed on the way: OLM v0 would cycle between them');
  });

  it('ignores, with a warning, a skipRange blang cannot parse though npm can', () => {
    const tilde = channel('gitops', 'latest', [entry('gitops-operator.v2.2.0'), entry('gitops-operator.v2.2.1', { replaces: 'gitops-operator.v2.2.0', skipRange: '~2.1' })]);
    const walk = upgradeWalkV0(tilde, gitops, { name: 'gitops-operator.v2.1.4', version: '2.1.4' }, 'redhat-operators');
    expect(walk.steps).toEqual([]);
    expect(walk.warnings).toEqual(['catalog redhat-operators: package gitops channel latest: bundle gitops-operator.v2.2.1 has skipRange "~2.1", which blang/semver cannot parse; OLM ignores it and so does the upgrade walk']);
  });
});

describe('parseBlangRange', () => {
  const holds = (range: string, version: string) => parseBlangRange(range)?.(semver.parse(version) as semver.SemVer);

  it('expands >=2.1.x <2.2.1 as blang does and keeps prereleases below the bound', () => {
    expect(['2.0.9', '2.1.0', '2.2.0', '2.2.1-rc.1', '2.2.1'].map((v) => holds('>=2.1.x <2.2.1', v))).toEqual([false, true, true, true, false]);
  });

  it('reads ||, a space after the operator and != as blang does', () => {
    expect(['0.9.0', '1.5.0', '2.0.0'].map((v) => holds('<1.0.0 || >= 2.0.0', v))).toEqual([true, false, true]);
    expect(['1.2.0', '1.2.3'].map((v) => holds('>=1.2.0 !=1.2.3', v))).toEqual([true, false]);
  });

  it("refuses npm's ~, ^ and commas, which blang cannot parse", () => {
    expect(['~1.2', '^1.2.0', '>=1.2.0,<2.0.0', ''].map((r) => parseBlangRange(r))).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('reads a hyphen range as blang does: the lone - dropped, =1.0.0 and =2.0.0 at once, so nothing', () => {
    expect(['1.0.0', '1.5.0', '2.0.0'].map((v) => holds('1.0.0 - 2.0.0', v))).toEqual([false, false, false]);
  });
});

describe('upgradeWalkV1', () => {
  const bundles = byName(...['1.0.0', '1.1.0', '1.2.0', '1.2.3', '2.0.0'].map((v) => bundle('cert-manager', `cert-manager.v${v}`, v)));
  const stableV1 = channel('cert-manager', 'stable-v1', [
    entry('cert-manager.v1.0.0'),
    entry('cert-manager.v1.1.0', { replaces: 'cert-manager.v1.0.0' }),
    entry('cert-manager.v1.2.0', { replaces: 'cert-manager.v1.1.0' }),
    entry('cert-manager.v1.2.3', { replaces: 'cert-manager.v1.2.0' }),
  ]);
  const stableV2 = channel('cert-manager', 'stable-v2', [entry('cert-manager.v2.0.0', { skipRange: '>=1.0.0 <2.0.0' })]);
  const installed = { name: 'cert-manager.v1.0.0', version: '1.0.0' };
  const source = { packageName: 'cert-manager', channels: [stableV1, stableV2], bundles };

  it('takes the highest successor across every channel when the ClusterExtension names none', () => {
    expect(walked(upgradeWalkV1(source, installed, 'operatorhubio'))).toEqual(['cert-manager.v1.0.0 -> cert-manager.v2.0.0 (skipRange)']);
  });

  it('steps through successors one at a time within a version range ">=1.0.0, <2.0.0"', () => {
    const walk = upgradeWalkV1({ ...source, versionRange: '>=1.0.0, <2.0.0' }, installed, 'operatorhubio');
    expect(walked(walk)).toEqual(['cert-manager.v1.0.0 -> cert-manager.v1.1.0 (replaces)', 'cert-manager.v1.1.0 -> cert-manager.v1.2.0 (replaces)', 'cert-manager.v1.2.0 -> cert-manager.v1.2.3 (replaces)']);
    expect(walk.stranded).toBeUndefined();
  });

  it('strands an installed bundle no successor in range "1.2.x" reaches', () => {
    const walk = upgradeWalkV1({ ...source, versionRange: '1.2.x' }, installed, 'operatorhubio');
    expect(walk.steps).toEqual([]);
    expect(walk.stranded).toMatch(/no bundle in the channels and version range succeeds cert-manager\.v1\.0\.0 \(1\.0\.0\): OLM v1 reports "no bundles found"/);
  });

  it('jumps to the highest version in range with SelfCertified, needing no catalog edge', () => {
    const walk = upgradeWalkV1({ ...source, channels: [stableV1], versionRange: '1.2.x', upgradeConstraintPolicy: 'SelfCertified' }, installed, 'operatorhubio');
    expect(walked(walk)).toEqual(['cert-manager.v1.0.0 -> cert-manager.v1.2.3 (selfCertified)']);
  });

  it('passes over a deprecated bundle for the highest one that is not', () => {
    const deprecations = [{ package: 'cert-manager', schema: 'olm.bundle' as const, name: 'cert-manager.v2.0.0', message: 'use 1.2.3' }];
    const walk = upgradeWalkV1({ ...source, deprecations, upgradeConstraintPolicy: 'SelfCertified' }, installed, 'operatorhubio');
    expect(walked(walk)).toEqual(['cert-manager.v1.0.0 -> cert-manager.v1.2.3 (selfCertified)']);
  });

  it('stops before a bundle with olm.package.required, which OLM v1 refuses', () => {
    const withDependency = new Map(bundles).set('cert-manager.v2.0.0', bundle('cert-manager', 'cert-manager.v2.0.0', '2.0.0', { requiresPackages: [{ packageName: 'trust-manager', versionRange: '>=0.1.0' }] }));
    const walk = upgradeWalkV1({ ...source, bundles: withDependency }, installed, 'operatorhubio');
    expect(walk.steps).toEqual([]);
    expect(walk.stranded).toBe('catalog operatorhubio: package cert-manager: bundle "cert-manager.v2.0.0" has a dependency declared via property "olm.package.required" which is currently not supported: OLM v1 refuses it and does not upgrade cert-manager.v1.0.0');
  });

  it('refuses a version range that is no semver constraint', () => {
    expect(() => upgradeWalkV1({ ...source, versionRange: 'latest' }, installed, 'operatorhubio')).toThrow(BadInputError);
  });
});

describe('OpenShift compatibility', () => {
  const withMax = (max?: string) => bundle('elasticsearch-operator', 'elasticsearch-operator.v5.8.1', '5.8.1', max === undefined ? {} : { maxOpenShiftVersion: max });

  it('allows a bundle on releases up to its olm.maxOpenShiftVersion minor, and any bundle without one', () => {
    expect(['4.16.0', '4.16.9', '4.17.0'].map((r) => openShiftAllows(withMax('4.16'), r))).toEqual([true, true, false]);
    expect(openShiftAllows(withMax(), '5.3.0')).toBe(true);
  });

  it('reads the value as OLM does: quotes and a .0 patch accepted, another patch refused', () => {
    expect(['"4.16"', '4.16.0', 'v4.16', '4.16.1', 'four'].map((m) => openShiftAllows(withMax(m), '4.16.2'))).toEqual([true, true, true, false, false]);
  });

  it('treats 4.23 and 5.0 as one release', () => {
    expect([openShiftAllows(withMax('4.23'), '5.0.1'), openShiftAllows(withMax('5.0'), '4.23.0'), openShiftAllows(withMax('4.22'), '5.0.0')]).toEqual([true, true, false]);
  });

  const csvs = [
    { namespace: 'openshift-logging', name: 'elasticsearch-operator.v5.8.1', maxOpenShiftVersion: '4.16' },
    { namespace: 'openshift-operators', name: 'servicemeshoperator.v2.5.0' },
  ];

  it('blocks 4.16.3 -> 4.17.0 for a CSV with maxOpenShiftVersion 4.16, with OLM\'s message', () => {
    expect(upgradeBlockers(csvs, '4.16.3', '4.17.0')).toEqual({
      reason: 'IncompatibleOperatorsInstalled',
      csvs: [csvs[0]],
      message: 'ClusterServiceVersions blocking minor version upgrades to 4.23 or major version upgrades to 5.0:\n- maximum supported OCP version for openshift-logging/elasticsearch-operator.v5.8.1 is 4.16',
    });
  });

  it('never blocks a z-stream: 4.16.3 -> 4.16.9', () => {
    expect(upgradeBlockers(csvs, '4.16.3', '4.16.9')).toBeUndefined();
  });

  it('blocks 4.22 -> 5.0 only for a max below 4.23, and lists unreadable values first', () => {
    const at422 = [
      { namespace: 'a', name: 'old.v1', maxOpenShiftVersion: '4.22' },
      { namespace: 'b', name: 'next.v1', maxOpenShiftVersion: '4.23' },
      { namespace: 'c', name: 'five.v1', maxOpenShiftVersion: '5.0' },
      { namespace: 'd', name: 'bad.v1', maxOpenShiftVersion: '4.22.1' },
    ];
    expect(upgradeBlockers(at422, '4.22.4', '5.0.0')?.message).toBe(
      'ClusterServiceVersions blocking minor version upgrades to 4.23 or major version upgrades to 5.0:\n' +
        '- d/bad.v1 has invalid olm.maxOpenShiftVersion properties: property olm.maxOpenShiftVersion must specify only <major>.<minor> version, got invalid value 4.22.1\n' +
        '- maximum supported OCP version for a/old.v1 is 4.22',
    );
  });
});
