import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { cacheManifests, DEFAULT_CACHE_IMAGE, type CacheOptions } from './cache.js';
import { cacheLeafArg, checkCacheTree, leafManifests, leafNames } from './cache-leaves.js';
import { CACHE_NAME } from '../api/names.js';

const base: CacheOptions = { namespace: 'prestage', upstream: 'quay.io', image: DEFAULT_CACHE_IMAGE, size: '100Gi', storageClass: 'fast' };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;
const kinds = (manifests: Array<{ kind: string }>) => new Map(manifests.map((manifest) => [manifest.kind, manifest as Any]));

describe('install --cache: leaf caches', () => {
  it('a leaf: named objects, tier labels, a selector disjoint from the root Service, a proxy of the root over HTTP, its own PVC', () => {
    const leaf = kinds(leafManifests(base, { label: 'topology.kubernetes.io/zone', size: '20Gi' }, 'zone-a', '10.0.0.7'));
    const name = `${CACHE_NAME}-leaf-zone-a`;
    expect([...leaf.values()].map((m: Any) => `${m.kind}/${m.metadata.name}`)).toEqual([`ConfigMap/${name}`, `PersistentVolumeClaim/${name}`, `Deployment/${name}`, `Service/${name}`]);
    expect(leaf.get('Deployment').metadata.labels).toMatchObject({ 'prestage.dev/cache-tier': 'leaf', 'prestage.dev/cache-leaf': 'zone-a' });
    expect((yaml.load(leaf.get('ConfigMap').data['config.yml']) as Any).proxy).toEqual({ remoteurl: 'http://10.0.0.7:5000' });
    expect(leaf.get('PersistentVolumeClaim').spec).toEqual({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '20Gi' } }, storageClassName: 'fast' });
    const deployment = leaf.get('Deployment');
    expect(deployment.spec.strategy).toEqual({ type: 'Recreate' });
    expect(deployment.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions).toEqual([{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['zone-a'] }]);
    expect(deployment.spec.template.spec.containers[0].env).toEqual([{ name: 'OTEL_TRACES_EXPORTER', value: 'none' }]);
    const root = kinds(cacheManifests(base));
    expect(root.get('Deployment').metadata.labels['prestage.dev/cache-tier']).toBe('root');
    expect(root.get('Deployment').spec.selector.matchLabels).toEqual({ 'app.kubernetes.io/name': CACHE_NAME });
    // The root Service's selector must not match leaf pods, nor the leaf's root pods.
    const matches = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([key, value]) => labels[key] === value);
    expect(matches(root.get('Service').spec.selector, deployment.spec.template.metadata.labels)).toBe(false);
    expect(matches(leaf.get('Service').spec.selector, root.get('Deployment').spec.template.metadata.labels)).toBe(false);
    expect(matches(leaf.get('Service').spec.selector, deployment.spec.template.metadata.labels)).toBe(true);
    expect(cacheLeafArg('zone-a', '10.0.0.9')).toBe('--cache-leaf=zone-a=10.0.0.9:5000');
  });

  it('hashed leaves: leaf-0.., spread by preferred anti-affinity; a host path instead of a PVC', () => {
    expect(leafNames({ leaves: 3, size: '1Gi' })).toEqual(['leaf-0', 'leaf-1', 'leaf-2']);
    const leaf = kinds(leafManifests(base, { leaves: 2, size: '1Gi', hostPath: '/var/lib/leaf' }, 'leaf-1', '10.0.0.7'));
    expect(leaf.has('PersistentVolumeClaim')).toBe(false);
    const spec = leaf.get('Deployment').spec.template.spec;
    expect(spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey).toBe('kubernetes.io/hostname');
    expect(spec.volumes.find((volume: Any) => volume.name === 'storage')).toEqual({ name: 'storage', hostPath: { path: '/var/lib/leaf', type: 'DirectoryOrCreate' } });
  });

  it('label mode: one leaf per distinct value; too many values and bad flags are one-line errors', () => {
    const nodes: Array<{ labels: Record<string, string> }> = [{ labels: { z: 'b' } }, { labels: { z: 'a' } }, { labels: { z: 'a' } }, { labels: {} }];
    expect(leafNames({ label: 'z', size: '1Gi' }, nodes)).toEqual(['a', 'b']);
    const many = Array.from({ length: 65 }, (_, index) => ({ labels: { z: `v${index}` } }));
    expect(() => leafNames({ label: 'z', size: '1Gi' }, many)).toThrow(/65 values, at most 64 leaves/);
    const bad: Array<[Parameters<typeof checkCacheTree>[0], RegExp]> = [
      [{ leaves: 2, label: 'z', size: '1Gi' }, /^--cache-leaves and --cache-leaf-label exclude each other/],
      [{ leaves: 65, size: '1Gi' }, /^--cache-leaves 65: must be an integer 1..64/],
      [{ leaves: 0, size: '1Gi' }, /^--cache-leaves 0/],
      [{ leaves: 1, size: 'lots' }, /^--cache-leaf-size lots/],
      [{ leaves: 1, size: '1Gi', hostPath: 'rel' }, /^--cache-leaf-host-path rel: must be an absolute path/],
    ];
    for (const [tree, message] of bad) {
      expect(() => checkCacheTree(tree)).toThrow(BadInputError);
      expect(() => checkCacheTree(tree)).toThrow(message);
    }
  });
});
