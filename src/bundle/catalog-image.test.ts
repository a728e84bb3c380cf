import { gunzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { describe, expect, it } from 'vitest';
import { sha256 } from '../registry/client.js';
import { MediaType } from '../registry/manifest.js';
import { blobOf, catalogLayers, rebuiltConfig, rebuiltList, rebuiltManifest, serveCommand } from './catalog-image.js';

const D = (c: string) => `sha256:${c.repeat(64)}`;
const SOURCE_CONFIG = {
  created: '2024-07-01T00:00:00Z',
  architecture: 'amd64',
  config: { Entrypoint: ['/bin/opm'], Cmd: ['serve', '/configs', '--cache-dir=/tmp/cache'], Labels: { 'operators.operatorframework.io.index.configs.v1': '/configs', vendor: 'Red Hat' } },
  rootfs: { type: 'layers', diff_ids: [D('1'), D('2')] },
  history: [{ created_by: 'base' }, { created_by: 'configs' }],
};
const files = new Map([['etcd/catalog.json', '{"schema":"olm.package","name":"etcd"}\n']]);
const MTIME = new Date('2024-07-01T00:00:00Z');

async function entries(gzipped: Buffer): Promise<Array<[string, string]>> {
  const extract = tar.extract();
  const out: Array<[string, string]> = [];
  const done = (async () => {
    for await (const entry of extract) {
      const chunks: Buffer[] = [];
      for await (const c of entry) chunks.push(c as Buffer);
      out.push([entry.header.name, Buffer.concat(chunks).toString()]);
    }
  })();
  extract.end(gunzipSync(gzipped));
  await done;
  return out;
}

describe('what a catalog image serves', () => {
  it('reads the opm binary and the cache directory from Entrypoint and Cmd, in either flag form', () => {
    expect(serveCommand(SOURCE_CONFIG)).toEqual({ entrypoint: ['/bin/opm'], serves: true, cacheDir: '/tmp/cache' });
    expect(serveCommand({ config: { Entrypoint: ['/bin/opm', 'serve', '/configs', '--cache-dir', '/var/cache/'] } })).toEqual({ entrypoint: ['/bin/opm'], serves: true, cacheDir: '/var/cache' });
    // A cache dir that is relative or climbs out of the image gets no whiteout (no path outside the image is written).
    for (const dir of ['tmp/cache', '/tmp/../../etc', '/']) expect(serveCommand({ config: { Entrypoint: ['/bin/opm', 'serve', '/configs', `--cache-dir=${dir}`] } })).toEqual({ entrypoint: ['/bin/opm'], serves: true });
    expect(serveCommand({ config: { Cmd: ['/bin/true'] } })).toEqual({ entrypoint: [], serves: false });
  });
});

describe('the rebuilt catalog image', () => {
  it('deletes the configs and the stale cache in one layer and holds the filtered catalog in the next, the same bytes every run', async () => {
    const [deleting, catalog] = await catalogLayers(MediaType.ociManifest, '/configs', '/tmp/cache', files, MTIME);
    expect(await entries(deleting.bytes)).toEqual([['.wh.configs', ''], ['tmp/.wh.cache', '']]);
    expect(await entries(catalog.bytes)).toEqual([['configs/', ''], ['configs/etcd/', ''], ['configs/etcd/catalog.json', files.get('etcd/catalog.json')!]]);
    expect(catalog.diffId).toBe(sha256(gunzipSync(catalog.bytes)));
    expect(catalog.mediaType).toBe('application/vnd.oci.image.layer.v1.tar+gzip');
    const again = await catalogLayers(MediaType.ociManifest, '/configs', '/tmp/cache', files, MTIME);
    expect([again[0].digest, again[1].digest]).toEqual([deleting.digest, catalog.digest]);
  });

  it('serves the configs without --cache-dir, names every layer\'s diff_id, keeps the labels', async () => {
    const layers = await catalogLayers(MediaType.dockerManifest, '/configs', '/tmp/cache', files, MTIME);
    const config = JSON.parse(rebuiltConfig(Buffer.from(JSON.stringify(SOURCE_CONFIG)), layers, '/configs', 'catalog c').toString()) as typeof SOURCE_CONFIG;
    expect(config.config).toEqual({ ...SOURCE_CONFIG.config, Cmd: ['serve', '/configs'] });
    expect(config.rootfs.diff_ids).toEqual([D('1'), D('2'), layers[0].diffId, layers[1].diffId]);
    expect(config.history.map((h) => h.created_by)).toEqual(['base', 'configs', 'prestage bundle create: delete /configs and the stale opm cache /tmp/cache', 'prestage bundle create: filtered catalog at /configs']);
    expect(layers[1].mediaType).toBe('application/vnd.docker.image.rootfs.diff.tar.gzip');
  });

  it('appends the layers to the source manifest and puts the rebuilt manifests in the list', async () => {
    const layers = await catalogLayers(MediaType.ociManifest, '/configs', undefined, files, MTIME);
    const source = { schemaVersion: 2, mediaType: MediaType.ociManifest, config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: D('c'), size: 10 }, layers: [{ mediaType: 'x', digest: D('1'), size: 5 }] };
    const config = blobOf(Buffer.from('{}'), 'application/vnd.oci.image.config.v1+json');
    const manifest = JSON.parse(rebuiltManifest(Buffer.from(JSON.stringify(source)), config, layers).toString()) as typeof source;
    expect(manifest.config).toEqual({ mediaType: 'application/vnd.oci.image.config.v1+json', digest: config.digest, size: 2 });
    expect(manifest.layers.map((l) => l.digest)).toEqual([D('1'), layers[0].digest, layers[1].digest]);
    const rebuilt = blobOf(Buffer.from(JSON.stringify(manifest)), MediaType.ociManifest);
    const list = { schemaVersion: 2, mediaType: MediaType.ociIndex, manifests: [{ mediaType: MediaType.ociManifest, digest: D('a'), size: 1, platform: { architecture: 'amd64', os: 'linux' } }, { mediaType: MediaType.ociManifest, digest: D('b'), size: 1, platform: { architecture: 'arm64', os: 'linux' } }] };
    expect(JSON.parse(rebuiltList(Buffer.from(JSON.stringify(list)), new Map([[D('a'), rebuilt]])).toString())).toEqual({ ...list, manifests: [{ ...list.manifests[0], digest: rebuilt.digest, size: rebuilt.bytes.length }] });
  });
});
