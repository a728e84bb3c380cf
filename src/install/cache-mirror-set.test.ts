import { describe, expect, it } from 'vitest';
import { cacheMirrorSet, IMAGE_CONFIG_ADDED_ANNOTATION, withCacheRegistry, withoutCacheRegistry } from './cache-mirror-set.js';

const NONE = { insecureRegistries: [], allowedRegistries: [] };

describe('the cache on OpenShift: the mirror set and the Image config entries', () => {
  it('mirrors the upstream by digest through the cache first, the upstream still contacted after it', () => {
    const set = cacheMirrorSet('quay.io', '172.30.12.34:5000', { insecureRegistries: ['172.30.12.34:5000'], allowedRegistries: [] });
    expect(set.spec).toEqual({ imageDigestMirrors: [{ source: 'quay.io', mirrors: ['172.30.12.34:5000'], mirrorSourcePolicy: 'AllowContactingSource' }] });
    expect(JSON.parse((set.metadata.annotations as Record<string, string>)[IMAGE_CONFIG_ADDED_ANNOTATION]!)).toEqual({ insecureRegistries: ['172.30.12.34:5000'], allowedRegistries: [] });
  });

  it('adds the cache to the insecure registries, and to the allowed ones only where the cluster lists them; keeps what others put there', () => {
    expect(withCacheRegistry({}, '172.30.0.9:5000', NONE)).toEqual({ sources: { insecureRegistries: ['172.30.0.9:5000'] }, added: { insecureRegistries: ['172.30.0.9:5000'], allowedRegistries: [] } });
    const sources = { insecureRegistries: ['registry.corp:5000'], allowedRegistries: ['quay.io', 'registry.corp:5000'], containerRuntimeSearchRegistries: ['registry.corp'] };
    const { sources: next, added } = withCacheRegistry(sources, '172.30.0.9:5000', NONE);
    expect(next).toEqual({ insecureRegistries: ['registry.corp:5000', '172.30.0.9:5000'], allowedRegistries: ['quay.io', 'registry.corp:5000', '172.30.0.9:5000'], containerRuntimeSearchRegistries: ['registry.corp'] });
    expect(added).toEqual({ insecureRegistries: ['172.30.0.9:5000'], allowedRegistries: ['172.30.0.9:5000'] });
    // Out again: exactly what was added.
    expect(withoutCacheRegistry(next, added)).toEqual(sources);
  });

  it('does not claim an entry someone else made, so turning the cache off leaves it', () => {
    const sources = { insecureRegistries: ['172.30.0.9:5000'] };
    const { sources: next, added } = withCacheRegistry(sources, '172.30.0.9:5000', NONE);
    expect(next).toEqual(sources);
    expect(added).toEqual(NONE);
    expect(withoutCacheRegistry(next, added)).toEqual(sources);
  });

  it('again with the same address: unchanged, still recorded; with a new address (a reinstalled cache): the old entry of ours goes', () => {
    const first = withCacheRegistry({ insecureRegistries: ['registry.corp:5000'] }, '172.30.0.9:5000', NONE);
    const again = withCacheRegistry(first.sources, '172.30.0.9:5000', first.added);
    expect(again).toEqual(first);
    const moved = withCacheRegistry(first.sources, '172.30.7.7:5000', first.added);
    expect(moved.sources.insecureRegistries).toEqual(['registry.corp:5000', '172.30.7.7:5000']);
    expect(moved.added.insecureRegistries).toEqual(['172.30.7.7:5000']);
  });
});
