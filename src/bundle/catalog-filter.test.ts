import { describe, expect, it } from 'vitest';
import { filterCatalog } from './catalog-filter.js';
import type { CatalogDoc } from './catalog-tree.js';

const bundle = (pkg: string, version: string) => ({
  schema: 'olm.bundle', name: `${pkg}.v${version}`, package: pkg, image: `quay.io/${pkg}/bundle:v${version}`,
  properties: [{ type: 'olm.package', value: { packageName: pkg, version } }],
});
/** As a catalog file holds them: JSON documents with their own text. */
const asFile = (docs: readonly object[]): CatalogDoc[] => docs.map((doc) => ({ doc: doc as CatalogDoc['doc'], raw: JSON.stringify(doc, null, 2) }));

const tree = new Map<string, CatalogDoc[]>([
  ['etcd/catalog.json', asFile([
    { schema: 'olm.package', name: 'etcd', defaultChannel: 'stable' },
    { schema: 'olm.channel', name: 'stable', package: 'etcd', entries: [{ name: 'etcd.v1.0.0' }, { name: 'etcd.v1.1.0', replaces: 'etcd.v1.0.0' }, { name: 'etcd.v1.2.0', replaces: 'etcd.v1.1.0' }] },
    { schema: 'olm.channel', name: 'fast', package: 'etcd', entries: [{ name: 'etcd.v1.2.0' }] },
    bundle('etcd', '1.0.0'), bundle('etcd', '1.1.0'), bundle('etcd', '1.2.0'),
    { schema: 'olm.deprecations', package: 'etcd', entries: [
      { reference: { schema: 'olm.bundle', name: 'etcd.v1.0.0' }, message: 'old' },
      { reference: { schema: 'olm.channel', name: 'fast' }, message: 'fast is gone' },
      { reference: { schema: 'olm.bundle', name: 'etcd.v1.1.0' }, message: 'use 1.2' },
    ] },
  ])],
  ['vault/catalog.json', asFile([
    { schema: 'olm.package', name: 'vault', defaultChannel: 'beta' },
    { schema: 'olm.channel', name: 'beta', package: 'vault', entries: [{ name: 'vault.v2.0.0' }] },
    { schema: 'olm.channel', name: 'stable', package: 'vault', entries: [{ name: 'vault.v1.0.0' }] },
    bundle('vault', '1.0.0'), bundle('vault', '2.0.0'),
  ])],
]);

const files = (out: ReturnType<typeof filterCatalog>, pkg: string) => out.files.get(`${pkg}/catalog.json`)!.split(/\n(?=\{)/).map((t) => JSON.parse(t) as Record<string, unknown>);

describe('the filtered catalog', () => {
  it('keeps the selected channel with its kept entries, the kept bundles as written, and their deprecations', () => {
    const warnings: string[] = [];
    const out = filterCatalog(tree, new Map([['etcd', new Set(['etcd.v1.1.0', 'etcd.v1.2.0'])]]), { catalog: 'c', full: false, packages: [{ name: 'etcd', channels: [{ name: 'stable', minVersion: '1.1.0' }] }] }, 'catalog c', warnings);
    expect(out.packages).toEqual(['etcd']);
    expect(out.bundles).toEqual(['etcd.v1.1.0', 'etcd.v1.2.0']);
    const docs = files(out, 'etcd');
    expect(docs.map((d) => [d.schema, d.name ?? ''])).toEqual([['olm.package', 'etcd'], ['olm.channel', 'stable'], ['olm.bundle', 'etcd.v1.1.0'], ['olm.bundle', 'etcd.v1.2.0'], ['olm.deprecations', '']]);
    expect(docs[1]!.entries).toEqual([{ name: 'etcd.v1.1.0', replaces: 'etcd.v1.0.0' }, { name: 'etcd.v1.2.0', replaces: 'etcd.v1.1.0' }]);
    expect(docs[4]!.entries).toEqual([{ reference: { schema: 'olm.bundle', name: 'etcd.v1.1.0' }, message: 'use 1.2' }]);
    // An unchanged document is the catalog's own text.
    expect(out.files.get('etcd/catalog.json')).toContain(JSON.stringify(bundle('etcd', '1.2.0'), null, 2));
    expect(warnings).toEqual([]);
  });

  it('keeps a dependency\'s channels that hold it, and moves a default channel that holds nothing kept', () => {
    const warnings: string[] = [];
    const out = filterCatalog(tree, new Map([['etcd', new Set(['etcd.v1.2.0'])], ['vault', new Set(['vault.v1.0.0'])]]), { catalog: 'c', full: false, packages: [{ name: 'etcd', defaultChannel: 'fast', channels: [{ name: 'fast' }] }] }, 'catalog c', warnings);
    const etcd = files(out, 'etcd');
    expect(etcd[0]).toEqual({ schema: 'olm.package', name: 'etcd', defaultChannel: 'fast' });
    expect(etcd.filter((d) => d.schema === 'olm.channel').map((d) => d.name)).toEqual(['fast']);
    const vault = files(out, 'vault');
    expect(vault[0]).toEqual({ schema: 'olm.package', name: 'vault', defaultChannel: 'stable' });
    expect(vault.filter((d) => d.schema === 'olm.channel').map((d) => d.name)).toEqual(['stable']);
    expect(warnings).toEqual(['catalog c: package vault: its default channel beta holds no bundle the plan stages; the filtered catalog defaults to stable']);
  });

  it('without a selection (a plan file) keeps every channel that holds a kept bundle', () => {
    const out = filterCatalog(tree, new Map([['etcd', new Set(['etcd.v1.2.0'])]]), undefined, 'catalog c', []);
    expect(files(out, 'etcd').filter((d) => d.schema === 'olm.channel').map((d) => [d.name, (d.entries as Array<{ name: string }>).map((e) => e.name)])).toEqual([['stable', ['etcd.v1.2.0']], ['fast', ['etcd.v1.2.0']]]);
  });

  it('refuses a plan that stages a bundle this catalog does not hold', () => {
    expect(() => filterCatalog(tree, new Map([['etcd', new Set(['etcd.v9.0.0'])]]), undefined, 'catalog c', [])).toThrow('catalog c: package etcd has no channel that lists bundle etcd.v9.0.0; the plan does not match this catalog');
  });
});
