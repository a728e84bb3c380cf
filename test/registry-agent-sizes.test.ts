/**
 * The node agent's size reads (src/agent/image-sizes.ts) for a node that has to size every
 * component of a release at once, on the real docker-registry behind the fault proxy, reached
 * through a registries.conf mirror as CRI-O would: every image answered with the fixture's exact
 * sizes, each layer trailer read once in a batch, and layers sized in an earlier batch (new sets
 * sharing base layers) not read again.
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { hasLayers, RegistryImageSizes } from '../src/agent/image-sizes.js';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';

const truth = inject('fixtureTruth');
const storageDir = inject('fixtureStorageDir');
const components = truth.components;

let registry: RegistryHandle;
let proxy: FaultProxy;
let work: string;
const log = pino({ level: 'silent' });

beforeAll(async () => {
  registry = await startRegistry({ storageDir });
  proxy = await startFaultProxy({ upstream: registry.url });
  work = await mkdtemp(join(tmpdir(), 'prestage-agent-sizes-'));
  await mkdir(join(work, 'registries.conf.d'));
  await writeFile(join(work, 'registries.conf'), `[[registry]]\nprefix = "quay.io"\nlocation = "quay.io"\n\n[[registry.mirror]]\nlocation = "${proxy.host}"\ninsecure = true\n`);
});

afterAll(async () => {
  await proxy?.stop();
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

beforeEach(() => proxy.resetStats());

const sizes = () => new RegistryImageSizes({ registriesConf: join(work, 'registries.conf'), registriesConfDir: join(work, 'registries.conf.d'), log });

/** The layer digests whose 4-byte trailers the proxy served, with how often each. */
function trailerReads(): Map<string, number> {
  const reads = new Map<string, number>();
  for (const r of proxy.stats.log) {
    if (r.range !== 'bytes=-4') continue;
    const digest = /\/blobs\/(sha256:[a-f0-9]{64})$/.exec(r.target)![1]!;
    reads.set(digest, (reads.get(digest) ?? 0) + 1);
  }
  return reads;
}

const gzipLayers = (list: typeof components) => new Set(list.flatMap((c) => c.layers.map((l) => l.digest)));

describe('agent size reads for a node sizing every image of a release', () => {
  it(`answers all ${components.length} images with their exact sizes, reading each layer trailer once`, async () => {
    const source = sizes();
    try {
      const results = await source.layers(components.map((c) => c.pullSpec), { arch: 'amd64', pullSecrets: [] });
      expect(results.size).toBe(components.length);
      for (const c of components) {
        const result = results.get(c.pullSpec);
        expect(hasLayers(result), JSON.stringify(result)).toBe(true);
        if (!hasLayers(result)) continue;
        expect(result.from).toContain(proxy.host);
        expect(result.layers.map((l) => [l.digest, l.diskBytes, l.exact])).toEqual(c.layers.map((l) => [l.digest, l.uncompressedSize, true]));
      }
      const reads = trailerReads();
      expect(new Set(reads.keys())).toEqual(gzipLayers(components));
      expect([...reads.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await source.close();
    }
  });

  it('does not read again the layers an earlier batch sized (new sets sharing base layers)', async () => {
    const source = sizes();
    const half = Math.floor(components.length / 2);
    const [first, second] = [components.slice(0, half), components.slice(half)];
    try {
      await source.layers(first.map((c) => c.pullSpec), { arch: 'amd64', pullSecrets: [] });
      const seen = gzipLayers(first);
      proxy.resetStats();
      const results = await source.layers(second.map((c) => c.pullSpec), { arch: 'amd64', pullSecrets: [] });
      expect([...results.values()].every(hasLayers)).toBe(true);
      const expected = [...gzipLayers(second)].filter((d) => !seen.has(d));
      expect(new Set(trailerReads().keys())).toEqual(new Set(expected));
      // The fixture's components share base layers, so the second batch must have skipped some.
      expect(expected.length).toBeLessThan(gzipLayers(second).size);
    } finally {
      await source.close();
    }
  });
});
