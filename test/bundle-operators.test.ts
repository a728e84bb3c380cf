/**
 * Operators across the air gap, on the real thing: `bundle create` with a catalog selection
 * reads the fixture release and catalog from a real docker-registry, `bundle push` loads the
 * bundle into a second, empty one, and the catalog it rebuilt is checked by operator-registry's
 * own opm (built by scripts/build-testbed.sh from the Go module): `opm validate` and `opm serve`
 * on its filesystem extracted from the mirror as a container runtime applies layers (whiteouts
 * first), `opm render` of the image straight from the mirror. The fixture's truth, never the
 * planner's rules, says what must be there.
 */
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import yaml from 'js-yaml';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { BundleMetadata } from '../src/bundle/layout.js';
import { KubeClient } from '../src/kube/client.js';
import { testbedBinaries, type TestbedBinaries } from './cluster/binaries.js';
import { startControlPlane } from './cluster/control-plane.js';
import { freePort, startRegistry, type RegistryHandle } from './harness/index.js';
import { runCli, type CliResult } from './support/cli.js';
import { extractImage, grpcCall, imageConfig, jsonStream, manifestStatus, startOpmServe, tagDigest } from './support/image-checks.js';
import { removeTempDirs, tempDir } from './support/temp-files.js';

const run = promisify(execFile);
const catalog = inject('catalogTruth');
const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
const SELECTED = ['datagrid-operator.v2.4.1', 'datagrid-operator.v2.4.2'];
const CATALOG_REPOSITORY = 'redhat/community-operator-index';

let source: RegistryHandle;
let site: RegistryHandle;
let opm: string;
let work: string;
let from: string[];
let bundle: string;
let created: CliResult;
let pushed: CliResult;
let out: string;
/** The rebuilt catalog's filesystem, extracted from the mirror. */
let root: string;
let record: NonNullable<BundleMetadata['operators']>['catalogs'][number];

beforeAll(async () => {
  opm = ((await testbedBinaries()) as TestbedBinaries & { readonly opm: string }).opm;
  source = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  site = await startRegistry();
  work = await tempDir('prestage-bundle-operators-');
  from = ['--mirror', `quay.io=${source.host}`, '--mirror', `registry.redhat.io=${source.host}/registry.redhat.io`, '--insecure-registry', source.host, '--allow-unsigned', '--remove-signatures'];
  bundle = join(work, 'bundle');
  out = join(work, 'out');
  await mkdir(out);
  created = await runCli(['bundle', 'create', RELEASE, '--catalog', catalog.reference, '--package', 'datagrid/stable@2.4.1..2.4.2', '--output-dir', bundle, ...from]);
  pushed = await runCli(['bundle', 'push', bundle, site.host, '--insecure-registry', site.host, '--output-dir', out]);
  record = (JSON.parse(await readFile(join(bundle, 'prestage-bundle.json'), 'utf8')) as BundleMetadata).operators!.catalogs[0]!;
  root = join(work, 'rootfs');
  await extractImage(site, CATALOG_REPOSITORY, 'v4.16', root);
});
afterAll(async () => {
  await source?.stop();
  await site?.stop();
  removeTempDirs();
});

const bundleTruth = (name: string) => catalog.bundles.find((b) => b.name === name)!;
const repositoryOf = (reference: string) => reference.replace(/^[^/]+\//, '').replace(/[:@].*$/, '');

describe('bundle create and push with --catalog --package', () => {
  it('creates and pushes, saying what it rebuilt and what it wrote', () => {
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(new RegExp(`^catalog ${catalog.reference}: rebuilt sha256:[0-9a-f]{64} with 1 package \\(datagrid\\), 2 bundles; /configs and the stale opm cache /tmp/cache deleted below it, served as serve /configs`, 'm'));
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stdout).toContain(`catalog ${catalog.reference}: ${site.host}/${CATALOG_REPOSITORY}@${digestOf(record.image)} (${site.host}/${CATALOG_REPOSITORY}:v4.16); wrote ${join(out, 'cs-community-operator-index-v4-16.yaml')} (CatalogSource cs-community-operator-index-v4-16) and ${join(out, 'cc-community-operator-index-v4-16.yaml')} (ClusterCatalog cc-community-operator-index-v4-16)`);
    expect(record).toMatchObject({ reference: catalog.reference, rebuilt: true, configsDir: '/configs', cacheDir: '/tmp/cache', packages: ['datagrid'], bundles: SELECTED, tag: 'v4.16' });
  });

  it('rebuilds the same bytes on a rerun, which fetches nothing', async () => {
    const again = await runCli(['bundle', 'create', RELEASE, '--catalog', catalog.reference, '--package', 'datagrid/stable@2.4.1..2.4.2', '--output-dir', bundle, ...from]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/; fetched 0 B in 0 blobs in /);
    expect(again.stdout).toContain(`rebuilt ${digestOf(record.image)} with 1 package`);
  });

  it('puts every image of the selected bundles in the mirror by digest, and no other bundle\'s', async () => {
    for (const name of SELECTED) {
      for (const image of bundleTruth(name).images) expect(await manifestStatus(site, repositoryOf(image.reference), image.digest), `${name}: ${image.reference}`).toBe(200);
    }
    const left = bundleTruth('datagrid-operator.v2.4.0').images[0]!;
    expect(await manifestStatus(site, repositoryOf(left.reference), left.digest)).toBe(404);
  });

  it('puts the source catalog by digest and the rebuilt one by digest and tag', async () => {
    expect(await manifestStatus(site, CATALOG_REPOSITORY, catalog.digest)).toBe(200);
    expect(await manifestStatus(site, CATALOG_REPOSITORY, digestOf(record.image))).toBe(200);
    expect(await tagDigest(site, CATALOG_REPOSITORY, 'v4.16')).toBe(digestOf(record.image));
  });

  it('writes a CatalogSource and a ClusterCatalog naming the rebuilt catalog by digest, as oc-mirror names them', async () => {
    const mirror = `${site.host}/${CATALOG_REPOSITORY}@${digestOf(record.image)}`;
    expect(yaml.load(await readFile(join(out, 'cs-community-operator-index-v4-16.yaml'), 'utf8'))).toEqual({
      apiVersion: 'operators.coreos.com/v1alpha1',
      kind: 'CatalogSource',
      metadata: { name: 'cs-community-operator-index-v4-16', namespace: 'openshift-marketplace', labels: { 'app.kubernetes.io/managed-by': 'prestage' } },
      spec: { sourceType: 'grpc', image: mirror },
    });
    expect(yaml.load(await readFile(join(out, 'cc-community-operator-index-v4-16.yaml'), 'utf8'))).toEqual({
      apiVersion: 'olm.operatorframework.io/v1',
      kind: 'ClusterCatalog',
      metadata: { name: 'cc-community-operator-index-v4-16', labels: { 'app.kubernetes.io/managed-by': 'prestage' } },
      spec: { priority: 0, source: { type: 'Image', image: { ref: mirror } } },
    });
    const idms = await readFile(join(out, 'image-digest-mirror-set.yaml'), 'utf8');
    expect(idms).toContain(`source: registry.redhat.io/${CATALOG_REPOSITORY}`);
    expect(await readFile(join(out, 'mapping.txt'), 'utf8')).not.toContain(digestOf(record.image));
  });

  it('writes objects a real API server accepts under OLM\'s own CRDs (their schemas and CEL rules)', async () => {
    const binaries = await testbedBinaries();
    const api = await startControlPlane(join(work, 'control-plane'), binaries);
    try {
      const config = new KubeConfig();
      config.loadFromFile(api.kubeconfigPath);
      const kube = new KubeClient(config);
      for (const file of [join(binaries.olmCrds.api, 'operators.coreos.com_catalogsources.yaml'), join(binaries.olmCrds.operatorController, 'olm.operatorframework.io_clustercatalogs.yaml')]) {
        await kube.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: yaml.load(await readFile(file, 'utf8')) });
      }
      await kube.request('POST', '/api/v1/namespaces', { body: { metadata: { name: 'openshift-marketplace' } } });
      const created: Array<{ spec: unknown }> = [];
      for (const [file, path] of [['cs-community-operator-index-v4-16.yaml', '/apis/operators.coreos.com/v1alpha1/namespaces/openshift-marketplace/catalogsources'], ['cc-community-operator-index-v4-16.yaml', '/apis/olm.operatorframework.io/v1/clustercatalogs']] as const) {
        const body = yaml.load(await readFile(join(out, file), 'utf8'));
        // A CRD is served a moment after it is created.
        for (let tries = 0; ; tries++) {
          const answer = await kube.request<{ spec: unknown }>('POST', path, { body }).catch((error: Error) => error);
          if (!(answer instanceof Error)) {
            created.push(answer);
            break;
          }
          if (tries > 100 || !/404|not found/i.test(answer.message)) throw answer;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
      const mirror = `${site.host}/${CATALOG_REPOSITORY}@${digestOf(record.image)}`;
      expect(created.map((o) => o.spec)).toEqual([
        expect.objectContaining({ sourceType: 'grpc', image: mirror }),
        expect.objectContaining({ source: { type: 'Image', image: { ref: mirror } } }),
      ]);
    } finally {
      await api.stop();
    }
  });

  it('lists the catalog files under --dry-run and writes none', async () => {
    const dry = join(work, 'dry');
    await mkdir(dry);
    const r = await runCli(['bundle', 'push', bundle, site.host, '--insecure-registry', site.host, '--output-dir', dry, '--dry-run=server']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`${join(dry, 'cs-community-operator-index-v4-16.yaml')}, ${join(dry, 'cc-community-operator-index-v4-16.yaml')}`);
    expect(await readdir(dry)).toEqual([]);
  });
});

describe('the rebuilt catalog, as operator-registry\'s opm reads it', () => {
  it('holds only the filtered catalog once the runtime applies its layers', async () => {
    expect(await readdir(join(root, 'configs'))).toEqual(['datagrid']);
    expect(await readdir(join(root, 'tmp')).catch(() => [])).toEqual([]);
    const config = await imageConfig(site, CATALOG_REPOSITORY, 'v4.16');
    expect(config.config.Entrypoint).toEqual(['/bin/opm']);
    expect(config.config.Cmd).toEqual(['serve', '/configs']);
    expect(config.config.Labels['operators.operatorframework.io.index.configs.v1']).toBe('/configs');
  });

  it('passes opm validate', async () => {
    const r = await run(opm, ['validate', join(root, 'configs')]);
    expect(r.stderr).toBe('');
  });

  it('opm render of the image from the mirror lists exactly the selected bundles', async () => {
    // opm pulls with containers/image, which wants a signature policy: accept anything from the test's mirror.
    await mkdir(join(work, '.config', 'containers'), { recursive: true });
    await writeFile(join(work, '.config', 'containers', 'policy.json'), JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
    const r = await run(opm, ['render', `${site.host}/${CATALOG_REPOSITORY}@${digestOf(record.image)}`, '--use-http', '-o', 'json'], { maxBuffer: 64 * 1024 * 1024, env: { ...process.env, HOME: work } });
    const docs = jsonStream(r.stdout);
    expect(docs.filter((d) => d.schema === 'olm.bundle').map((d) => d.name).sort()).toEqual(SELECTED);
    expect(docs.filter((d) => d.schema === 'olm.package').map((d) => [d.name, d.defaultChannel])).toEqual([['datagrid', 'stable']]);
    const channels = docs.filter((d) => d.schema === 'olm.channel');
    expect(channels.map((c) => [c.name, (c.entries as Array<{ name: string }>).map((e) => e.name)])).toEqual([['stable', SELECTED]]);
  });

  it('opm serve starts without a cache directory and answers health and ListPackages over gRPC', async () => {
    const port = await freePort();
    const served = startOpmServe(opm, ['serve', join(root, 'configs'), '-p', String(port), '--pprof-addr', `127.0.0.1:${await freePort()}`, '-t', join(work, 'termination-log')]);
    try {
      await served.ready;
      expect(served.log()).toMatch(/building cache/);
      expect(await grpcCall(port, '/grpc.health.v1.Health/Check')).toEqual([Buffer.from([0x08, 0x01])]);
      const packages = await grpcCall(port, '/api.Registry/ListPackages');
      expect(packages.map((m) => m.subarray(2).toString('utf8'))).toEqual(['datagrid']);
    } finally {
      served.process.kill('SIGTERM');
    }
  });

  it('would fail with the source catalog\'s cache left in place: why the rebuild deletes it', async () => {
    const sourceRoot = join(work, 'source-rootfs');
    await extractImage(site, CATALOG_REPOSITORY, catalog.digest, sourceRoot);
    const cache = join(work, 'stale-cache');
    await run(opm, ['serve', join(sourceRoot, 'configs'), '--cache-dir', cache, '--cache-only', '--pprof-addr', `127.0.0.1:${await freePort()}`, '-t', join(work, 'termination-log')]);
    const stale = await run(opm, ['serve', join(root, 'configs'), '--cache-dir', cache, '-p', String(await freePort()), '--pprof-addr', `127.0.0.1:${await freePort()}`, '-t', join(work, 'termination-log')], { timeout: 30_000 }).then(() => '', (e: { stderr: string }) => e.stderr);
    expect(stale).toMatch(/cache requires rebuild/);
  });
});

describe('bundle create --config: an ImageSetConfiguration\'s targetCatalog, targetTag and full', () => {
  const isc = async (name: string, entry: readonly string[]): Promise<string> => {
    const file = join(work, `${name}.yaml`);
    await writeFile(file, ['apiVersion: mirror.openshift.io/v2alpha1', 'kind: ImageSetConfiguration', 'mirror:', '  operators:', `  - catalog: ${catalog.reference}`, ...entry.map((l) => `    ${l}`), ''].join('\n'));
    return file;
  };
  const createAndPush = async (name: string, config: string, prefix: string): Promise<{ stdout: string; dir: string; record: typeof record }> => {
    const dir = join(work, name);
    await mkdir(dir);
    const c = await runCli(['bundle', 'create', RELEASE, '--config', config, '--output-dir', join(dir, 'bundle'), ...from]);
    expect(c.code, c.stderr).toBe(0);
    const p = await runCli(['bundle', 'push', join(dir, 'bundle'), `${site.host}/${prefix}`, '--insecure-registry', site.host, '--output-dir', dir]);
    expect(p.code, p.stderr).toBe(0);
    return { stdout: c.stdout + p.stdout, dir, record: (JSON.parse(await readFile(join(dir, 'bundle', 'prestage-bundle.json'), 'utf8')) as BundleMetadata).operators!.catalogs[0]! };
  };

  it('carries a dependency\'s package too, and pushes the catalog to targetCatalog:targetTag', async () => {
    const { stdout, dir, record: r } = await createAndPush('isc', await isc('isc', ['targetCatalog: olm/filtered-index', 'targetTag: prestage', 'packages:', '- name: app-operator']), 'ocp');
    expect(stdout).toMatch(/rebuilt sha256:[0-9a-f]{64} with 2 packages \(app-operator, kv-store\), 2 bundles/);
    expect(await tagDigest(site, 'ocp/olm/filtered-index', 'prestage')).toBe(digestOf(r.image));
    const source = yaml.load(await readFile(join(dir, 'cs-filtered-index-prestage.yaml'), 'utf8')) as { spec: { image: string } };
    expect(source.spec.image).toBe(`${site.host}/ocp/olm/filtered-index@${digestOf(r.image)}`);
    const fs = join(dir, 'rootfs');
    await extractImage(site, 'ocp/olm/filtered-index', 'prestage', fs);
    await run(opm, ['validate', join(fs, 'configs')]);
    const docs = jsonStream((await run(opm, ['render', join(fs, 'configs'), '-o', 'json'])).stdout);
    expect(docs.filter((d) => d.schema === 'olm.channel').map((c) => [c.package, c.name, (c.entries as Array<{ name: string }>).map((e) => e.name)])).toEqual([['app-operator', 'stable', ['app-operator.v3.0.0']], ['kv-store', 'alpha', ['kv-store.v1.1.0']]]);
  });

  it('carries a full catalog whole: the CatalogSource names the source catalog by digest', async () => {
    const { stdout, dir, record: r } = await createAndPush('full', await isc('full', ['full: true']), 'full');
    expect(stdout).toContain(`catalog ${catalog.reference}: carried whole (full: true)`);
    expect(r).toMatchObject({ rebuilt: false, image: r.source, tag: 'v4.16' });
    expect(await tagDigest(site, `full/${CATALOG_REPOSITORY}`, 'v4.16')).toBe(catalog.digest);
    const cc = yaml.load(await readFile(join(dir, 'cc-community-operator-index-v4-16.yaml'), 'utf8')) as { spec: { source: { image: { ref: string } } } };
    expect(cc.spec.source.image.ref).toBe(`${site.host}/full/${CATALOG_REPOSITORY}@${catalog.digest}`);
  });
});

describe('bundle verify of the catalog', () => {
  it('checks the rebuilt catalog\'s layers and content', async () => {
    const r = await runCli(['bundle', 'verify', bundle]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`catalog ${catalog.reference}: rebuilt ${digestOf(record.image)} holds datagrid (2 bundles) over /configs, deleting the stale opm cache: verified`);
  });

  it('refuses a bundle whose record claims a package the catalog layer lacks, in one line', async () => {
    const altered = join(work, 'altered');
    await run('cp', ['-a', bundle, altered]);
    const file = join(altered, 'prestage-bundle.json');
    const metadata = JSON.parse(await readFile(file, 'utf8')) as BundleMetadata;
    await writeFile(file, JSON.stringify({ ...metadata, operators: { catalogs: [{ ...record, packages: ['datagrid', 'kv-store'] }] } }));
    const r = await runCli(['bundle', 'verify', altered]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^prestage: error: .*: catalog .*: its catalog layer holds packages datagrid and 2 bundles, not the recorded datagrid, kv-store and 2; create the bundle again\n$/m);
    expect(r.stderr.split('\n').filter((l) => l.startsWith('prestage: error:'))).toHaveLength(1);
    await rm(altered, { recursive: true });
  });
});

function digestOf(pullSpec: string): string {
  return pullSpec.slice(pullSpec.indexOf('@') + 1);
}
