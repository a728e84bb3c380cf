import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import type { CatalogBundle, CatalogChannel, ChannelEntry, DeclarativeConfig, GroupVersionKind } from './declcfg.js';
import { MAX_ADDED_BUNDLES, resolveDependencies } from './resolve.js';
import type { CatalogIndex, Resolution } from './resolve.js';

function bundle(pkg: string, name: string, version: string, extra: Partial<CatalogBundle> = {}): CatalogBundle {
  return { name, package: pkg, image: `quay.io/operatorhubio/${name}@sha256:${'0'.repeat(64)}`, version, provides: [], requiresApis: [], requiresPackages: [], constraints: [], relatedImages: [], ...extra };
}

/** A channel whose entries each replace the one before (the first is the tail). */
function chain(pkg: string, name: string, bundles: readonly CatalogBundle[], edges: Record<string, Partial<ChannelEntry>> = {}): CatalogChannel {
  return { name, package: pkg, entries: bundles.map((b, i) => ({ name: b.name, skips: [], ...(i > 0 ? { replaces: bundles[i - 1]?.name } : {}), ...edges[b.name] })) };
}

function config(packages: Record<string, string>, channels: CatalogChannel[], bundles: CatalogBundle[]): DeclarativeConfig {
  return { packages: Object.entries(packages).map(([name, defaultChannel]) => ({ name, defaultChannel })), channels, bundles, deprecations: [] };
}

function added(resolution: Resolution): string[] {
  return resolution.added.map((a) => `${a.catalog} ${a.bundle.name} for ${a.requiredBy}: ${a.requirement}`);
}

const etcdCluster: GroupVersionKind = { group: 'etcd.database.coreos.com', version: 'v1beta2', kind: 'EtcdCluster' };
const serviceMonitor: GroupVersionKind = { group: 'monitoring.coreos.com', version: 'v1', kind: 'ServiceMonitor' };

// community-operators etcd: two channels, the default one singlenamespace-alpha.
const etcd = ['0.6.1', '0.9.0', '0.9.2', '0.9.4'].map((v) => bundle('etcd', `etcdoperator.v${v}`, v, { provides: [etcdCluster] }));
const etcdClusterwide = [bundle('etcd', 'etcdoperator.v0.9.2-clusterwide', '0.9.2-clusterwide', { provides: [etcdCluster] }), bundle('etcd', 'etcdoperator.v0.9.4-clusterwide', '0.9.4-clusterwide', { provides: [etcdCluster] })];
const etcdConfig = (extra: CatalogBundle[] = [], extraChannels: CatalogChannel[] = []) =>
  config({ etcd: 'singlenamespace-alpha' }, [chain('etcd', 'singlenamespace-alpha', etcd), chain('etcd', 'clusterwide-alpha', etcdClusterwide), ...extraChannels], [...etcd, ...etcdClusterwide, ...extra]);

const vault = (range: string) => bundle('vault', 'vault-operator.v0.1.9', '0.1.9', { requiresPackages: [{ packageName: 'etcd', versionRange: range }] });
const community = (extra: CatalogBundle[] = [], extraChannels: CatalogChannel[] = []): CatalogIndex => ({ name: 'community-operators', config: etcdConfig(extra, extraChannels), priority: 0 });

describe('resolveDependencies', () => {
  it('adds the bundle nearest the default channel head whose version is in the required range', () => {
    const warnings: string[] = [];
    const resolution = resolveDependencies([{ catalog: 'community-operators', bundle: vault('>=0.9.0 <0.9.4') }], [community()], warnings);
    expect(added(resolution)).toEqual(['community-operators etcdoperator.v0.9.2 for vault-operator.v0.1.9: package etcd >=0.9.0 <0.9.4']);
    expect(warnings).toEqual([]);
  });

  it('adds nothing for a requirement a selected bundle already meets', () => {
    const selected = [{ catalog: 'community-operators', bundle: vault('>=0.9.0') }, { catalog: 'community-operators', bundle: etcd[3] as CatalogBundle }];
    expect(resolveDependencies(selected, [community()], []).added).toEqual([]);
  });

  it('takes the default channel first, then the other channels by name, over a higher version', () => {
    const pg = [bundle('postgresql', 'postgresql.v1.4.0', '1.4.0'), bundle('postgresql', 'postgresql.v2.0.0', '2.0.0'), bundle('postgresql', 'postgresql.v2.1.0', '2.1.0')];
    const catalog: CatalogIndex = {
      name: 'community-operators',
      config: config({ postgresql: 'stable' }, [chain('postgresql', 'stable', [pg[0] as CatalogBundle]), chain('postgresql', 'candidate', [pg[2] as CatalogBundle]), chain('postgresql', 'alpha', [pg[1] as CatalogBundle])], pg),
      priority: 0,
    };
    const app = (range: string) => bundle('keycloak', 'keycloak-operator.v22.0.1', '22.0.1', { requiresPackages: [{ packageName: 'postgresql', versionRange: range }] });
    expect(added(resolveDependencies([{ catalog: 'community-operators', bundle: app('>=1.0.0') }], [catalog], []))).toEqual(['community-operators postgresql.v1.4.0 for keycloak-operator.v22.0.1: package postgresql >=1.0.0']);
    expect(added(resolveDependencies([{ catalog: 'community-operators', bundle: app('>=2.0.0') }], [catalog], []))).toEqual(['community-operators postgresql.v2.0.0 for keycloak-operator.v22.0.1: package postgresql >=2.0.0']);
  });

  it('never picks an entry the channel skips, as OLM leaves skipped entries out of the channel order', () => {
    const redis = ['1.0.0', '2.0.0', '3.0.0'].map((v) => bundle('redis', `redis-operator.v${v}`, v));
    const catalog: CatalogIndex = { name: 'community-operators', config: config({ redis: 'stable' }, [chain('redis', 'stable', redis, { 'redis-operator.v3.0.0': { skips: ['redis-operator.v1.0.0'] } })], redis), priority: 0 };
    const app = bundle('gitlab', 'gitlab-operator.v0.8.0', '0.8.0', { requiresPackages: [{ packageName: 'redis', versionRange: '<2.0.0' }] });
    expect(() => resolveDependencies([{ catalog: 'community-operators', bundle: app }], [catalog], [])).toThrow(
      'catalog community-operators: bundle gitlab-operator.v0.8.0 requires package redis <2.0.0, and no bundle of the catalogs (community-operators) satisfies it: add the catalog that provides it, or leave gitlab out',
    );
  });

  describe('an API two catalogs provide', () => {
    const prometheus = bundle('prometheus', 'prometheusoperator.0.47.0', '0.47.0', { provides: [serviceMonitor] });
    const observability = bundle('observability-operator', 'observability-operator.v0.4.2', '0.4.2', { provides: [serviceMonitor] });
    const catalogs = (communityPriority: number, redhatPriority: number): CatalogIndex[] => [
      { name: 'community-operators', config: config({ prometheus: 'beta' }, [chain('prometheus', 'beta', [prometheus])], [prometheus]), priority: communityPriority },
      { name: 'redhat-operators', config: config({ 'observability-operator': 'stable' }, [chain('observability-operator', 'stable', [observability])], [observability]), priority: redhatPriority },
      { name: 'certified-operators', config: config({}, [], []), priority: 0 },
    ];
    const app = bundle('kiali', 'kiali-operator.v1.73.0', '1.73.0', { requiresApis: [serviceMonitor] });

    it("prefers the requiring bundle's own catalog over a higher priority one", () => {
      expect(added(resolveDependencies([{ catalog: 'community-operators', bundle: app }], catalogs(0, 10), []))).toEqual(['community-operators prometheusoperator.0.47.0 for kiali-operator.v1.73.0: API monitoring.coreos.com/v1 ServiceMonitor']);
    });

    it('prefers the higher priority catalog when neither is its own, then the name', () => {
      const ref = [{ catalog: 'certified-operators', bundle: app }];
      expect(resolveDependencies(ref, catalogs(0, 10), []).added.map((a) => a.catalog)).toEqual(['redhat-operators']);
      expect(resolveDependencies(ref, catalogs(10, 0), []).added.map((a) => a.catalog)).toEqual(['community-operators']);
      expect(resolveDependencies(ref, catalogs(5, 5), []).added.map((a) => a.catalog)).toEqual(['community-operators']);
    });
  });

  it('adds dependencies of dependencies, each naming the bundle that required it', () => {
    const backup = bundle('etcd-backup', 'etcd-backup-operator.v0.3.0', '0.3.0', { provides: [{ group: 'backup.example.com', version: 'v1', kind: 'EtcdBackup' }], requiresApis: [etcdCluster] });
    const app = bundle('app', 'app-operator.v1.0.0', '1.0.0', { requiresApis: [{ group: 'backup.example.com', version: 'v1', kind: 'EtcdBackup' }] });
    const resolution = resolveDependencies([{ catalog: 'community-operators', bundle: app }], [community([backup], [chain('etcd-backup', 'alpha', [backup])])], []);
    expect(added(resolution)).toEqual([
      'community-operators etcd-backup-operator.v0.3.0 for app-operator.v1.0.0: API backup.example.com/v1 EtcdBackup',
      'community-operators etcdoperator.v0.9.4 for etcd-backup-operator.v0.3.0: API etcd.database.coreos.com/v1beta2 EtcdCluster',
    ]);
  });

  it('ends a dependency cycle once both bundles are chosen', () => {
    const proxy = bundle('etcd-proxy', 'etcd-proxy.v1.0.0', '1.0.0', { requiresPackages: [{ packageName: 'vault', versionRange: '>=0.1.0' }], provides: [{ group: 'proxy.example.com', version: 'v1', kind: 'Proxy' }] });
    const vaultWithProxy = bundle('vault', 'vault-operator.v0.1.9', '0.1.9', { requiresApis: [{ group: 'proxy.example.com', version: 'v1', kind: 'Proxy' }] });
    const catalog = community([proxy, vaultWithProxy], [chain('etcd-proxy', 'stable', [proxy]), chain('vault', 'alpha', [vaultWithProxy])]);
    expect(added(resolveDependencies([{ catalog: 'community-operators', bundle: vaultWithProxy }], [catalog], []))).toEqual(['community-operators etcd-proxy.v1.0.0 for vault-operator.v0.1.9: API proxy.example.com/v1 Proxy']);
  });

  it('refuses a requirement nothing satisfies, naming the bundle and the requirement', () => {
    const app = bundle('app', 'app-operator.v1.0.0', '1.0.0', { requiresApis: [{ group: 'example.com', version: 'v1', kind: 'Missing' }] });
    const resolve = () => resolveDependencies([{ catalog: 'community-operators', bundle: app }], [community()], []);
    expect(resolve).toThrow(BadInputError);
    expect(resolve).toThrow('catalog community-operators: bundle app-operator.v1.0.0 requires API example.com/v1 Missing, and no bundle of the catalogs (community-operators) satisfies it: add the catalog that provides it, or leave app out');
  });

  it('refuses a second bundle of a package already selected, saying why', () => {
    const selected = [{ catalog: 'community-operators', bundle: vault('>=0.9.4') }, { catalog: 'community-operators', bundle: etcd[2] as CatalogBundle }];
    expect(() => resolveDependencies(selected, [community()], [])).toThrow(/requires package etcd >=0\.9\.4, .* without a conflict \(etcdoperator\.v0\.9\.4 would be a second bundle of package etcd beside etcdoperator\.v0\.9\.2\)/);
  });

  it('passes over a provider that conflicts with a chosen bundle, with a warning, for the next one', () => {
    const monitoring = [bundle('monitoring', 'monitoring.v1', '1.0.0'), bundle('monitoring', 'monitoring.v2', '2.0.0', { provides: [serviceMonitor] })];
    const prometheus = bundle('prometheus', 'prometheusoperator.0.47.0', '0.47.0', { provides: [serviceMonitor] });
    const catalog: CatalogIndex = { name: 'community-operators', config: config({ monitoring: 'stable', prometheus: 'beta' }, [chain('monitoring', 'stable', monitoring), chain('prometheus', 'beta', [prometheus])], [...monitoring, prometheus]), priority: 0 };
    const app = bundle('kiali', 'kiali-operator.v1.73.0', '1.73.0', { requiresApis: [serviceMonitor] });
    const warnings: string[] = [];
    const resolution = resolveDependencies([{ catalog: 'community-operators', bundle: monitoring[0] as CatalogBundle }, { catalog: 'community-operators', bundle: app }], [catalog], warnings);
    expect(resolution.added.map((a) => a.bundle.name)).toEqual(['prometheusoperator.0.47.0']);
    expect(warnings).toEqual([
      'catalog community-operators: bundle kiali-operator.v1.73.0 requires API monitoring.coreos.com/v1 ServiceMonitor: chose prometheusoperator.0.47.0 from catalog community-operators, passing over a better candidate (monitoring.v2 would be a second bundle of package monitoring beside monitoring.v1)',
    ]);
  });

  it('refuses a versionRange blang cannot parse, naming bundle, package and range', () => {
    expect(() => resolveDependencies([{ catalog: 'community-operators', bundle: vault('^0.9.0') }], [community()], [])).toThrow(
      'catalog community-operators: bundle vault-operator.v0.1.9 (package vault) requires package etcd with versionRange "^0.9.0", which blang/semver (OLM\'s parser) cannot read, so OLM fails to resolve it: fix the catalog',
    );
  });

  it('warns that olm.constraint properties are not resolved', () => {
    const warnings: string[] = [];
    resolveDependencies([{ catalog: 'community-operators', bundle: bundle('app', 'app-operator.v1.0.0', '1.0.0', { constraints: ['olm.constraint'] }) }], [community()], warnings);
    expect(warnings).toEqual(['catalog community-operators: bundle app-operator.v1.0.0 declares olm.constraint, which prestage does not resolve: bundles that OLM installs for them are not staged']);
  });

  it(`stops with an error past ${MAX_ADDED_BUNDLES} added bundles`, () => {
    const count = MAX_ADDED_BUNDLES + 2;
    const links = Array.from({ length: count }, (_, i) => bundle(`p${i}`, `p${i}.v1`, '1.0.0', i + 1 < count ? { requiresPackages: [{ packageName: `p${i + 1}`, versionRange: '>=1.0.0' }] } : {}));
    const catalog: CatalogIndex = { name: 'hostile', config: config(Object.fromEntries(links.map((b) => [b.package, 'stable'])), links.map((b) => chain(b.package, 'stable', [b])), links), priority: 0 };
    expect(() => resolveDependencies([{ catalog: 'hostile', bundle: links[0] as CatalogBundle }], [catalog], [])).toThrow(`dependency resolution would add more than ${MAX_ADDED_BUNDLES} bundles (at p${MAX_ADDED_BUNDLES}.v1 requiring package p${MAX_ADDED_BUNDLES + 1} >=1.0.0)`);
  });
});
