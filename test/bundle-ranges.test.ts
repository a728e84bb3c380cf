/**
 * Big blobs in parallel Range parts (`bundle create`), on the real docker-registry behind the
 * fault proxy: parts asked for and written at their offsets, the digest checked over every byte
 * in order, and what happens when the registry ignores Range, a part breaks, a part is
 * corrupted, or a part keeps failing (the file is cut back to a prefix a rerun continues).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createBundle } from '../src/bundle/create.js';
import type { Plan } from '../src/plan/types.js';
import { RegistryClient } from '../src/registry/client.js';
import { MediaType } from '../src/registry/manifest.js';
import { parseMirrorRule } from '../src/registry/mirrors.js';
import type { RetryPolicy } from '../src/registry/retry.js';
import { PushClient } from '../src/registry/upload.js';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';

const MiB = 1024 * 1024;
/** Two parts of 20 MiB (parts are at least 16 MiB). */
const LAYER_BYTES = 40 * MiB;
const PART = LAYER_BYTES / 2;
const REPOSITORY = 'ranges/big';

let registry: RegistryHandle;
let proxy: FaultProxy;
let work: string;
let layer: Buffer;
let layerDigest: string;
let plan: Plan;
let n = 0;

function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

beforeAll(async () => {
  registry = await startRegistry();
  proxy = await startFaultProxy({ upstream: registry.url });
  work = await mkdtemp(join(tmpdir(), 'prestage-ranges-'));
  layer = randomBytes(LAYER_BYTES);
  layerDigest = sha256(layer);
  const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [layerDigest] } }));
  const push = new PushClient(registry.host, { pullSecrets: [], insecureRegistries: [registry.host], retry: { attempts: 3, baseDelayMs: 100, maxDelayMs: 1000 }, concurrency: 4, stallTimeoutMs: 60_000 });
  try {
    for (const blob of [config, layer]) await push.uploadBlob(REPOSITORY, { digest: sha256(blob), size: blob.length }, () => Readable.from([blob]));
    const manifest = Buffer.from(JSON.stringify({
      schemaVersion: 2,
      mediaType: MediaType.ociManifest,
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256(config), size: config.length },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: layerDigest, size: layer.length }],
    }));
    await push.putManifest(REPOSITORY, sha256(manifest), manifest, MediaType.ociManifest);
    const pullSpec = `quay.io/${REPOSITORY}@${sha256(manifest)}`;
    // Only what create needs of a plan: the release (whose bundle this is) and the images.
    plan = {
      apiVersion: 'prestage.dev/v1alpha1',
      kind: 'Plan',
      release: { pullSpec, version: '4.16.3', architecture: 'amd64', multiArch: false },
      images: [{ name: 'big', pullSpec, digest: sha256(manifest) }],
      skipped: [],
    } as unknown as Plan;
  } finally {
    await push.close();
  }
}, 120_000);

afterAll(async () => {
  await proxy?.stop();
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

beforeEach(() => {
  proxy.clearFaults();
  proxy.resetStats();
});

async function create(dir: string, retry: RetryPolicy = { attempts: 3, baseDelayMs: 10, maxDelayMs: 50 }): Promise<void> {
  const client = new RegistryClient({ pullSecrets: [], insecureRegistries: [proxy.host], mirrors: [parseMirrorRule(`quay.io=${proxy.host}`)], retry, concurrency: 8, stallTimeoutMs: 30_000 });
  try {
    await createBundle(client, plan, { dir, force: false, allPlatforms: false, sigstore: true, concurrency: 8, progressTo: { write: () => true } as unknown as NodeJS.WritableStream, tty: false });
  } finally {
    await client.close();
  }
}

/** The layer reads the proxy saw, in arrival order: their Range headers and statuses. */
function layerReads(): Array<{ range: string | undefined; status: number; bytes: number }> {
  return proxy.stats.log.filter((r) => r.method === 'GET' && r.target.endsWith(`/blobs/${layerDigest}`)).map((r) => ({ range: r.range, status: r.status, bytes: r.bytesSent }));
}

async function expectLayerInBundle(dir: string): Promise<void> {
  const stored = await readFile(join(dir, 'blobs', 'sha256', layerDigest.slice('sha256:'.length)));
  expect(stored.length).toBe(LAYER_BYTES);
  expect(sha256(stored)).toBe(layerDigest);
  await expect(stat(join(dir, '.partial'))).rejects.toThrow(/ENOENT/);
}

const partRange = (i: number) => `bytes=${i * PART}-${(i + 1) * PART - 1}`;

describe('bundle create reads big blobs in Range parts', () => {
  it('asks for each part once, at once, and stores the blob byte-identical', async () => {
    const dir = join(work, `b${n++}`);
    await create(dir);
    const reads = layerReads();
    expect(reads.map((r) => r.range).sort()).toEqual([partRange(0), partRange(1)]);
    expect(reads.every((r) => r.status === 206 && r.bytes === PART)).toBe(true);
    await expectLayerInBundle(dir);
  });

  it('reads the blob in one stream from a registry that answers Range with the whole blob', async () => {
    proxy.inject({ match: new RegExp(`/blobs/${layerDigest}$`), times: Infinity, fault: { kind: 'ignore-range' } });
    const dir = join(work, `b${n++}`);
    await create(dir);
    const reads = layerReads();
    // The first part's answer (200, the whole blob) ends the parts; the blob comes in one read.
    expect(reads.map((r) => [r.range, r.status])).toEqual([[partRange(0), 200], [undefined, 200]]);
    expect(reads[1]!.bytes).toBe(LAYER_BYTES);
    await expectLayerInBundle(dir);
  });

  it('continues a part that broke after real progress within that part', async () => {
    proxy.inject({ match: (r) => r.headers.range === partRange(1), fault: { kind: 'reset', afterBytes: 3 * MiB } });
    const dir = join(work, `b${n++}`);
    await create(dir);
    const ranges = layerReads().map((r) => r.range);
    expect(ranges).toContain(partRange(0));
    expect(ranges).toContain(partRange(1));
    // The reconnect asks for the rest of part 1 only, from where it broke.
    const resumed = ranges.filter((r) => r !== partRange(0) && r !== partRange(1));
    expect(resumed).toHaveLength(1);
    const from = Number(/^bytes=(\d+)-/.exec(resumed[0]!)![1]);
    expect(from).toBeGreaterThan(PART);
    expect(from).toBeLessThanOrEqual(PART + 3 * MiB);
    expect(resumed[0]).toMatch(new RegExp(`-${LAYER_BYTES - 1}$`));
    await expectLayerInBundle(dir);
  });

  it('catches a corrupted part in the in-order hash and fetches the blob again in one stream', async () => {
    proxy.inject({ match: (r) => r.headers.range === partRange(1), fault: { kind: 'corrupt' } });
    const dir = join(work, `b${n++}`);
    await create(dir);
    const reads = layerReads();
    expect(reads.slice(0, 2).map((r) => r.range).sort()).toEqual([partRange(0), partRange(1)]);
    expect(reads.slice(2).map((r) => [r.range, r.bytes])).toEqual([[undefined, LAYER_BYTES]]);
    await expectLayerInBundle(dir);
  });

  it('cuts the file back to a prefix of the blob when a part keeps failing; a rerun continues it', async () => {
    proxy.inject({ match: (r) => r.headers.range === partRange(1), times: Infinity, fault: { kind: 'reset', afterBytes: 0 } });
    const dir = join(work, `b${n++}`);
    await expect(create(dir, { attempts: 1, baseDelayMs: 10, maxDelayMs: 50 })).rejects.toThrow(new RegExp(`${layerDigest}: blob transfer kept failing .* after 1 attempt\\b`));
    const partial = join(dir, '.partial', layerDigest.slice('sha256:'.length));
    const kept = await readFile(partial);
    expect(kept.length).toBeLessThanOrEqual(PART);
    expect(kept.equals(layer.subarray(0, kept.length))).toBe(true);

    proxy.clearFaults();
    proxy.resetStats();
    await create(dir);
    const ranges = layerReads().map((r) => r.range);
    // A kept prefix is continued with one Range read to the end; an empty one starts over in parts.
    expect(ranges).toEqual(kept.length > 0 ? [`bytes=${kept.length}-`] : [partRange(0), partRange(1)].sort());
    await expectLayerInBundle(dir);
  });
});
