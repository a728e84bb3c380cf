/**
 * What the operator bundle test reads back from a mirror registry and asks of a running opm:
 * manifests and configs over the distribution API, an image's filesystem extracted as a container
 * runtime applies layers (each layer's whiteouts delete what lies below it, then its files land),
 * `opm serve` started and awaited, and a unary or server-streaming gRPC call over h2c with an
 * empty request (the protocol's length-prefixed messages), so no gRPC library is needed.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MANIFEST_ACCEPT } from '../../src/registry/manifest.js';
import type { RegistryHandle } from '../harness/index.js';

const run = promisify(execFile);

export async function manifestStatus(registry: RegistryHandle, repository: string, reference: string): Promise<number> {
  return (await fetch(`${registry.url}/v2/${repository}/manifests/${reference}`, { method: 'HEAD', headers: { accept: MANIFEST_ACCEPT } })).status;
}

/** The digest a tag names in the registry. */
export async function tagDigest(registry: RegistryHandle, repository: string, tag: string): Promise<string | null> {
  return (await fetch(`${registry.url}/v2/${repository}/manifests/${tag}`, { method: 'HEAD', headers: { accept: MANIFEST_ACCEPT } })).headers.get('docker-content-digest');
}

async function getJson<T>(url: string): Promise<T> {
  const r = await fetch(url, { headers: { accept: MANIFEST_ACCEPT } });
  if (!r.ok) throw new Error(`${url}: ${r.status}`);
  return (await r.json()) as T;
}

interface Descriptor { readonly digest: string; readonly platform?: { readonly architecture: string } }

/** The amd64 image manifest a tag or digest names. */
async function imageManifest(registry: RegistryHandle, repository: string, reference: string): Promise<{ config: Descriptor; layers: Descriptor[] }> {
  const top = await getJson<{ manifests?: Descriptor[]; config: Descriptor; layers: Descriptor[] }>(`${registry.url}/v2/${repository}/manifests/${reference}`);
  if (!top.manifests) return top;
  return getJson(`${registry.url}/v2/${repository}/manifests/${top.manifests.find((m) => m.platform?.architecture === 'amd64')!.digest}`);
}

export async function imageConfig(registry: RegistryHandle, repository: string, reference: string): Promise<{ config: { Entrypoint: string[]; Cmd: string[]; Labels: Record<string, string> } }> {
  return getJson(`${registry.url}/v2/${repository}/blobs/${(await imageManifest(registry, repository, reference)).config.digest}`);
}

/** An image's filesystem into `into`, layer by layer: whiteouts first (they hide only what lies below), then the files. */
export async function extractImage(registry: RegistryHandle, repository: string, reference: string, into: string): Promise<void> {
  await mkdir(into, { recursive: true });
  const scratch = await mkdtemp(join(tmpdir(), 'prestage-layers-'));
  try {
    for (const layer of (await imageManifest(registry, repository, reference)).layers) {
      const file = join(scratch, `${layer.digest.slice(7)}.tar.gz`);
      await writeFile(file, Buffer.from(await (await fetch(`${registry.url}/v2/${repository}/blobs/${layer.digest}`)).arrayBuffer()));
      for (const name of (await run('tar', ['-tzf', file])).stdout.split('\n')) {
        const base = name.split('/').filter(Boolean).at(-1) ?? '';
        if (base.startsWith('.wh.') && base !== '.wh..wh..opq') await rm(join(into, name.replace(/\/?[^/]+$/, ''), base.slice(4)), { recursive: true, force: true });
      }
      await run('tar', ['-xzf', file, '-C', into, '--exclude=.wh.*']);
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** The objects of `opm render -o json` (each at a line of its own, `{` to `}`). */
export function jsonStream(text: string): Array<Record<string, unknown>> {
  return text.split(/(?<=^\})\s*(?=^\{)/m).filter((t) => t.trim() !== '').map((t) => JSON.parse(t) as Record<string, unknown>);
}

/** `opm serve`, ready once it logs "serving registry"; its log so far. */
export function startOpmServe(opm: string, args: readonly string[]): { process: ChildProcess; ready: Promise<void>; log: () => string } {
  const child = spawn(opm, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const ready = new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      log += chunk.toString('utf8');
      if (log.includes('serving registry')) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`opm serve exited ${code}: ${log}`)));
  });
  return { process: child, ready, log: () => log };
}

/** One gRPC call with an empty request over h2c; the answer's messages (a server stream's too). */
export function grpcCall(port: number, path: string): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const session = connect(`http://127.0.0.1:${port}`);
    session.once('error', reject);
    const call = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' });
    const chunks: Buffer[] = [];
    let status: string | undefined;
    call.on('data', (chunk: Buffer) => chunks.push(chunk));
    call.on('trailers', (trailers) => (status = String(trailers['grpc-status'])));
    call.once('error', reject);
    call.once('end', () => {
      session.close();
      if (status !== '0') return reject(new Error(`${path}: grpc-status ${status}`));
      const body = Buffer.concat(chunks);
      const messages: Buffer[] = [];
      for (let at = 0; at < body.length; at += 5 + body.readUInt32BE(at + 1)) messages.push(body.subarray(at + 5, at + 5 + body.readUInt32BE(at + 1)));
      resolve(messages);
    });
    // A message: no compression flag, length 0.
    call.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}
