import { describe, expect, it } from 'vitest';
import type { Catalog, CatalogBundle, CatalogChannel, DeclarativeConfig } from '../catalog/declcfg.js';
import type { LiveCsv, LiveOperators, LiveSubscription } from './live-olm.js';
import { liveCatalogImages, planLiveOperators, withLiveOperators, type LiveOperatorsInput } from './live-operators.js';
import { placeOperatorImages } from './operators.js';

const INDEX = 'registry.redhat.io/redhat/community-operator-index:v4.16';
const digest = (c: string) => `sha256:${c.repeat(64)}`;

function bundle(pkg: string, name: string, version: string, extra: Partial<CatalogBundle> = {}): CatalogBundle {
  const operator = `quay.io/${pkg}/operator:${version}`;
  return {
    name, package: pkg, version, image: `quay.io/bundles/${pkg}:${version}`, provides: [], requiresApis: [], requiresPackages: [], constraints: [],
    relatedImages: [{ name: '', image: `quay.io/bundles/${pkg}:${version}` }, { name: '', image: operator }, { name: 'server', image: `quay.io/${pkg}/server:1` }],
    ...extra,
  };
}

// The fixture catalog's shapes (fixtures/catalog.ts): datagrid's stable channel (skips, replaces, a
// skipRange head), csm-storage's plain chain with its CSV in the catalog, kv-store's alpha chain.
const stable: CatalogChannel = {
  name: 'stable', package: 'datagrid', entries: [
    { name: 'datagrid-operator.v2.3.3', skips: [] },
    { name: 'datagrid-operator.v2.3.4', skips: ['datagrid-operator.v2.3.3'] },
    { name: 'datagrid-operator.v2.4.0', replaces: 'datagrid-operator.v2.3.4', skips: [] },
    { name: 'datagrid-operator.v2.4.1', replaces: 'datagrid-operator.v2.4.0', skips: [] },
    { name: 'datagrid-operator.v2.4.2', replaces: 'datagrid-operator.v2.4.1', skips: [], skipRange: '>=2.3.x <2.4.1' },
  ],
};
const csmDeployment = { name: 'csm-storage-controller-manager', nodeSelector: {}, tolerations: [], images: ['quay.io/csm/storage-operator:v1'] };
function config(csmMax: Partial<Record<string, string>> = { '1.8.0': '4.16' }): DeclarativeConfig {
  return {
    packages: [{ name: 'datagrid', defaultChannel: 'stable' }, { name: 'csm-storage', defaultChannel: 'stable' }, { name: 'kv-store', defaultChannel: 'alpha' }],
    channels: [
      stable,
      { name: 'stable', package: 'csm-storage', entries: [{ name: 'csm-storage.v1.8.0', skips: [] }, { name: 'csm-storage.v1.8.1', replaces: 'csm-storage.v1.8.0', skips: [] }, { name: 'csm-storage.v1.9.0', replaces: 'csm-storage.v1.8.1', skips: [] }] },
      { name: 'alpha', package: 'kv-store', entries: [{ name: 'kv-store.v0.9.0', skips: [] }, { name: 'kv-store.v1.0.0', replaces: 'kv-store.v0.9.0', skips: [] }, { name: 'kv-store.v1.1.0', replaces: 'kv-store.v1.0.0', skips: [] }] },
    ],
    bundles: [
      ...['2.3.3', '2.3.4', '2.4.0', '2.4.1', '2.4.2'].map((v) => bundle('datagrid', `datagrid-operator.v${v}`, v)),
      ...['1.8.0', '1.8.1', '1.9.0'].map((v) => bundle('csm-storage', `csm-storage.v${v}`, v, { deployments: [csmDeployment], ...(csmMax[v] ? { maxOpenShiftVersion: csmMax[v] } : {}) })),
      ...['0.9.0', '1.0.0', '1.1.0'].map((v) => bundle('kv-store', `kv-store.v${v}`, v)),
    ],
    deprecations: [],
  };
}
const catalogOf = (reference: string, c: DeclarativeConfig = config()): Catalog => ({ reference, pullSpec: `${reference.split(':')[0]}@${digest('c')}`, digest: digest('c'), configsDir: '/configs', config: c });

const sub = (namespace: string, name: string, pkg: string, installedCSV: string | undefined, extra: Partial<LiveSubscription> = {}): LiveSubscription => ({
  namespace, name, package: pkg, source: 'community', sourceNamespace: 'openshift-marketplace', channel: 'stable', approval: 'Automatic', ...(installedCSV ? { installedCSV } : {}), ...extra,
});
const csv = (namespace: string, name: string, version: string, extra: Partial<LiveCsv> = {}): LiveCsv => ({ namespace, name, version, phase: 'Succeeded', ...extra });

function olm(parts: Partial<LiveOperators>): LiveOperators {
  return { subscriptions: [], catalogSources: [{ namespace: 'openshift-marketplace', name: 'community', image: INDEX, connectionState: 'READY' }], csvs: [], extensions: [], clusterCatalogs: [], warnings: [], ...parts };
}
function input(operators: LiveOperators, extra: Partial<LiveOperatorsInput> = {}): LiveOperatorsInput {
  return {
    operators,
    catalogs: new Map([[INDEX, catalogOf(INDEX)]]),
    nodes: [{ name: 'master-0', role: 'control-plane' }, { name: 'worker-0', role: 'worker' }, { name: 'worker-1', role: 'worker' }],
    pods: [],
    currentRelease: '4.16.2',
    targetRelease: '4.16.3',
    ...extra,
  };
}
const names = (plan: { chosen: ReadonlyArray<{ bundle: CatalogBundle }> }) => plan.chosen.map((c) => c.bundle.name);

describe('the upgrades OLM v0 walks a live cluster through', () => {
  it('stages every bundle of a plain replaces chain, one hop each, and says which step of whose walk', () => {
    const plan = planLiveOperators(input(olm({ subscriptions: [sub('csm', 'csm', 'csm-storage', 'csm-storage.v1.8.0')], csvs: [csv('csm', 'csm-storage.v1.8.0', '1.8.0')] })));
    expect(plan.chosen.map((c) => [c.bundle.name, c.why])).toEqual([
      ['csm-storage.v1.8.1', 'upgrade step 1 of 2 for Subscription csm/csm: replaces csm-storage.v1.8.0'],
      ['csm-storage.v1.9.0', 'upgrade step 2 of 2 for Subscription csm/csm: replaces csm-storage.v1.8.1'],
    ]);
    expect(plan.catalogs.map((c) => [c.catalog.reference, c.onNodes])).toEqual([[INDEX, true]]);
    expect(plan.warnings).toEqual([]);
  });

  // OLM tries the channel head first: its skipRange >=2.3.x <2.4.1 holds 2.3.3 and 2.4.0 alike, so
  // both jump straight to it, though 2.4.1 replaces 2.4.0; only 2.4.1 takes the replaces edge.
  it.each([
    ['datagrid-operator.v2.3.3', '2.3.3', 'its skipRange holds datagrid-operator.v2.3.3'],
    ['datagrid-operator.v2.4.0', '2.4.0', 'its skipRange holds datagrid-operator.v2.4.0'],
    ['datagrid-operator.v2.4.1', '2.4.1', 'replaces datagrid-operator.v2.4.1'],
  ])('from %s the head is one hop away, in the default channel when none is named', (installed, version, via) => {
    const plan = planLiveOperators(input(olm({ subscriptions: [sub('dg', 'datagrid', 'datagrid', installed, { channel: undefined })], csvs: [csv('dg', installed, version)] })));
    expect(plan.chosen.map((c) => [c.bundle.name, c.why])).toEqual([['datagrid-operator.v2.4.2', `upgrade step 1 of 1 for Subscription dg/datagrid: ${via}`]]);
  });

  it('stages the first install and the walk on from it when nothing is installed yet', () => {
    const plan = planLiveOperators(input(olm({ subscriptions: [sub('csm', 'csm', 'csm-storage', undefined, { startingCSV: 'csm-storage.v1.8.1' })] })));
    expect(plan.chosen.map((c) => [c.bundle.name, c.why])).toEqual([
      ['csm-storage.v1.8.1', 'install for Subscription csm/csm: nothing installed yet, so OLM installs csm-storage.v1.8.1 first'],
      ['csm-storage.v1.9.0', 'upgrade step 1 of 1 for Subscription csm/csm: replaces csm-storage.v1.8.1'],
    ]);
  });

  it('walks a Manual Subscription too, noting that each step waits for approval, and the Automatic ones of its namespace', () => {
    const plan = planLiveOperators(input(olm({
      subscriptions: [sub('ops', 'csm', 'csm-storage', 'csm-storage.v1.8.1', { approval: 'Manual', state: 'UpgradePending', currentCSV: 'csm-storage.v1.9.0' }), sub('ops', 'datagrid', 'datagrid', 'datagrid-operator.v2.4.1')],
      csvs: [csv('ops', 'csm-storage.v1.8.1', '1.8.1'), csv('ops', 'datagrid-operator.v2.4.1', '2.4.1')],
    })));
    expect(plan.chosen.map((c) => c.why)).toEqual([
      'upgrade step 1 of 1 for Subscription ops/csm: replaces csm-storage.v1.8.1 (Manual approval: OLM installs each step once its InstallPlan is approved; an InstallPlan to csm-storage.v1.9.0 waits)',
      'upgrade step 1 of 1 for Subscription ops/datagrid: replaces datagrid-operator.v2.4.1 (Manual approval: Subscription ops/csm is Manual, which makes every InstallPlan of the namespace Manual: OLM installs each step once its InstallPlan is approved)',
    ]);
  });

  it('says why it stages nothing for a CatalogSource without an image, a missing one, or a package the catalog lacks', () => {
    const plan = planLiveOperators(input(olm({
      catalogSources: [{ namespace: 'openshift-marketplace', name: 'community', image: INDEX }, { namespace: 'openshift-marketplace', name: 'grpc', sourceType: 'grpc', address: 'catalog.example.com:50051' }],
      subscriptions: [sub('a', 'by-address', 'datagrid', 'datagrid-operator.v2.4.0', { source: 'grpc' }), sub('b', 'gone', 'datagrid', 'x', { source: 'nowhere' }), sub('c', 'unknown', 'no-such-package', 'x')],
    })));
    expect(plan.chosen).toEqual([]);
    expect(plan.warnings).toEqual([
      'Subscription a/by-address: CatalogSource openshift-marketplace/grpc serves the grpc address catalog.example.com:50051, no image; prestage reads catalogs from images, so its upgrade is not staged',
      'Subscription b/gone names CatalogSource openshift-marketplace/nowhere, which the cluster does not have: OLM resolves nothing for it, so nothing of it is staged',
      `Subscription c/unknown: catalog ${INDEX} has no package no-such-package; OLM resolves nothing for it, so nothing of it is staged`,
    ]);
    expect(liveCatalogImages(olm({ subscriptions: [sub('a', 'by-address', 'datagrid', 'x', { source: 'grpc' }), sub('d', 'dg', 'datagrid', 'x')] }))).toEqual([INDEX]);
  });
});

describe('where the walked bundles run', () => {
  const deployed = (pods: LiveOperatorsInput['pods'], extra: Partial<LiveSubscription> = {}) => {
    const plan = planLiveOperators(input(olm({ subscriptions: [sub('dg', 'datagrid', 'datagrid', 'datagrid-operator.v2.4.1', extra)], csvs: [csv('dg', 'datagrid-operator.v2.4.1', '2.4.1')] }), { pods }));
    return placeOperatorImages(plan.chosen, []).map((i) => [i.reference, i.role]);
  };

  it("follows the nodes the current CSV's Pods run on (OPERATOR_CONDITION_NAME), its deployment images only", () => {
    const pods = [{ workload: 'dg/datagrid-controller-manager', node: 'master-0', csv: 'datagrid-operator.v2.4.1' }, { workload: 'other/x', node: 'worker-0', csv: 'datagrid-operator.v2.4.1' }];
    expect(deployed(pods)).toEqual([['quay.io/bundles/datagrid:2.4.2', 'all'], ['quay.io/datagrid/operator:2.4.2', 'control-plane'], ['quay.io/datagrid/server:1', 'worker']]);
  });

  it("applies the Subscription's spec.config nodeSelector to the CSV's deployments as OLM does", () => {
    expect(deployed([], { config: { nodeSelector: { 'node-role.kubernetes.io/master': '' } } })).toEqual([['quay.io/bundles/datagrid:2.4.2', 'all'], ['quay.io/datagrid/operator:2.4.2', 'control-plane'], ['quay.io/datagrid/server:1', 'worker']]);
    const plan = planLiveOperators(input(olm({ subscriptions: [sub('csm', 'csm', 'csm-storage', 'csm-storage.v1.8.1', { config: { tolerations: [{ key: 'node-role.kubernetes.io/master', operator: 'Exists', effect: 'NoSchedule' }] } })], csvs: [csv('csm', 'csm-storage.v1.8.1', '1.8.1')] })));
    const operator = placeOperatorImages(plan.chosen, []).find((i) => i.reference === 'quay.io/csm/storage-operator:v1')!;
    expect(operator.role).toBe('all');
    expect(operator.evidence[0]).toMatch(/: deployment csm-storage-controller-manager tolerates the control-plane taint and selects no nodes: any node \(Subscription csm\/csm's spec\.config applied, as OLM does\)$/);
  });
});

describe('olm.maxOpenShiftVersion of the installed CSVs', () => {
  const csm = (target: string, csvs: LiveCsv[], max?: Partial<Record<string, string>>) => planLiveOperators(input(olm({ subscriptions: [sub('csm', 'csm', 'csm-storage', 'csm-storage.v1.8.0')], csvs }), {
    targetRelease: target,
    ...(max ? { catalogs: new Map([[INDEX, catalogOf(INDEX, config(max))]]) } : {}),
  }));
  const capped = csv('csm', 'csm-storage.v1.8.0', '1.8.0', { maxOpenShiftVersion: '"4.16"' });

  it('a CSV capped at 4.16 blocks 4.17, and the first bundle on its walk that allows 4.17 lifts it', () => {
    const plan = csm('4.17.0', [capped]);
    expect(names(plan)).toEqual(['csm-storage.v1.8.1', 'csm-storage.v1.9.0']);
    expect(plan.blocked).toEqual([{ csv: 'csm/csm-storage.v1.8.0', reason: 'maximum supported OCP version for csm/csm-storage.v1.8.0 is 4.16', subscription: 'csm/csm', liftedBy: 'csm-storage.v1.8.1' }]);
    expect(plan.warnings).toEqual(['OLM holds back the update to 4.17.0 (ClusterOperator operator-lifecycle-manager Upgradeable=False, IncompatibleOperatorsInstalled): maximum supported OCP version for csm/csm-storage.v1.8.0 is 4.16; csm-storage.v1.8.1, on the upgrade walk of Subscription csm/csm, allows 4.17.0: let OLM upgrade the operator before the cluster']);
  });

  it('blocks no z-stream update', () => {
    expect(csm('4.16.3', [capped]).blocked).toEqual([]);
  });

  it('names the Subscription of a capped CSV already at the head of its channel, with nothing to lift the block', () => {
    const plan = planLiveOperators(input(olm({ subscriptions: [sub('csm', 'csm', 'csm-storage', 'csm-storage.v1.9.0')], csvs: [csv('csm', 'csm-storage.v1.9.0', '1.9.0', { maxOpenShiftVersion: '"4.16"' })] }), { targetRelease: '4.17.0' }));
    expect(plan.chosen).toEqual([]);
    expect(plan.blocked).toEqual([{ csv: 'csm/csm-storage.v1.9.0', reason: 'maximum supported OCP version for csm/csm-storage.v1.9.0 is 4.16', subscription: 'csm/csm', liftedBy: null }]);
  });

  it('says when no bundle on the walk lifts the block, and counts an unreadable properties annotation as OLM does', () => {
    const plan = csm('4.17.0', [capped, csv('other', 'manual.v1', '1.0.0', { propertiesError: 'defining more than one "olm.maxOpenShiftVersion" property is not allowed' })], { '1.8.0': '4.16', '1.8.1': '4.16', '1.9.0': '"4.16"' });
    expect(plan.blocked).toEqual([
      { csv: 'other/manual.v1', reason: 'other/manual.v1 has invalid olm.maxOpenShiftVersion properties: defining more than one "olm.maxOpenShiftVersion" property is not allowed', liftedBy: null },
      { csv: 'csm/csm-storage.v1.8.0', reason: 'maximum supported OCP version for csm/csm-storage.v1.8.0 is 4.16', subscription: 'csm/csm', liftedBy: null },
    ]);
    expect(plan.warnings[1]).toMatch(/; no bundle on the upgrade walk of Subscription csm\/csm allows 4\.17\.0$/);
  });
});

describe('ClusterExtensions (OLM v1)', () => {
  const extension = { name: 'kv', packageName: 'kv-store', channels: [], catalogs: ['community', 'low'], installed: { name: 'kv-store.v0.9.0', version: '0.9.0' } };
  const resolved = `registry.redhat.io/redhat/community-operator-index@${digest('c')}`;
  const clusterCatalogs = [{ name: 'community', image: resolved, priority: 10 }, { name: 'low', image: 'registry.example.com/low:1', priority: -5 }, { name: 'unselected', image: 'registry.example.com/other:1', priority: 100 }];

  it('walks the highest-priority catalog it selects; no node pulls its bundle or catalog images', () => {
    const ops = olm({ catalogSources: [], extensions: [extension], clusterCatalogs });
    expect(liveCatalogImages(ops)).toEqual(['registry.example.com/low:1', resolved]);
    const plan = planLiveOperators(input(ops, { catalogs: new Map([[resolved, catalogOf(resolved)], ['registry.example.com/low:1', catalogOf('registry.example.com/low:1')]]) }));
    expect(plan.chosen.map((c) => [c.catalog, c.bundle.name, c.why])).toEqual([
      [resolved, 'kv-store.v1.0.0', 'upgrade step 1 of 2 for ClusterExtension kv: replaces kv-store.v0.9.0'],
      [resolved, 'kv-store.v1.1.0', 'upgrade step 2 of 2 for ClusterExtension kv: replaces kv-store.v1.0.0'],
    ]);
    const staged = withLiveOperators(undefined, plan)!;
    expect([...staged.offNodes]).toEqual([resolved]);
    expect(placeOperatorImages(staged.chosen, []).map((i) => i.reference)).toEqual(['quay.io/kv-store/operator:1.0.0', 'quay.io/kv-store/operator:1.1.0', 'quay.io/kv-store/server:1']);
  });
});

describe('withLiveOperators', () => {
  it("adds the live cluster's bundles to those asked for, each catalog once, packages per catalog", () => {
    const catalog = catalogOf(INDEX);
    const asked = { catalogs: [catalog], packagesOf: new Map([[INDEX, ['kv-store']]]), chosen: [{ catalog: INDEX, bundle: config().bundles.at(-1)!, why: 'head of channel alpha' }] };
    const plan = planLiveOperators(input(olm({ subscriptions: [sub('dg', 'datagrid', 'datagrid', 'datagrid-operator.v2.4.1')], csvs: [csv('dg', 'datagrid-operator.v2.4.1', '2.4.1')] })));
    const staged = withLiveOperators(asked, plan)!;
    expect(staged.catalogs).toEqual([catalog]);
    expect(staged.packagesOf).toEqual(new Map([[INDEX, ['datagrid', 'kv-store']]]));
    expect(names(staged)).toEqual(['kv-store.v1.1.0', 'datagrid-operator.v2.4.2']);
    expect(withLiveOperators(undefined, planLiveOperators(input(olm({}))))).toBeUndefined();
  });
});

describe('the dependencies OLM installs beside a live walk', () => {
  const app = bundle('app-operator', 'app-operator.v3.0.0', '3.0.0', { requiresPackages: [{ packageName: 'kv-store', versionRange: '>=1.0.0 <2.0.0' }] });
  const withApp = (): DeclarativeConfig => {
    const base = config();
    return { ...base, packages: [...base.packages, { name: 'app-operator', defaultChannel: 'stable' }], channels: [...base.channels, { name: 'stable', package: 'app-operator', entries: [{ name: app.name, skips: [] }] }], bundles: [...base.bundles, app] };
  };
  const catalogs = () => new Map([[INDEX, catalogOf(INDEX, withApp())]]);

  it('adds what a first install requires, as OLM does (its catalog operator: test/olm-resolves.test.ts)', () => {
    const plan = planLiveOperators(input(olm({ subscriptions: [sub('app', 'app', 'app-operator', undefined)] }), { catalogs: catalogs() }));
    expect(plan.chosen.map((c) => [c.bundle.name, c.why])).toEqual([
      ['app-operator.v3.0.0', 'install for Subscription app/app: nothing installed yet, so OLM installs app-operator.v3.0.0 first'],
      ['kv-store.v1.1.0', 'dependency of app-operator.v3.0.0: package kv-store >=1.0.0 <2.0.0'],
    ]);
  });

  it('adds nothing a bundle the cluster runs already satisfies', () => {
    const operators = olm({ subscriptions: [sub('app', 'app', 'app-operator', undefined), sub('kv', 'kv', 'kv-store', 'kv-store.v1.0.0', { channel: 'alpha' })], csvs: [csv('kv', 'kv-store.v1.0.0', '1.0.0')] });
    const plan = planLiveOperators(input(operators, { catalogs: catalogs() }));
    // kv-store walks to 1.1.0 on its own; app-operator's requirement adds no second provider.
    expect(names(plan)).toEqual(['app-operator.v3.0.0', 'kv-store.v1.1.0']);
    expect(plan.chosen.find((c) => c.bundle.name === 'kv-store.v1.1.0')!.why).toMatch(/^upgrade step 1 of 1 for Subscription kv\/kv/);
  });
});
