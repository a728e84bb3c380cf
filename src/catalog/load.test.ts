import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { CATALOG_LIMITS, loadCatalogFile } from './load.js';

const where = 'catalog test: /configs/etcd/catalog.json';
const pkg = { schema: 'olm.package', name: 'etcd', defaultChannel: 'alpha' };
const channel = { schema: 'olm.channel', name: 'alpha', package: 'etcd', entries: [{ name: 'etcd.v0.9.2' }, { name: 'etcd.v0.9.4', replaces: 'etcd.v0.9.2', skipRange: '<0.9.4', skips: ['etcd.v0.9.3'] }] };
const bundle = (extra: Record<string, unknown> = {}, properties: unknown[] = []) => ({
  schema: 'olm.bundle',
  name: 'etcd.v0.9.4',
  package: 'etcd',
  image: 'quay.io/operatorhubio/etcd:v0.9.4',
  properties: [{ type: 'olm.package', value: { packageName: 'etcd', version: '0.9.4' } }, ...properties],
  relatedImages: [{ name: '', image: 'quay.io/operatorhubio/etcd:v0.9.4' }, { name: 'etcd', image: 'quay.io/coreos/etcd-operator@sha256:66a37fd61a06a43969854ee6d3e21087a98b93838e284a6086b13917f96b0d9b' }],
  ...extra,
});
const json = (...docs: unknown[]) => docs.map((d) => JSON.stringify(d, null, 2)).join('\n');
const refusal = (text: string, limits = CATALOG_LIMITS) => {
  try {
    loadCatalogFile(text, where, limits);
  } catch (error) {
    expect(error).toBeInstanceOf(BadInputError);
    return (error as Error).message;
  }
  throw new Error('not refused');
};

describe('loadCatalogFile', () => {
  it('reads a JSON stream of package, channel and bundle documents as opm writes them', () => {
    const file = loadCatalogFile(json(pkg, channel, bundle()), where);
    expect(file.documents).toBe(3);
    expect(file.packages).toEqual([{ name: 'etcd', defaultChannel: 'alpha' }]);
    expect(file.channels[0]!.entries[1]).toEqual({ name: 'etcd.v0.9.4', replaces: 'etcd.v0.9.2', skips: ['etcd.v0.9.3'], skipRange: '<0.9.4' });
    expect(file.bundles[0]).toMatchObject({ name: 'etcd.v0.9.4', package: 'etcd', version: '0.9.4', image: 'quay.io/operatorhubio/etcd:v0.9.4', provides: [], constraints: [] });
    expect(file.bundles[0]!.relatedImages).toHaveLength(2);
    expect(file.bundles[0]!.deployments).toBeUndefined();
  });

  it('reads YAML documents, and skips schemas it does not stage (opm keeps them opaque)', () => {
    const file = loadCatalogFile('---\nschema: olm.package\nname: etcd\ndefaultChannel: alpha\n---\nschema: olm.template.basic\nentries: []\n', where);
    expect(file.packages).toEqual([{ name: 'etcd', defaultChannel: 'alpha' }]);
    expect(file.documents).toBe(2);
  });

  it('keeps what resolution needs of the properties and drops the rest', () => {
    const file = loadCatalogFile(json(bundle({}, [
      { type: 'olm.gvk', value: { group: 'etcd.database.coreos.com', kind: 'EtcdCluster', version: 'v1beta2' } },
      { type: 'olm.gvk.required', value: { group: 'kv.example.com', kind: 'Store', version: 'v1' } },
      { type: 'olm.package.required', value: { packageName: 'kv', versionRange: '>=1.0.0 <2.0.0' } },
      { type: 'olm.maxOpenShiftVersion', value: '4.16' },
      { type: 'olm.constraint', value: { cel: { rule: 'true' } } },
      { type: 'olm.csv.metadata', value: { annotations: { 'alm-examples': '[]' } } },
    ])), where);
    expect(file.bundles[0]).toMatchObject({
      provides: [{ group: 'etcd.database.coreos.com', version: 'v1beta2', kind: 'EtcdCluster' }],
      requiresApis: [{ group: 'kv.example.com', version: 'v1', kind: 'Store' }],
      requiresPackages: [{ packageName: 'kv', versionRange: '>=1.0.0 <2.0.0' }],
      maxOpenShiftVersion: '4.16',
      constraints: ['olm.constraint'],
    });
  });

  it('keeps two maxOpenShiftVersion values as one OLM cannot read (it then blocks the update)', () => {
    const file = loadCatalogFile(json(bundle({}, [{ type: 'olm.maxOpenShiftVersion', value: '4.16' }, { type: 'olm.maxOpenShiftVersion', value: 4.17 }])), where);
    expect(file.bundles[0]!.maxOpenShiftVersion).toBe('4.16 and 4.17 (two olm.maxOpenShiftVersion properties)');
  });

  it("reads where an inlined CSV's deployments run and what they run", () => {
    const csv = {
      kind: 'ClusterServiceVersion',
      spec: { install: { spec: { deployments: [{ name: 'etcd-operator', spec: { template: { spec: {
        nodeSelector: { 'node-role.kubernetes.io/master': '' },
        tolerations: [{ key: 'node-role.kubernetes.io/master', operator: 'Exists', effect: 'NoSchedule', tolerationSeconds: 5 }],
        initContainers: [{ image: 'quay.io/coreos/init:1' }],
        containers: [{ image: 'quay.io/coreos/etcd-operator:v0.9.4' }, { name: 'no-image' }],
      } } } }] } } },
    };
    const crd = { kind: 'CustomResourceDefinition', spec: {} };
    const objects = [crd, csv].map((o) => ({ type: 'olm.bundle.object', value: { data: Buffer.from(JSON.stringify(o)).toString('base64') } }));
    const file = loadCatalogFile(json(bundle({}, objects)), where);
    expect(file.bundles[0]!.deployments).toEqual([{
      name: 'etcd-operator',
      nodeSelector: { 'node-role.kubernetes.io/master': '' },
      tolerations: [{ key: 'node-role.kubernetes.io/master', operator: 'Exists', effect: 'NoSchedule' }],
      images: ['quay.io/coreos/etcd-operator:v0.9.4', 'quay.io/coreos/init:1'],
    }]);
  });

  it('refuses a document without a schema, as opm does', () => {
    expect(refusal(json(pkg, { name: 'orphan' }))).toBe(`${where} document 2 has no schema field; opm refuses such a catalog, fix or remove the document`);
  });

  it('refuses a bundle without exactly one olm.package property', () => {
    expect(refusal(json({ ...bundle(), properties: [] }))).toMatch(/no olm\.package property/);
    expect(refusal(json(bundle({}, [{ type: 'olm.package', value: { packageName: 'etcd', version: '1.0.0' } }])))).toMatch(/more than one olm\.package property/);
    expect(refusal(json(bundle({ properties: [{ type: 'olm.package', value: { packageName: 'other', version: '1.0.0' } }] })))).toMatch(/names package other, not etcd/);
  });

  it('refuses nesting past the bound before parsing the document', () => {
    const deep = JSON.stringify(pkg).replace(/\}$/, `,"x":${'['.repeat(65)}${']'.repeat(65)}}`);
    expect(refusal(deep)).toBe(`${where} document 1 nests deeper than 64 levels; not a sane catalog`);
  });

  it('refuses a document over the size bound, and more documents than the bound', () => {
    const limits = { ...CATALOG_LIMITS, maxDocumentBytes: 200, maxDocuments: 2 };
    expect(refusal(json(bundle()), limits)).toMatch(/over the 200-byte limit for one catalog document$/);
    expect(refusal(json(pkg, pkg, pkg), { ...limits, maxDocumentBytes: 1000 })).toMatch(/over 2 documents/);
  });

  it('refuses a bundle naming more related images than the bound', () => {
    const many = bundle({ relatedImages: Array.from({ length: 1001 }, (_, i) => ({ name: '', image: `quay.io/x/y:${i}` })) });
    expect(refusal(json(many))).toMatch(/relatedImages has 1001 items, over the limit of 1000/);
  });

  it('refuses JSON that is broken or ends inside a document', () => {
    expect(refusal(`${JSON.stringify(pkg)}\n{"schema":"olm.package","name":`)).toMatch(/ends inside document 2/);
    expect(refusal('{"schema":"olm.package","name":"a"} 42')).toMatch(/a value outside an object/);
    expect(refusal('{"schema":"olm.package",}')).toMatch(/document 1 is not valid JSON/);
  });

  it('refuses YAML aliases that expand past the bound (billion laughs)', () => {
    const lines = ['schema: olm.package', 'name: lol', 'a0: &a0 [1,1,1,1,1,1,1,1,1,1]'];
    for (let i = 1; i <= 8; i++) lines.push(`a${i}: &a${i} [${Array.from({ length: 10 }, () => `*a${i - 1}`).join(',')}]`);
    expect(refusal(lines.join('\n'))).toMatch(/expands to over 5,000,000 values/);
  });

  it('refuses a package name that is no path segment (a rebuilt catalog writes <package>/catalog.json)', () => {
    for (const name of ['..', '../../etc', 'a/b', '']) expect(refusal(json({ ...pkg, name }))).toMatch(/is not a name \(a path segment without \/ or \.\.\); not a sane catalog$/);
  });

  it('refuses fields of the wrong type, naming the field', () => {
    expect(refusal(json({ ...channel, entries: 'etcd.v0.9.4' }))).toMatch(/field entries is not a list/);
    expect(refusal(json({ ...pkg, name: 7 }))).toMatch(/olm\.package field name is not a string/);
  });
});
