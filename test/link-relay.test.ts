/**
 * The agent's link relay against a real registry (Debian's docker-registry) behind the fault
 * proxy, which logs what it is asked for: it serves an image only while a pull session is open,
 * and in it only what its manifests name; it reads each blob upstream as Range parts of half a
 * second of the cap, each paid on the ledger before it is asked for; a resume (Range from CRI-O)
 * gets the rest of the blob; its token keeps everyone else out.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryLinkLedger } from '../src/agent/link-share.js';
import { LinkRelay } from '../src/agent/link-relay.js';
import type { LinkCharge, LinkLedger } from '../src/net/link-meter.js';
import { partBytesFor } from '../src/net/link-meter.js';
import { createLogger } from '../src/telemetry/log.js';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';
import { file, pushImage } from './support/built-images.js';

const MiB = 2 ** 20;
const CAP = MiB;
let dir: string;
let registry: RegistryHandle;
let proxy: FaultProxy;
let relay: LinkRelay;
let image: string;
let base: string;
/** Every charge the relay's reads made on the ledger, in bytes. */
const charges: number[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-relay-'));
  registry = await startRegistry();
  proxy = await startFaultProxy({ upstream: registry.url });
  image = (await pushImage(registry.host, 'prestage-test/relayed', [[file('big.bin', randomBytes(1.5 * MiB))], [file('small.txt', Buffer.from('small'))]], {})).replace(registry.host, 'large.example');
  const conf = join(dir, 'registries.conf');
  await writeFile(conf, `[[registry]]\nprefix = "large.example"\nlocation = "${proxy.host}"\ninsecure = true\n`);
  const memory = new MemoryLinkLedger();
  const ledger: LinkLedger = {
    start: async (bytes, cap, signal, openMs): Promise<LinkCharge> => {
      charges.push(bytes);
      return memory.start(bytes, cap, signal, openMs);
    },
  };
  relay = new LinkRelay({ listen: { host: '127.0.0.1', port: 0 }, registriesConf: conf, registriesConfDir: join(dir, 'registries.conf.d'), ledger, log: createLogger('error') });
  await relay.start();
  // As CRI-O asks a mirror HOST:PORT/TOKEN/large.example: /v2/TOKEN/large.example/<repository>/...
  const [hostPort, token] = relay.mirrors(['large.example'])[0]!.location.split('/');
  base = `http://${hostPort}/v2/${token}`;
});

afterAll(async () => {
  await relay?.stop();
  await proxy?.stop();
  await registry?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const digestOf = (bytes: Buffer) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
const manifestUrl = (digest: string, token = base) => `${token}/large.example/prestage-test/relayed/manifests/${digest}`;
const blobUrl = (digest: string) => `${base}/large.example/prestage-test/relayed/blobs/${digest}`;

describe('the link relay', () => {
  it('serves an image only while its pull is open, only what its manifests name, each blob read upstream in paid Range parts', async () => {
    const digest = image.split('@')[1]!;
    const origin = base.replace(/\/v2\/[0-9a-f]+$/, '');
    expect((await fetch(`${origin}/v2/`)).status).toBe(200);
    // No pull under way: nothing is served, and nothing is asked upstream.
    expect((await fetch(manifestUrl(digest))).status).toBe(404);
    // Another token: nothing either, whatever is open.
    const session = relay.open(image, CAP, []);
    expect((await fetch(manifestUrl(digest, `${origin}/v2/${'0'.repeat(32)}`))).status).toBe(404);
    expect(proxy.stats.requests).toBe(0);

    const manifestAnswer = await fetch(manifestUrl(digest));
    expect(manifestAnswer.status).toBe(200);
    const manifestBytes = Buffer.from(await manifestAnswer.arrayBuffer());
    expect(digestOf(manifestBytes)).toBe(digest);
    const manifest = JSON.parse(manifestBytes.toString()) as { config: { digest: string }; layers: Array<{ digest: string; size: number }> };
    // A blob no manifest of the pull names: 404, not fetched.
    expect((await fetch(blobUrl(`sha256:${'a'.repeat(64)}`))).status).toBe(404);

    proxy.resetStats();
    const big = manifest.layers.reduce((a, b) => (a.size > b.size ? a : b));
    const layerAnswer = await fetch(blobUrl(big.digest));
    expect(layerAnswer.status).toBe(200);
    const layer = Buffer.from(await layerAnswer.arrayBuffer());
    expect([layer.length, digestOf(layer)]).toEqual([big.size, big.digest]);
    // Upstream it was asked for in parts of half a second of the cap, none longer.
    const parts = proxy.stats.log.filter((record) => record.target.includes(big.digest)).map((record) => record.range);
    const part = partBytesFor(CAP);
    expect(parts).toEqual(Array.from({ length: Math.ceil(big.size / part) }, (_, i) => `bytes=${i * part}-${Math.min(big.size, (i + 1) * part) - 1}`));

    // A resume gets the rest, as a registry answers it.
    const resumed = await fetch(blobUrl(big.digest), { headers: { range: 'bytes=1000-' } });
    expect([resumed.status, resumed.headers.get('content-range')]).toEqual([206, `bytes 1000-${big.size - 1}/${big.size}`]);
    expect(Buffer.from(await resumed.arrayBuffer()).equals(layer.subarray(1000))).toBe(true);
    expect((await fetch(blobUrl(manifest.config.digest))).status).toBe(200);

    const { bytes, requests } = await session.close();
    console.log(`relayed ${bytes} bytes in ${requests} upstream reads; ${charges.length} ledger charges: ${charges.join(', ')}`);
    expect(bytes).toBeGreaterThanOrEqual(2 * big.size - 1000);
    // Every byte read upstream was paid on the ledger before it was asked for.
    expect(charges.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(bytes);
    // In slices of a second of the cap: no read, the resume included, paid more at once.
    expect(Math.max(...charges)).toBeLessThanOrEqual(CAP);
    // Closed: nothing more is served.
    expect((await fetch(manifestUrl(digest))).status).toBe(404);
  });
});
