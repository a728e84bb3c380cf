import { describe, expect, it } from 'vitest';
import { parseReference } from '../registry/reference.js';
import { cachedImages, readRecord, TreeCacheWarmer, warmKey, writeRecord, type CacheWarmer } from './cache-warm.js';

const DIGEST = `sha256:${'a'.repeat(64)}`;
const OTHER = `sha256:${'b'.repeat(64)}`;
const CACHES = 'quay.io=10.0.0.5:5000';

describe('cache warm: which images, and the record on the Lease', () => {
  it('warms only digest pullspecs under a cached source (the drop-in is digest-only), each once', () => {
    const refs = cachedImages(
      [
        `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`,
        `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`,
        'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64',
        `registry.example.com/app@${OTHER}`,
        `quay.iox/other@${OTHER}`,
        'not a reference',
      ],
      [{ source: 'quay.io', location: '10.0.0.5:5000' }],
    );
    expect(refs.map((ref) => `${ref.registry}/${ref.repository}@${ref.digest}`)).toEqual([`quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`]);
  });

  it('keys an image by the node architecture and its digest (a manifest list is warmed per platform)', () => {
    expect(warmKey('arm64', parseReference(`quay.io/a/b@${DIGEST}`))).toBe(`arm64@${DIGEST}`);
  });

  it('reads back what it wrote; an empty record for another cache, a missing or a garbled annotation', () => {
    const written = writeRecord(new Set([`amd64@${OTHER}`]), [`amd64@${DIGEST}`], CACHES);
    expect(readRecord(written, CACHES)).toEqual(new Set([`amd64@${OTHER}`, `amd64@${DIGEST}`]));
    expect(readRecord(written, 'quay.io=10.0.0.6:5000')).toEqual(new Set());
    expect(readRecord(undefined, CACHES)).toEqual(new Set());
    expect(readRecord('{not json', CACHES)).toEqual(new Set());
    expect(readRecord(JSON.stringify({ caches: CACHES, keys: 'x' }), CACHES)).toEqual(new Set());
  });

  it('keeps the newest 2000 keys, a re-warmed key moved to the end, so the annotation stays far below its 256 KiB limit', () => {
    const previous = new Set(Array.from({ length: 2_000 }, (_, index) => `amd64@sha256:${index.toString(16).padStart(64, '0')}`));
    const first = [...previous][0]!;
    const written = writeRecord(previous, [first, `amd64@${DIGEST}`], CACHES);
    const keys = JSON.parse(written).keys as string[];
    expect(keys).toHaveLength(2_000);
    expect(keys.slice(-2)).toEqual([first, `amd64@${DIGEST}`]);
    expect(keys).not.toContain(`amd64@sha256:${(1).toString(16).padStart(64, '0')}`);
    expect(Buffer.byteLength(written)).toBeLessThan(200 * 1024);
  });
});

describe('the cache tree: warmed in order', () => {
  it('the root first (at the link cap), then the node\'s leaf (no cap), the leaf asked for after the root is done', async () => {
    const steps: string[] = [];
    const warmer = (name: string): CacheWarmer => ({
      warm: async (images, arch, _onWait, rate) => {
        steps.push(`${name} start ${images.length} ${arch} ${rate ?? 'uncapped'}`);
        await new Promise((resolve) => setImmediate(resolve));
        steps.push(`${name} done`);
      },
      close: async () => void steps.push(`${name} closed`),
    });
    const [root, a, b] = [warmer('root'), warmer('leaf a'), warmer('leaf b')];
    let mine: CacheWarmer | undefined = a;
    const tree = new TreeCacheWarmer(root, () => mine, [a, b]);
    await tree.warm(['x', 'y'], 'amd64', () => undefined, 1024);
    expect(steps).toEqual(['root start 2 amd64 1024', 'root done', 'leaf a start 2 amd64 uncapped', 'leaf a done']);
    // A node whose label names no leaf: the root alone.
    mine = undefined;
    steps.length = 0;
    await tree.warm(['x'], 'amd64', () => undefined);
    expect(steps).toEqual(['root start 1 amd64 uncapped', 'root done']);
    steps.length = 0;
    await tree.close();
    expect(steps.sort()).toEqual(['leaf a closed', 'leaf b closed', 'root closed']);
  });
});
