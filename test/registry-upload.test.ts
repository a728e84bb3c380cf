/**
 * The write side of the registry API against real, empty docker-registry instances:
 * HEAD, uploads the registry verifies, cross-repository mounts, manifests by digest,
 * push-scoped tokens, and a fresh upload session after a failed body.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegistryClient } from '../src/registry/client.js';
import { parsePullSecretFile } from '../src/registry/credentials.js';
import { MediaType } from '../src/registry/manifest.js';
import { DEFAULT_RETRY } from '../src/registry/retry.js';
import type { TransportOptions } from '../src/registry/transport.js';
import { PushClient } from '../src/registry/upload.js';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';
import { authFile, removeTempDirs } from './support/temp-files.js';

const handles: Array<{ stop(): Promise<void> }> = [];
afterAll(async () => {
  removeTempDirs();
  for (const h of handles.reverse()) await h.stop();
});

function blob(text: string): { digest: string; size: number; bytes: Buffer } {
  const bytes = Buffer.from(text);
  return { digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, size: bytes.length, bytes };
}

function imageManifest(config: { digest: string; size: number }, layer: { digest: string; size: number }): Buffer {
  return Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: MediaType.dockerManifest,
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: config.digest, size: config.size },
    layers: [{ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', digest: layer.digest, size: layer.size }],
  }));
}

function options(extra: Partial<TransportOptions> = {}): TransportOptions {
  return { pullSecrets: [], insecureRegistries: 'all', retry: { ...DEFAULT_RETRY, baseDelayMs: 10 }, concurrency: 8, stallTimeoutMs: 10_000, ...extra };
}

describe('pushing to an anonymous registry through a fault proxy', () => {
  let registry: RegistryHandle;
  let proxy: FaultProxy;
  let push: PushClient;
  beforeAll(async () => {
    registry = await startRegistry();
    proxy = await startFaultProxy({ upstream: registry.url });
    handles.push(registry, proxy);
    push = new PushClient(proxy.host, options());
    handles.push({ stop: () => push.close() });
  });

  it('uploads a blob once, then mounts it into another repository without sending its bytes', async () => {
    const layer = blob('layer one');
    expect(await push.hasBlob('team/a', layer.digest)).toBe(false);
    expect(await push.uploadBlob('team/a', layer, () => Readable.from([layer.bytes]))).toBe('uploaded');
    expect(await push.hasBlob('team/a', layer.digest)).toBe(true);
    proxy.resetStats();
    expect(await push.mountBlob('team/b', layer.digest, 'team/a')).toBe(true);
    expect(proxy.stats.log.map((r) => [r.method, r.status])).toEqual([['POST', 201]]);
    expect(await push.hasBlob('team/b', layer.digest)).toBe(true);
  });

  it('cancels the session when the registry will not mount, and says so', async () => {
    const absent = blob('never pushed');
    proxy.resetStats();
    expect(await push.mountBlob('team/c', absent.digest, 'team/a')).toBe(false);
    expect(proxy.stats.log.map((r) => [r.method, r.status])).toEqual([['POST', 202], ['DELETE', 204]]);
  });

  it('puts manifests by digest so the mirror serves the same bytes under the same digest', async () => {
    const config = blob('{"architecture":"amd64","os":"linux"}');
    const layer = blob('layer two');
    for (const b of [config, layer]) await push.uploadBlob('team/app', b, () => Readable.from([b.bytes]));
    const bytes = imageManifest(config, layer);
    const digest = blob(bytes.toString()).digest;
    expect(await push.hasManifest('team/app', digest)).toBe(false);
    await push.putManifest('team/app', digest, bytes, MediaType.dockerManifest);
    expect(await push.hasManifest('team/app', digest)).toBe(true);
    const reader = new RegistryClient({ ...options(), mirrors: [] });
    try {
      const fetched = await reader.fetchManifest({ registry: proxy.host, repository: 'team/app', digest });
      expect(fetched.bytes.equals(bytes)).toBe(true);
    } finally {
      await reader.close();
    }
  });

  it('starts a new upload session when the body upload fails transiently', async () => {
    const layer = blob('layer three');
    proxy.resetStats();
    proxy.inject({ match: (r) => r.method === 'PUT' && r.target.includes('/blobs/uploads/'), fault: { kind: 'status', status: 503 } });
    expect(await push.uploadBlob('team/a', layer, () => Readable.from([layer.bytes]))).toBe('uploaded');
    expect(proxy.stats.log.map((r) => [r.method, r.status])).toEqual([['POST', 202], ['PUT', 503], ['POST', 202], ['PUT', 201]]);
    expect(await push.hasBlob('team/a', layer.digest)).toBe(true);
  });

  it('fails in one line when the registry finds the bytes do not match the digest', async () => {
    const claimed = blob('what the manifest says');
    const err = await push.uploadBlob('team/a', claimed, () => Readable.from([Buffer.from('what the disk holds!!!')])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error & { exitCode: number }).exitCode).toBe(3);
    expect((err as Error).message).toMatch(/400 .*DIGEST_INVALID/);
    expect(await push.hasBlob('team/a', claimed.digest)).toBe(false);
  });
});

describe('pushing with token auth', () => {
  let registry: RegistryHandle;
  let push: PushClient;
  beforeAll(async () => {
    registry = await startRegistry({ auth: 'token' });
    handles.push(registry);
    const file = await authFile(registry.host, registry.username!, registry.password!);
    push = new PushClient(registry.host, options({ pullSecrets: [parsePullSecretFile(file)] }));
    handles.push({ stop: () => push.close() });
  });

  it('asks for pull,push on the target repository, and pull on the repository it mounts from', async () => {
    const layer = blob('token layer');
    expect(await push.uploadBlob('ns/one', layer, () => Readable.from([layer.bytes]))).toBe('uploaded');
    expect(await push.mountBlob('ns/two', layer.digest, 'ns/one')).toBe(true);
    const scopes = new Set(registry.tokenIssuer!.log.map((l) => l.scopes.join(' ')));
    expect(scopes).toEqual(new Set(['repository:ns/one:pull,push', 'repository:ns/two:pull,push repository:ns/one:pull']));
    expect(registry.tokenIssuer!.log.every((l) => l.authenticated)).toBe(true);
  });
});
