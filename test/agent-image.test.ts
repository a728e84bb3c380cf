/**
 * The agent image as users build and carry it, against the real Debian docker-registry:
 * `prestage image push` appends prestage's layer to every platform of a base, and
 * `bundle create --agent-image` carries the result into an air-gapped bundle that `bundle push`
 * mirrors. (The DaemonSet test runs an image this command built, under a real kubelet.)
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { extract, pack } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finishedTar, sha256 } from './cluster/registry.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { runCli as run } from './support/cli.js';

let registry: RegistryHandle;
let dir: string;

beforeAll(async () => {
  registry = await startRegistry();
  dir = mkdtempSync(join(tmpdir(), 'prestage-agent-image-'));
});

afterAll(async () => {
  await registry?.stop();
  rmSync(dir, { recursive: true, force: true });
});


const get = async (path: string, accept = 'application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json') => {
  const response = await fetch(`http://${registry.host}/v2/${path}`, { headers: { accept } });
  expect(response.status, path).toBe(200);
  return response;
};

/** An OCI index of one small layer per platform: what `--base` reads (a real one would hold Node.js). */
async function pushBase(platforms: readonly string[]): Promise<string> {
  const archive = pack();
  archive.entry({ name: 'etc/os-release', mode: 0o644 }, 'ID=base\n');
  const tar = await finishedTar(archive);
  const layer = gzipSync(tar);
  const entries = [];
  for (const architecture of platforms) {
    const config = Buffer.from(JSON.stringify({ architecture, os: 'linux', config: { Env: ['PATH=/usr/local/bin:/usr/bin:/bin'], Cmd: ['node'] }, rootfs: { type: 'layers', diff_ids: [sha256(tar)] }, history: [{ created_by: 'base' }] }));
    for (const blob of [layer, config]) {
      const opened = await fetch(`http://${registry.host}/v2/base/blobs/uploads/`, { method: 'POST' });
      const url = new URL(opened.headers.get('location') as string, `http://${registry.host}`);
      url.searchParams.set('digest', sha256(blob));
      expect((await fetch(url, { method: 'PUT', body: blob })).status).toBe(201);
    }
    const manifest = Buffer.from(JSON.stringify({
      schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256(config), size: config.length },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: sha256(layer), size: layer.length }],
    }));
    expect((await fetch(`http://${registry.host}/v2/base/manifests/${sha256(manifest)}`, { method: 'PUT', headers: { 'content-type': 'application/vnd.oci.image.manifest.v1+json' }, body: manifest })).status).toBe(201);
    entries.push({ mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: sha256(manifest), size: manifest.length, platform: { architecture, os: 'linux' } });
  }
  // An attestation entry, as Docker Hub's images carry: no platform to build.
  entries.push({ ...entries[0]!, platform: { architecture: 'unknown', os: 'unknown' } });
  const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: entries }));
  expect((await fetch(`http://${registry.host}/v2/base/manifests/1`, { method: 'PUT', headers: { 'content-type': 'application/vnd.oci.image.index.v1+json' }, body: index })).status).toBe(201);
  return `${registry.host}/base:1`;
}

/** [name, content] of every entry of a tar. */
async function tarFiles(tar: Buffer): Promise<Array<[string, string]>> {
  const entries: Array<[string, string]> = [];
  const reader = extract();
  const done = new Promise<void>((resolve, reject) => {
    reader.on('entry', (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: unknown) => chunks.push(chunk as Buffer));
      stream.on('end', () => {
        entries.push([header.name, Buffer.concat(chunks).toString('utf8')]);
        next();
      });
    });
    reader.on('finish', resolve);
    reader.on('error', reject);
  });
  reader.end(tar);
  await done;
  return entries;
}

describe('prestage image push', () => {
  it("appends one prestage layer to every linux platform of the base, OCI in OCI out, and prints the pushed reference", async () => {
    const base = await pushBase(['amd64', 'arm64', 's390x']);
    const pushed = await run(['image', 'push', `${registry.host}/tools/prestage:0.1.0`, '--base', base, '--insecure-registry', registry.host]);
    expect(pushed.code, pushed.stderr).toBe(0);
    const index = (await (await get('tools/prestage/manifests/0.1.0')).json()) as { mediaType: string; manifests: Array<{ digest: string; platform: { architecture: string } }> };
    expect(pushed.stdout).toBe(`${registry.host}/tools/prestage:0.1.0@${sha256(Buffer.from(JSON.stringify(index)))}\n`);
    expect(index.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(index.manifests.map((entry) => entry.platform.architecture)).toEqual(['amd64', 'arm64', 's390x']);
    const layers = new Set<string>();
    for (const entry of index.manifests) {
      const manifest = (await (await get(`tools/prestage/manifests/${entry.digest}`)).json()) as { config: { digest: string }; layers: Array<{ mediaType: string; digest: string }> };
      expect(manifest.layers.map((layer) => layer.mediaType)).toEqual(['application/vnd.oci.image.layer.v1.tar+gzip', 'application/vnd.oci.image.layer.v1.tar+gzip']);
      layers.add(manifest.layers[1]!.digest);
      const config = (await (await get(`tools/prestage/blobs/${manifest.config.digest}`)).json()) as { architecture: string; config: Record<string, unknown>; rootfs: { diff_ids: string[] }; history: unknown[] };
      expect(config.architecture).toBe(entry.platform.architecture);
      expect(config.config).toMatchObject({ Entrypoint: ['node', '/app/bin/prestage.js'], Cmd: null, WorkingDir: '/app', Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'NODE_ENV=production'] });
      expect(config.rootfs.diff_ids).toHaveLength(2);
      expect(config.history).toHaveLength(2);
    }
    // The same bytes on every platform, and the same digest when pushed again from the same tree.
    expect(layers.size).toBe(1);
    const again = await run(['image', 'push', `${registry.host}/tools/prestage:0.1.0`, '--base', base, '--insecure-registry', registry.host]);
    expect(again.stdout).toBe(pushed.stdout);
    expect(pushed.stderr).toMatch(/^prestage layer: \d+ files, [\d.]+ MiB compressed \(sha256:[0-9a-f]{64}\)\n/);
  }, 120_000);

  it('--executable lays npm run dist\'s file of each platform as /usr/local/bin/prestage, leaves out (and says) a platform it has none for', async () => {
    const base = await pushBase(['amd64', 'arm64', 's390x']);
    const dist = join(dir, 'dist-bin');
    for (const target of ['linux-amd64', 'linux-arm64']) {
      mkdirSync(join(dist, target), { recursive: true });
      writeFileSync(join(dist, target, 'prestage'), `#!/bin/sh\necho ${target}\n`, { mode: 0o755 });
    }
    const pushed = await run(['image', 'push', `${registry.host}/tools/prestage:exe`, '--base', base, '--executable', dist, '--insecure-registry', registry.host]);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stderr).toMatch(/^prestage executable for linux\/amd64: .*\nprestage executable for linux\/arm64: .*\n/);
    expect(pushed.stderr).toMatch(new RegExp(`^prestage: warning: ${registry.host}/base:1 also offers linux/s390x: no executable for it in ${dist}, left out$`, 'm'));
    const index = (await (await get('tools/prestage/manifests/exe')).json()) as { manifests: Array<{ digest: string; platform: { architecture: string } }> };
    expect(index.manifests.map((entry) => entry.platform.architecture)).toEqual(['amd64', 'arm64']);
    for (const entry of index.manifests) {
      const manifest = (await (await get(`tools/prestage/manifests/${entry.digest}`)).json()) as { config: { digest: string }; layers: Array<{ digest: string }> };
      const config = (await (await get(`tools/prestage/blobs/${manifest.config.digest}`)).json()) as { config: Record<string, unknown> };
      expect(config.config).toMatchObject({ Entrypoint: ['/usr/local/bin/prestage'], WorkingDir: '/' });
      // The layer holds that platform's file and nothing else.
      const layer = Buffer.from(await (await get(`tools/prestage/blobs/${manifest.layers[1]!.digest}`)).arrayBuffer());
      const files = await tarFiles(gunzipSync(layer));
      expect(files).toEqual([['usr/', ''], ['usr/local/', ''], ['usr/local/bin/', ''], ['usr/local/bin/prestage', `#!/bin/sh\necho linux-${entry.platform.architecture}\n`]]);
    }
    const none = await run(['image', 'push', `${registry.host}/tools/prestage:exe`, '--executable', join(dir, 'nothing-here'), '--insecure-registry', registry.host]);
    expect([none.code, none.stderr]).toEqual([2, `prestage: error: --executable ${join(dir, 'nothing-here')}: no linux-<arch>/prestage in it; run npm run dist and name its output directory (dist-bin)\n`]);
  }, 120_000);

  it('rejects a target without a tag, and a bad --base, with exit 2 and one line', async () => {
    const noTag = await run(['image', 'push', `${registry.host}/tools/prestage`, '--insecure-registry', registry.host]);
    expect(noTag.code).toBe(2);
    expect(noTag.stderr).toBe(`prestage: error: TARGET ${registry.host}/tools/prestage must name a tag and no digest, e.g. ${registry.host}/tools/prestage:0.1.0: the tag is what install --image names\n`);
    const badBase = await run(['image', 'push', `${registry.host}/tools/prestage:1`, '--base', 'Not A Reference']);
    expect(badBase.code).toBe(2);
    expect(badBase.stderr).toMatch(/^prestage: error: --base: invalid image reference "Not A Reference": .*\n$/);
  });
});

describe('bundle create --agent-image', () => {
  it('carries the agent image by digest, and bundle push mirrors it', async () => {
    const reference = `${registry.host}/tools/prestage:0.1.0`;
    const digest = sha256(Buffer.from(await (await get('tools/prestage/manifests/0.1.0')).arrayBuffer()));
    // A plan with no images: the bundle carries the agent image alone.
    const planFile = join(dir, 'plan.json');
    writeFileSync(planFile, JSON.stringify({
      apiVersion: 'prestage.dev/v1alpha1', kind: 'Plan',
      release: { pullSpec: `${registry.host}/ocp/release@sha256:${'1'.repeat(64)}`, digest: `sha256:${'1'.repeat(64)}`, manifestDigest: `sha256:${'1'.repeat(64)}`, version: '4.16.3', architecture: 'amd64', multiArch: false, channels: [] },
      profile: 'self-managed-high-availability',
      cluster: { profile: 'self-managed-high-availability', featureSet: 'Default', capabilities: [], exclude: [], platform: null },
      images: [], skipped: [], sets: [], warnings: [],
    }));
    const bundle = join(dir, 'bundle');
    // Every platform: the Debian registry refuses an index whose platforms are not all there.
    const created = await run(['bundle', 'create', planFile, '--output-dir', bundle, '--agent-image', reference, '--all-platforms', '--insecure-registry', registry.host, '--allow-unsigned']);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^bundle .*: 1 image, /);
    const index = JSON.parse(readFileSync(join(bundle, 'index.json'), 'utf8')) as { manifests: Array<{ digest: string; annotations: Record<string, string> }> };
    expect(index.manifests.map((entry) => [entry.digest, entry.annotations['org.opencontainers.image.ref.name']])).toEqual([[digest, `${registry.host}/tools/prestage@${digest}`]]);

    const out = join(dir, 'out');
    const pushed = await run(['bundle', 'push', bundle, `${registry.host}/mirror`, '--insecure-registry', registry.host, '--output-dir', out]);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(readFileSync(join(out, 'mapping.txt'), 'utf8')).toContain(`${registry.host}/tools/prestage@${digest}=${registry.host}/mirror/tools/prestage@${digest}`);
    await get(`mirror/tools/prestage/manifests/${digest}`);
  }, 120_000);
});
