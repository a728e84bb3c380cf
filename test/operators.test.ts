/**
 * Operators beside the release, end to end against the real Debian docker-registry: the fixture
 * catalog image (file-based, opm's layout) read over the registry API, selected as oc-mirror v2
 * selects (flags and an ImageSetConfiguration), dependencies resolved as OLM resolves them, tags
 * resolved to digests, and the images placed in sets per package; hostile catalogs refused in one
 * line. Checked against the fixture's truth, never against the planner's own rules.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildHostileCatalogs, HOSTILE_CATALOG_REPOSITORY } from '../fixtures/catalog-hostile.js';
import { pushFixture } from '../fixtures/push.js';
import { RegistryContent } from '../fixtures/repositories.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { runCli } from './support/cli.js';
import { removeTempDirs, tempDir } from './support/temp-files.js';
import type { Plan } from '../src/plan/types.js';

const truth = inject('fixtureTruth');
const catalog = inject('catalogTruth');
const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
let registry: RegistryHandle;
let hostile: RegistryHandle;
let mirror: string[];

beforeAll(async () => {
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  hostile = await startRegistry();
  const content = new RegistryContent();
  buildHostileCatalogs(content);
  await pushFixture(hostile.url, { blobs: content.blobs, repositories: content.toRepositories() });
  mirror = [
    '--mirror', `quay.io=${registry.host}`,
    '--mirror', `registry.redhat.io=${registry.host}/registry.redhat.io`,
    '--mirror', `hostile.example.com=${hostile.host}`,
    '--insecure-registry', registry.host,
    '--insecure-registry', hostile.host,
  ];
});
afterAll(async () => {
  removeTempDirs();
  await registry?.stop();
  await hostile?.stop();
});

async function plan(args: readonly string[]): Promise<Plan> {
  const r = await runCli(['plan', RELEASE, ...mirror, '-o', 'json', ...args]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as Plan;
}

const bundleTruth = (name: string) => {
  const found = catalog.bundles.find((b) => b.name === name);
  if (!found) throw new Error(`no fixture bundle ${name}`);
  return found;
};
const pullSpecOf = (ref: string, digest: string) => `${ref.replace(/[:@][^/]*$/, '')}@${digest}`;

describe('plan --catalog --package', () => {
  let planned: Plan;
  beforeAll(async () => {
    planned = await plan(['--catalog', catalog.reference, '--package', 'datagrid/stable@2.4.0..2.4.2', '--package', 'app-operator']);
  });

  it('stages the selected range of the channel and the dependency OLM would install', () => {
    const names = planned.operators!.bundles.map((b) => b.name);
    expect(names).toEqual(['app-operator.v3.0.0', 'datagrid-operator.v2.4.0', 'datagrid-operator.v2.4.1', 'datagrid-operator.v2.4.2', 'kv-store.v1.1.0']);
    const dependency = planned.operators!.bundles.find((b) => b.package === 'kv-store')!;
    expect(dependency.why).toMatch(/^dependency of app-operator\.v3\.0\.0/);
    expect(planned.operators!.catalogs).toEqual([{ reference: catalog.reference, pullSpec: `${catalog.reference.replace(/:[^/]*$/, '')}@${catalog.digest}`, digest: catalog.digest, packages: ['app-operator', 'datagrid', 'kv-store'] }]);
  });

  it('resolves every image a chosen bundle names by tag to the digest the registry serves', () => {
    for (const name of ['datagrid-operator.v2.4.0', 'datagrid-operator.v2.4.1', 'datagrid-operator.v2.4.2', 'app-operator.v3.0.0', 'kv-store.v1.1.0']) {
      for (const image of bundleTruth(name).images) {
        const found = planned.images.find((i) => i.pullSpec === pullSpecOf(image.reference, image.digest));
        expect(found, `${name}: ${image.reference}`).toBeDefined();
        expect(found!.operator!.bundles).toContain(name);
      }
    }
    const unselected = catalog.bundles.filter((b) => b.package === 'csm-storage' || b.package === 'unused-op' || b.name === 'datagrid-operator.v2.3.4');
    for (const b of unselected) expect(planned.images.some((i) => i.pullSpec.endsWith(b.images[0]!.digest))).toBe(false);
  });

  it('puts bundle and catalog images on every node and operator images on workers, in sets per package', () => {
    const bundleImage = planned.images.find((i) => i.pullSpec === pullSpecOf(bundleTruth('datagrid-operator.v2.4.2').image, bundleTruth('datagrid-operator.v2.4.2').images[0]!.digest))!;
    expect(bundleImage.role).toBe('all');
    const operatorImage = planned.images.find((i) => i.pullSpec === pullSpecOf(bundleTruth('datagrid-operator.v2.4.2').images[1]!.reference, bundleTruth('datagrid-operator.v2.4.2').images[1]!.digest))!;
    expect(operatorImage.role).toBe('worker');
    // The catalog carries only olm.csv.metadata: the deployment is read from the bundle image's CSV.
    expect(operatorImage.evidence).toEqual([expect.stringMatching(/deployment datagrid-controller-manager selects no nodes and does not tolerate the control-plane taint: workers \(the CSV in its bundle image\)$/)]);
    expect(planned.images.find((i) => i.source === 'catalog')!.role).toBe('all');
    const set = planned.sets.find((s) => s.name === 'prestage-4.16.3-op-datagrid-worker')!;
    expect(set.labels).toEqual({ 'machineconfiguration.openshift.io/role': 'worker', 'prestage.dev/operator-package': 'datagrid' });
    expect(set.operator).toEqual({ package: 'datagrid', bundles: ['datagrid-operator.v2.4.0', 'datagrid-operator.v2.4.1', 'datagrid-operator.v2.4.2'], head: 'datagrid-operator.v2.4.2' });
    expect(set.images).toContain(operatorImage.pullSpec);
    expect(planned.sets.find((s) => s.name === 'prestage-4.16.3-op-datagrid-control-plane')!.images).not.toContain(operatorImage.pullSpec);
    expect(planned.sets.map((s) => s.name)).toEqual(expect.arrayContaining(['prestage-4.16.3-control-plane', 'prestage-4.16.3-worker', 'prestage-4.16.3-op-kv-store-worker', 'prestage-4.16.3-op-app-operator-worker']));
  });

  it('counts a layer the operators share with the release once per node', () => {
    const worker = planned.perNode!.find((t) => t.role === 'worker')!;
    const workerSets = planned.sets.filter((s) => s.role === 'worker');
    expect(worker.sets).toEqual(workerSets.map((s) => s.name));
    const shared = truth.components.flatMap((c) => c.layers).find((l) => l.digest === catalog.sharedLayer)!;
    const holding = workerSets.filter((s) => s.images.some((p) => planned.images.find((i) => i.pullSpec === p)!.layers.some((l) => l.digest === catalog.sharedLayer)));
    expect(holding.length).toBeGreaterThan(1);
    const summed = workerSets.reduce((n, s) => n + s.diskBytes, 0);
    expect(summed - worker.diskBytes).toBeGreaterThanOrEqual((holding.length - 1) * shared.uncompressedSize);
  });

  it('renders operator sets with their package label and bundles annotation', async () => {
    const r = await runCli(['plan', RELEASE, ...mirror, '-o', 'yaml', '--catalog', catalog.reference, '--package', 'kv-store']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('name: prestage-4.16.3-op-kv-store-worker');
    expect(r.stdout).toContain('prestage.dev/operator-package: kv-store');
    expect(r.stdout).toContain('prestage.dev/operator-bundles: kv-store.v1.1.0');
  });
});

describe('plan --config (an oc-mirror v2 ImageSetConfiguration)', () => {
  it('stages the channel range, places a control-plane operator by its CSV, and adds additionalImages', async () => {
    const dir = await tempDir('prestage-isc-');
    const file = join(dir, 'isc.yaml');
    const extra = truth.components.find((c) => c.name === 'tools')!;
    writeFileSync(file, [
      'apiVersion: mirror.openshift.io/v2alpha1',
      'kind: ImageSetConfiguration',
      'mirror:',
      '  operators:',
      `  - catalog: ${catalog.reference}`,
      '    packages:',
      '    - name: csm-storage',
      '      channels:',
      '      - name: stable',
      '        minVersion: 1.8.1',
      '  additionalImages:',
      `  - name: ${extra.pullSpec}`,
      '',
    ].join('\n'));
    const planned = await plan(['--config', file]);
    expect(planned.operators!.bundles.map((b) => b.name)).toEqual(['csm-storage.v1.8.1', 'csm-storage.v1.9.0']);
    const head = bundleTruth('csm-storage.v1.9.0');
    const operator = planned.images.find((i) => i.pullSpec === head.images[1]!.reference)!;
    expect(operator.role).toBe('control-plane');
    expect(operator.evidence.join(' ')).toContain('selects control-plane nodes');
    const operand = planned.images.find((i) => i.pullSpec === head.images[2]!.reference)!;
    expect(operand.role).toBe('worker');
    expect(planned.images.find((i) => i.digest === extra.digest)).toBeDefined();
  });
});

describe('catalog images as the registry holds them', () => {
  it('reads an oc-mirror rebuilt catalog through its whiteout: only the packages above it', async () => {
    const planned = await plan(['--catalog', catalog.rebuiltReference]);
    expect([...new Set(planned.operators!.bundles.map((b) => b.package))]).toEqual(['datagrid']);
    // No packages listed: the head of every channel.
    expect(planned.operators!.bundles.map((b) => b.name)).toEqual(['datagrid-operator.v2.3.4', 'datagrid-operator.v2.4.2']);
  });

  it('refuses a SQLite catalog in one line that says so', async () => {
    const r = await runCli(['plan', RELEASE, ...mirror, '--catalog', catalog.sqliteReference]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^prestage: error: catalog .* is a SQLite \(pre-FBC\) catalog .*opm migrate\n$/);
  });

  it('refuses a package the catalog does not hold, naming both', async () => {
    const r = await runCli(['plan', RELEASE, ...mirror, '--catalog', catalog.reference, '--package', 'no-such-operator']);
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n').length).toBe(2);
    expect(r.stderr).toContain('no-such-operator');
    expect(r.stderr).toContain(catalog.reference);
  });
});

describe('hostile catalogs: one line, exit 2, nothing planned', () => {
  const cases: ReadonlyArray<[string, RegExp]> = [
    ['traversal', /climbs out of the image/],
    ['label-outside', /is not a directory inside the image/],
    ['label-relative', /is not a directory inside the image/],
    ['many-related', /relatedImages has 10000 items, over the limit of 1000/],
    ['deep-nesting', /nests deeper than 64 levels/],
    ['huge-document', /over the 33554432-byte limit for one catalog document/],
    ['no-schema', /has no schema field/],
    ['yaml-laughs', /expands to over 5,000,000 values/],
    ['empty-configs', /holds no catalog files/],
  ];
  for (const [tag, message] of cases) {
    it(`refuses ${tag}`, async () => {
      const r = await runCli(['plan', RELEASE, ...mirror, '--catalog', `hostile.example.com/${HOSTILE_CATALOG_REPOSITORY}:${tag}`]);
      expect(r.stdout).toBe('');
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    });
  }
});
