/**
 * Exact sizes past 4 GiB, on a real registry: a layer of 4.5 GiB of zeros (a real gzip stream
 * of about 4.6 MiB, made when the test runs) has a trailer that wrapped to about 512 MiB. The
 * plan's measuring code must count it, not report the wrapped trailer as exact.
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { measureImage } from '../src/plan/sizes.js';
import { RegistryClient } from '../src/registry/client.js';
import { MediaType } from '../src/registry/manifest.js';
import { parseReference } from '../src/registry/reference.js';
import { PushClient } from '../src/registry/upload.js';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';
import { zeroGzip } from './support/zero-gzip.js';

const GiB = 2 ** 30;
const LAYER = 'application/vnd.oci.image.layer.v1.tar+gzip';
let registry: RegistryHandle;
let proxy: FaultProxy;
const big = zeroGzip(4.5 * GiB + 12_345);
const small = (() => {
  const data = Buffer.alloc(300_000, 'prestage ');
  const bytes = gzipSync(data);
  return { bytes, digest: sha256(bytes), uncompressedSize: data.length };
})();

function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

beforeAll(async () => {
  registry = await startRegistry();
  proxy = await startFaultProxy({ upstream: registry.url });
  const push = new PushClient(registry.host, { pullSecrets: [], insecureRegistries: [registry.host], retry: { attempts: 3, baseDelayMs: 10, maxDelayMs: 100 }, concurrency: 4, stallTimeoutMs: 30_000 });
  try {
    const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [] } }));
    for (const blob of [{ bytes: config, digest: sha256(config) }, big, small]) {
      await push.uploadBlob('big/image', { digest: blob.digest, size: blob.bytes.length }, () => Readable.from([blob.bytes]));
    }
    const manifest = Buffer.from(JSON.stringify({
      schemaVersion: 2,
      mediaType: MediaType.ociManifest,
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256(config), size: config.length },
      layers: [big, small].map((l) => ({ mediaType: LAYER, digest: l.digest, size: l.bytes.length })),
    }));
    await push.putManifest('big/image', sha256(manifest), manifest, MediaType.ociManifest, 'v1');
  } finally {
    await push.close();
  }
}, 120_000);

afterAll(async () => {
  await proxy?.stop();
  await registry?.stop();
});

describe('layers whose gzip trailer wraps at 4 GiB', () => {
  it('counts a 4.5 GiB layer of 4.6 MiB compressed instead of trusting its wrapped trailer; a small layer keeps its trailer', async () => {
    expect(big.bytes.length).toBeLessThan(6 * 1024 * 1024);
    expect(big.bytes.readUInt32LE(big.bytes.length - 4)).toBe((4.5 * GiB + 12_345) % 2 ** 32);
    const client = new RegistryClient({ pullSecrets: [], insecureRegistries: [proxy.host], mirrors: [], retry: { attempts: 2, baseDelayMs: 10, maxDelayMs: 100 }, concurrency: 8, stallTimeoutMs: 30_000 });
    const warnings: string[] = [];
    try {
      const measured = await measureImage(client, parseReference(`${proxy.host}/big/image:v1`), 'amd64', warnings);
      expect(measured.layers.map((l) => [l.digest, l.method, l.diskBytes])).toEqual([
        [big.digest, 'gzip-inflated', 4.5 * GiB + 12_345],
        [small.digest, 'gzip-isize', small.uncompressedSize],
      ]);
    } finally {
      await client.close();
    }
    expect(warnings).toEqual([]);
    // The big layer was read whole (verified on the way), the small one by its trailer only.
    const reads = proxy.stats.log.filter((r) => r.target.includes('/blobs/'));
    expect(reads.filter((r) => r.target.endsWith(big.digest)).map((r) => r.range)).toEqual(['bytes=-4', undefined]);
    expect(reads.filter((r) => r.target.endsWith(small.digest)).map((r) => r.range)).toEqual(['bytes=-4']);
  }, 120_000);
});
