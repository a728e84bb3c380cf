/** Images built in code and pushed to a test registry (Docker schema2, gzip layers): the pause image, test payloads. */
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import { finishedTar, sha256 } from '../cluster/registry.js';

export interface Entry {
  readonly name: string;
  readonly type: 'file' | 'directory' | 'symlink';
  readonly mode?: number;
  readonly content?: Buffer;
  readonly linkname?: string;
}
export const file = (name: string, content: Buffer, mode = 0o644): Entry => ({ name, type: 'file', mode, content });
export const dir = (name: string, mode = 0o755): Entry => ({ name, type: 'directory', mode });
export const link = (name: string, linkname: string): Entry => ({ name, type: 'symlink', linkname });

/** Manifest sizes by pushed reference, for an index over them. */
export const pushedSizes = new Map<string, number>();

/** Docker schema2, one gzip layer per entry list; returns `host/repository@digest`. */
export async function pushImage(host: string, repository: string, layers: Entry[][], config: object, architecture = 'amd64'): Promise<string> {
  const tars = await Promise.all(layers.map((entries) => tarOf([...new Map(entries.map((entry) => [entry.name, entry])).values()])));
  const blobs = tars.map((tar) => gzipSync(tar, { level: 1 }));
  const configBlob = Buffer.from(JSON.stringify({ architecture, os: 'linux', config, rootfs: { type: 'layers', diff_ids: tars.map(sha256) } }));
  for (const blob of [...blobs, configBlob]) {
    const opened = await fetch(`http://${host}/v2/${repository}/blobs/uploads/`, { method: 'POST' });
    const url = new URL(opened.headers.get('location') as string, `http://${host}`);
    url.searchParams.set('digest', sha256(blob));
    const put = await fetch(url, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: blob });
    if (put.status !== 201) throw new Error(`blob PUT ${repository}: HTTP ${put.status}`);
  }
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: configBlob.length, digest: sha256(configBlob) },
    layers: blobs.map((blob) => ({ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: blob.length, digest: sha256(blob) })),
  }));
  const response = await fetch(`http://${host}/v2/${repository}/manifests/${sha256(manifest)}`, { method: 'PUT', headers: { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' }, body: manifest });
  if (response.status !== 201) throw new Error(`manifest PUT ${repository}: HTTP ${response.status}`);
  const reference = `${host}/${repository}@${sha256(manifest)}`;
  pushedSizes.set(reference, manifest.length);
  return reference;
}

function tarOf(entries: Entry[]): Promise<Buffer> {
  const archive = pack();
  for (const entry of entries) {
    if (entry.type === 'file') archive.entry({ name: entry.name, mode: entry.mode }, entry.content ?? Buffer.alloc(0));
    else archive.entry({ name: entry.name, mode: entry.mode ?? 0o755, type: entry.type, linkname: entry.linkname });
  }
  return finishedTar(archive);
}
