/**
 * Tiny images built in code and pushed to a test registry (started with the harness's
 * `startRegistry`), for cluster tests that need an image of a chosen size or content.
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { pack, type Pack } from 'tar-stream';

export interface PushedImage {
  /** `sha256:...` of the manifest: what digest references name. */
  readonly digest: string;
  /** `sha256:...` of the config blob: CRI-O reports its hex as the image ID. */
  readonly configDigest: string;
}

/** Builds a one-layer Docker schema2 image holding `files` and pushes it as `<repository>:<tag>`. */
export async function pushImage(host: string, repository: string, tag: string, files: Record<string, string | Buffer>): Promise<PushedImage> {
  const tar = await tarOf(files);
  const layer = gzipSync(tar);
  const config = Buffer.from(
    JSON.stringify({
      architecture: 'amd64',
      os: 'linux',
      config: { Cmd: ['/bin/true'] },
      rootfs: { type: 'layers', diff_ids: [sha256(tar)] },
    }),
  );
  await pushBlob(host, repository, layer);
  await pushBlob(host, repository, config);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
      config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: config.length, digest: sha256(config) },
      layers: [{ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: layer.length, digest: sha256(layer) }],
    }),
  );
  const response = await fetch(`http://${host}/v2/${repository}/manifests/${tag}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' },
    body: manifest,
  });
  if (response.status !== 201) throw new Error(`manifest PUT ${repository}:${tag}: HTTP ${response.status} ${await response.text()}`);
  return { digest: sha256(manifest), configDigest: sha256(config) };
}

/** Monolithic upload: POST opens a session, one PUT with the digest completes it. */
async function pushBlob(host: string, repository: string, blob: Buffer): Promise<void> {
  const opened = await fetch(`http://${host}/v2/${repository}/blobs/uploads/`, { method: 'POST' });
  const location = opened.headers.get('location');
  if (opened.status !== 202 || !location) throw new Error(`blob upload POST: HTTP ${opened.status}`);
  const url = new URL(location, `http://${host}`);
  url.searchParams.set('digest', sha256(blob));
  const put = await fetch(url, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: blob });
  if (put.status !== 201) throw new Error(`blob upload PUT: HTTP ${put.status} ${await put.text()}`);
}

function tarOf(files: Record<string, string | Buffer>): Promise<Buffer> {
  const archive = pack();
  for (const [name, content] of Object.entries(files)) archive.entry({ name, mode: 0o644 }, content);
  return finishedTar(archive);
}

/** Finalizes a tar-stream pack and resolves with its bytes. */
export function finishedTar(archive: Pack): Promise<Buffer> {
  archive.finalize();
  const chunks: Buffer[] = [];
  return new Promise((resolve, reject) => {
    archive.on('data', (chunk: unknown) => {
      chunks.push(chunk as Buffer);
    });
    archive.on('end', () => resolve(Buffer.concat(chunks)));
    archive.on('error', reject);
  });
}

export function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}
