import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import type { CatalogBundle, CatalogChannel, ChannelEntry, DeclarativeConfig } from './declcfg.js';
import { selectFromCatalog, type Selected } from './select.js';
import type { CatalogSelection, PackageSelection } from './selection.js';

function bundle(pkg: string, version: string): CatalogBundle {
  return {
    name: `${pkg}.v${version}`, package: pkg, image: `quay.io/community-operator-pipeline-prod/${pkg}:${version}`, version,
    provides: [], requiresApis: [], requiresPackages: [], constraints: [], relatedImages: [],
  };
}

/** `entries` as [version, replaces?, skips?, skipRange?], named like community bundles: `pkg.vX.Y.Z`. */
function channel(pkg: string, name: string, entries: [string, string?, string[]?, string?][]): CatalogChannel {
  const n = (v: string): string => `${pkg}.v${v}`;
  return {
    name, package: pkg,
    entries: entries.map(([v, replaces, skips = [], skipRange]): ChannelEntry => ({ name: n(v), replaces: replaces && n(replaces), skips: skips.map(n), skipRange })),
  };
}

/** In the shape of community-operators: several channels, skips, skipRange, a one-bundle package, OpenShift-style prereleases. */
const community: DeclarativeConfig = {
  packages: [
    { name: 'argocd-operator', defaultChannel: 'alpha' },
    { name: 'cert-utils-operator', defaultChannel: 'stable' },
    { name: 'etcd', defaultChannel: 'singlenamespace-alpha' },
    { name: 'local-storage-operator', defaultChannel: 'stable' },
  ],
  channels: [
    channel('argocd-operator', 'alpha', [['0.1.0'], ['0.2.0', '0.1.0'], ['0.2.1', '0.2.0'], ['0.3.0', '0.2.1', ['0.2.2']], ['0.4.0', '0.3.0', [], '>=0.3.0 <0.4.0'], ['0.5.0', '0.4.0']]),
    channel('argocd-operator', 'stable', [['0.4.0', '0.3.0', [], '>=0.3.0 <0.4.0'], ['0.5.0', '0.4.0']]),
    channel('argocd-operator', 'hotfix-0.2', [['0.2.2', '0.2.1']]),
    // 1.3.1 is a z-stream fix off the replaces chain, skipped by the head.
    channel('cert-utils-operator', 'stable', [['1.2.0'], ['1.3.0', '1.2.0'], ['1.3.1', '1.3.0'], ['1.4.0', '1.3.0'], ['1.5.0', '1.4.0', ['1.3.1']]]),
    channel('etcd', 'singlenamespace-alpha', [['0.9.4']]),
    channel('local-storage-operator', 'stable', [['4.16.0-202410011135'], ['4.16.0-202411011135', '4.16.0-202410011135'], ['4.17.0', '4.16.0-202411011135']]),
  ],
  bundles: [
    ...['0.1.0', '0.2.0', '0.2.1', '0.2.2', '0.3.0', '0.4.0', '0.5.0'].map((v) => bundle('argocd-operator', v)),
    ...['1.2.0', '1.3.0', '1.3.1', '1.4.0', '1.5.0'].map((v) => bundle('cert-utils-operator', v)),
    bundle('etcd', '0.9.4'),
    ...['4.16.0-202410011135', '4.16.0-202411011135', '4.17.0'].map((v) => bundle('local-storage-operator', v)),
  ],
  deprecations: [
    { package: 'etcd', schema: 'olm.package', name: '', message: 'etcd is deprecated' },
    { package: 'argocd-operator', schema: 'olm.channel', name: 'hotfix-0.2', message: 'use alpha' },
    { package: 'argocd-operator', schema: 'olm.bundle', name: 'argocd-operator.v0.1.0', message: 'too old' },
    { package: 'argocd-operator', schema: 'olm.bundle', name: 'argocd-operator.v0.5.0', message: 'has a CVE' },
  ],
};

function select(packages: PackageSelection[], full = false, config = community): Selected & { warnings: string[] } {
  const selection: CatalogSelection = { catalog: 'quay.io/operatorhubio/catalog:latest', full, packages };
  const warnings: string[] = [];
  return { ...selectFromCatalog(config, selection, warnings), warnings };
}

const names = (s: Selected): string[] => s.config.bundles.map((b) => b.name.replace(/^.*\.v/, ''));
const entries = (s: Selected, ch: string): string[] | undefined => s.config.channels.find((c) => c.name === ch)?.entries.map((e) => e.name.replace(/^.*\.v/, ''));

describe('selectFromCatalog', () => {
  it('no packages listed keeps the head of every channel of every package', () => {
    const s = select([]);
    expect(names(s)).toEqual(['0.2.2', '0.5.0', '1.5.0', '0.9.4', '4.17.0']);
    expect(s.why.get('argocd-operator.v0.5.0')).toBe('head of channel alpha; head of channel stable');
    expect(s.config.packages).toEqual(community.packages);
  });

  it('full with no packages keeps every bundle of the catalog', () => {
    const s = select([], true);
    expect(s.config.bundles).toHaveLength(community.bundles.length);
    expect(s.why.get('cert-utils-operator.v1.2.0')).toBe('full: every bundle');
  });

  it('full with packages keeps every bundle of their channels, and only those packages', () => {
    const s = select([{ name: 'cert-utils-operator', channels: [] }], true);
    expect(names(s)).toEqual(['1.2.0', '1.3.0', '1.3.1', '1.4.0', '1.5.0']);
    expect(s.why.get('cert-utils-operator.v1.3.1')).toBe('full: every bundle of channel stable');
    expect(s.config.packages.map((p) => p.name)).toEqual(['cert-utils-operator']);
  });

  it('a listed package without a range keeps the head of each listed channel, the head entry as the catalog has it', () => {
    const s = select([{ name: 'argocd-operator', channels: [{ name: 'alpha' }] }]);
    expect(names(s)).toEqual(['0.5.0']);
    expect(s.config.channels).toEqual([{ ...community.channels[0], entries: [community.channels[0]!.entries[5]] }]);
  });

  it('keeps the package with a single bundle', () => {
    expect(names(select([{ name: 'etcd', channels: [] }]))).toEqual(['0.9.4']);
  });

  it('a range keeps the replaces chain from the best in-range bundle down to the lowest, dropping a head above max', () => {
    const s = select([{ name: 'argocd-operator', channels: [{ name: 'alpha', minVersion: '0.2.0', maxVersion: '0.3.0' }] }], false);
    expect(entries(s, 'alpha')).toEqual(['0.2.0', '0.2.1', '0.3.0']);
    expect(s.why.get('argocd-operator.v0.2.1')).toBe('in range >=0.2.0 <=0.3.0 of channel alpha');
    expect(s.why.has('argocd-operator.v0.5.0')).toBe(false);
  });

  it('a range keeps bundles the kept entries skip when they are in range, though they are not entries of the channel', () => {
    const s = select([{ name: 'argocd-operator', channels: [{ name: 'alpha', minVersion: '0.2.0', maxVersion: '0.3.0' }] }]);
    expect(names(s)).toEqual(['0.2.0', '0.2.1', '0.2.2', '0.3.0']);
    expect(s.why.get('argocd-operator.v0.2.2')).toBe('in range >=0.2.0 <=0.3.0, skipped by argocd-operator.v0.3.0 in channel alpha');
  });

  it('a range keeps out-of-range bundles that bridge it, with a warning', () => {
    const s = select([{ name: 'cert-utils-operator', minVersion: '1.3.0', maxVersion: '1.3.9', channels: [] }]);
    expect(names(s)).toEqual(['1.3.0', '1.3.1', '1.4.0', '1.5.0']);
    expect(entries(s, 'stable')).toEqual(['1.3.0', '1.3.1', '1.4.0', '1.5.0']);
    expect(s.why.get('cert-utils-operator.v1.4.0')).toBe('bridges 1.3.0 to 1.5.0 in channel stable (out of range)');
    expect(s.why.get('cert-utils-operator.v1.5.0')).toBe('heads the range in channel stable: it skips 1.3.1 (out of range)');
    expect(s.warnings).toHaveLength(2);
    expect(s.warnings[0]).toMatch(/keeping cert-utils-operator\.v1\.5\.0 \(version 1\.5\.0\) outside the range >=1\.3\.0 <=1\.3\.9/);
  });

  it('min equal to max keeps exactly that version (OCPBUGS-61497), not the bundles bridging to it', () => {
    const s = select([{ name: 'cert-utils-operator', minVersion: '1.3.1', maxVersion: '1.3.1', channels: [] }]);
    expect(names(s)).toEqual(['1.3.1']);
    expect(s.why.get('cert-utils-operator.v1.3.1')).toBe('exactly version 1.3.1 in channel stable');
    expect(s.warnings).toEqual([]);
  });

  it('a minVersion alone keeps everything from it up to the head', () => {
    const s = select([{ name: 'cert-utils-operator', minVersion: '1.4.0', channels: [] }]);
    expect(names(s)).toEqual(['1.4.0', '1.5.0']);
  });

  it('a partial maxVersion covers its whole minor, as Masterminds semver reads it', () => {
    const s = select([{ name: 'argocd-operator', channels: [{ name: 'alpha', maxVersion: '0.2' }] }]);
    expect(entries(s, 'alpha')).toEqual(['0.1.0', '0.2.0', '0.2.1', '0.3.0']);
    // 0.3.0 is above 0.2 but skips 0.2.2, which is not: it heads the range.
    expect(s.why.get('argocd-operator.v0.2.2')).toBe('in range <=0.2, skipped by argocd-operator.v0.3.0 in channel alpha');
    expect(s.why.get('argocd-operator.v0.3.0')).toBe('heads the range in channel alpha: it skips 0.2.2 (out of range)');
    expect(s.why.has('argocd-operator.v0.4.0')).toBe(false);
  });

  it('a range leaves prerelease versions out unless a bound carries a prerelease', () => {
    const plain = select([{ name: 'local-storage-operator', minVersion: '4.16.0', channels: [] }]);
    expect(names(plain)).toEqual(['4.17.0']);
    const pre = select([{ name: 'local-storage-operator', minVersion: '4.16.0-0', maxVersion: '4.16.99', channels: [] }]);
    expect(names(pre)).toEqual(['4.16.0-202410011135', '4.16.0-202411011135']);
  });

  it('a package range applies to each of its channels and leaves out a channel it empties, with a warning', () => {
    const s = select([{ name: 'argocd-operator', minVersion: '0.2.2', maxVersion: '0.3.0', channels: [] }]);
    expect(s.config.channels.map((c) => c.name)).toEqual(['alpha', 'hotfix-0.2']);
    expect(entries(s, 'hotfix-0.2')).toEqual(['0.2.2']);
    expect(s.warnings).toEqual([expect.stringMatching(/channel stable: no bundle in range >=0\.2\.2 <=0\.3\.0; leaving the channel out/)]);
  });

  it('a range walk takes in the bundle the last entry replaces outside the channel', () => {
    const s = select([{ name: 'argocd-operator', defaultChannel: 'hotfix-0.2', channels: [{ name: 'hotfix-0.2', minVersion: '0.2.1' }] }]);
    expect(names(s)).toEqual(['0.2.1', '0.2.2']);
    expect(entries(s, 'hotfix-0.2')).toEqual(['0.2.2']);
    expect(s.why.get('argocd-operator.v0.2.1')).toBe('in range >=0.2.1 of channel hotfix-0.2, replaced by argocd-operator.v0.2.2 (not an entry)');
  });

  it('a range that selects nothing is refused', () => {
    expect(() => select([{ name: 'etcd', minVersion: '77.77.77', channels: [] }])).toThrow(/package etcd: no bundle of channel\(s\) singlenamespace-alpha is in the range/);
  });

  it('min equal to max with a version no channel has is refused', () => {
    expect(() => select([{ name: 'cert-utils-operator', minVersion: '1.3.2', maxVersion: '1.3.2', channels: [] }])).toThrow(BadInputError);
  });

  it('a package range and a channel range together are refused', () => {
    expect(() => select([{ name: 'argocd-operator', minVersion: '0.2.0', channels: [{ name: 'alpha', maxVersion: '0.3.0' }] }])).toThrow(/package minVersion\/maxVersion and channel alpha's are exclusive/);
  });

  it('full and a range together are refused', () => {
    expect(() => select([{ name: 'etcd', minVersion: '0.9.0', channels: [] }], true)).toThrow(/full: true cannot be mixed with minVersion\/maxVersion/);
  });

  it('an unknown package, an unknown channel and a bad bound are refused, naming the catalog', () => {
    expect(() => select([{ name: 'chocolate-factory-operator', channels: [] }])).toThrow(/catalog quay\.io\/operatorhubio\/catalog:latest has no package chocolate-factory-operator/);
    expect(() => select([{ name: 'etcd', channels: [{ name: 'clusterwide-alpha' }] }])).toThrow(/package etcd: no channel clusterwide-alpha \(its channels: singlenamespace-alpha\)/);
    expect(() => select([{ name: 'etcd', maxVersion: '0.9.x', channels: [] }])).toThrow(/package etcd: maxVersion "0\.9\.x" is not a semantic version/);
  });

  it('defaultChannel replaces the package default channel, and must be a kept channel', () => {
    const s = select([{ name: 'argocd-operator', defaultChannel: 'stable', channels: [{ name: 'stable' }] }]);
    expect(s.config.packages).toEqual([{ name: 'argocd-operator', defaultChannel: 'stable' }]);
    expect(() => select([{ name: 'argocd-operator', defaultChannel: 'alpha', channels: [{ name: 'stable' }] }])).toThrow(/defaultChannel alpha is not among the kept channels \(stable\)/);
  });

  it('a default channel left out without a defaultChannel is refused, as catalog-filter does', () => {
    expect(() => select([{ name: 'argocd-operator', channels: [{ name: 'stable' }] }])).toThrow(/its default channel alpha is not selected; set defaultChannel to one of the kept channels \(stable\)/);
    expect(() => select([{ name: 'argocd-operator', minVersion: '0.2.2', maxVersion: '0.2.2', channels: [{ name: 'alpha' }, { name: 'hotfix-0.2' }] }])).toThrow(/the range leaves its default channel alpha empty/);
  });

  it('keeps the deprecations of kept packages, channels and bundles only', () => {
    const s = select([{ name: 'argocd-operator', channels: [] }, { name: 'etcd', channels: [] }]);
    expect(s.config.deprecations.map((d) => d.message)).toEqual(['etcd is deprecated', 'use alpha', 'has a CVE']);
  });

  it('accepts versions with build metadata and refuses a bundle version that is not semver, naming bundle and catalog', () => {
    const withBuild: DeclarativeConfig = { ...community, bundles: community.bundles.map((b) => (b.name === 'etcd.v0.9.4' ? { ...b, version: '0.9.4+git.abc' } : b)) };
    expect(names(select([{ name: 'etcd', minVersion: '0.9.4', maxVersion: '0.9.4', channels: [] }], false, withBuild))).toEqual(['0.9.4']);
    const broken: DeclarativeConfig = { ...community, bundles: community.bundles.map((b) => (b.name === 'etcd.v0.9.4' ? { ...b, version: 'latest' } : b)) };
    expect(() => select([{ name: 'etcd', minVersion: '0.9.0', channels: [] }], false, broken)).toThrow(/catalog quay\.io\/operatorhubio\/catalog:latest: bundle etcd\.v0\.9\.4 of package etcd has version "latest", not a semantic version/);
  });

  it('refuses a kept channel entry with no bundle in the catalog', () => {
    const missing: DeclarativeConfig = { ...community, bundles: community.bundles.filter((b) => b.name !== 'etcd.v0.9.4') };
    expect(() => select([{ name: 'etcd', channels: [] }], false, missing)).toThrow(/channel singlenamespace-alpha: entry etcd\.v0\.9\.4 has no olm\.bundle/);
  });
});
