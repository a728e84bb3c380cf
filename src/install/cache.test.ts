import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { CACHE_METRICS_PORT, CACHE_PORT, cacheConfig, cacheManifests, cacheMirrorArg, cacheMirrorArgsOf, cacheObjectPaths, DEFAULT_CACHE_IMAGE, HOST_IP_ADDRESS, type CacheOptions } from './cache.js';
import { installManifests } from './manifests.js';
import { parseCacheMirror } from '../agent/cache-mirror.js';
import { CACHE_NAME } from '../api/names.js';

const base: CacheOptions = { namespace: 'prestage', upstream: 'quay.io', image: DEFAULT_CACHE_IMAGE, size: '100Gi' };
/** What these tests read of the objects cacheManifests and installManifests render. */
interface Container {
  readonly image: string;
  readonly args: string[];
  readonly env: Array<{ readonly name: string; readonly value?: string }>;
  readonly readinessProbe: { readonly httpGet: unknown };
  readonly livenessProbe: { readonly httpGet: unknown };
  readonly resources: { readonly requests: unknown; readonly limits: unknown };
}
interface Rendered {
  readonly data: Record<string, string>;
  readonly spec: {
    readonly replicas?: number;
    readonly strategy?: unknown;
    readonly type?: string;
    readonly ports: Array<{ readonly nodePort?: number }>;
    readonly selector: { readonly matchLabels?: unknown };
    readonly template: { readonly spec: { readonly containers: [Container, ...Container[]]; readonly volumes: Array<{ readonly name: string }>; readonly nodeSelector?: Record<string, string> } };
  };
}
const byKind = (manifests: ReturnType<typeof cacheManifests>) => new Map(manifests.map((manifest) => [manifest.kind, manifest as unknown as Rendered]));

describe('install --cache: the pull-through cache', () => {
  it('renders a ConfigMap (proxy mode), a PVC, a Recreate Deployment with probes and limits, and a ClusterIP Service, in the agent namespace', () => {
    const manifests = cacheManifests({ ...base, storageClass: 'fast' });
    expect(manifests.map((manifest) => `${manifest.kind}/${manifest.metadata.name}`)).toEqual([
      `ConfigMap/${CACHE_NAME}`, `PersistentVolumeClaim/${CACHE_NAME}`, `Deployment/${CACHE_NAME}`, `Service/${CACHE_NAME}`,
    ]);
    expect(manifests.every((manifest) => manifest.metadata.namespace === 'prestage')).toBe(true);
    const kinds = byKind(manifests);
    const config = yaml.load(kinds.get('ConfigMap')!.data['config.yml']!) as { proxy: unknown; http: { addr: string; debug: unknown; [field: string]: unknown }; storage: { filesystem: { rootdirectory: string } }; [field: string]: unknown };
    expect(config.proxy).toEqual({ remoteurl: 'https://quay.io' });
    expect(config.http.addr).toBe(`:${CACHE_PORT}`);
    // The proxy's hit and upstream-byte counters, for `wait`.
    expect(config.http.debug).toEqual({ addr: `:${CACHE_METRICS_PORT}`, prometheus: { enabled: true, path: '/metrics' } });
    expect(config.storage.filesystem.rootdirectory).toBe('/var/lib/registry');
    expect(kinds.get('PersistentVolumeClaim')!.spec).toEqual({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '100Gi' } }, storageClassName: 'fast' });
    const deployment = kinds.get('Deployment')!;
    expect(deployment.spec.replicas).toBe(1);
    expect(deployment.spec.strategy).toEqual({ type: 'Recreate' });
    const container = deployment.spec.template.spec.containers[0];
    expect(container.image).toBe('docker.io/library/registry:3');
    expect(container.readinessProbe.httpGet).toEqual({ path: '/', port: CACHE_PORT });
    expect(container.livenessProbe.httpGet).toEqual({ path: '/', port: CACHE_PORT });
    expect(container.resources.requests).toEqual({ cpu: '100m', memory: '128Mi' });
    expect(container.resources.limits).toEqual({ memory: '1Gi' });
    // No credentials: only tracing off (distribution 3 would export to localhost:4318).
    expect(container.env).toEqual([{ name: 'OTEL_TRACES_EXPORTER', value: 'none' }]);
    expect(deployment.spec.template.spec.volumes.find((volume) => volume.name === 'storage')).toEqual({ name: 'storage', persistentVolumeClaim: { claimName: CACHE_NAME } });
    expect(deployment.spec.template.spec.nodeSelector).toBeUndefined();
    const service = kinds.get('Service')!;
    expect(service.spec.type).toBe('ClusterIP');
    expect(service.spec.ports).toEqual([
      { name: 'registry', port: CACHE_PORT, targetPort: CACHE_PORT, protocol: 'TCP' },
      { name: 'metrics', port: CACHE_METRICS_PORT, targetPort: CACHE_METRICS_PORT, protocol: 'TCP' },
    ]);
    expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
  });

  it('upstream credentials: a Secret the registry reads from its environment, never in the config', () => {
    const manifests = cacheManifests({ ...base, credentials: { username: 'robot+prestage', password: 's3cret' } });
    const kinds = byKind(manifests);
    expect(kinds.get('Secret')!.data).toEqual({ username: Buffer.from('robot+prestage').toString('base64'), password: Buffer.from('s3cret').toString('base64') });
    expect(kinds.get('ConfigMap')!.data['config.yml']).not.toContain('s3cret');
    expect(kinds.get('Deployment')!.spec.template.spec.containers[0].env).toEqual([
      { name: 'OTEL_TRACES_EXPORTER', value: 'none' },
      { name: 'REGISTRY_PROXY_USERNAME', valueFrom: { secretKeyRef: { name: `${CACHE_NAME}-upstream`, key: 'username' } } },
      { name: 'REGISTRY_PROXY_PASSWORD', valueFrom: { secretKeyRef: { name: `${CACHE_NAME}-upstream`, key: 'password' } } },
    ]);
  });

  it('a hostPath on one node instead of a PVC; a NodePort when asked', () => {
    const kinds = byKind(cacheManifests({ ...base, hostPath: '/var/lib/prestage-cache', node: 'worker-0', nodePort: 30500 }));
    expect(kinds.has('PersistentVolumeClaim')).toBe(false);
    const spec = kinds.get('Deployment')!.spec.template.spec;
    expect(spec.nodeSelector).toEqual({ 'kubernetes.io/hostname': 'worker-0' });
    expect(spec.volumes.find((volume) => volume.name === 'storage')).toEqual({ name: 'storage', hostPath: { path: '/var/lib/prestage-cache', type: 'DirectoryOrCreate' } });
    expect(kinds.get('Service')!.spec.type).toBe('NodePort');
    expect(kinds.get('Service')!.spec.ports[0]!.nodePort).toBe(30500);
  });

  it('refuses bad flags with one line naming the flag', () => {
    const bad: Array<[Partial<CacheOptions>, RegExp]> = [
      [{ size: 'lots' }, /^--cache-size lots: not a Kubernetes quantity/],
      [{ hostPath: '/x' }, /^--cache-host-path and --cache-node go together/],
      [{ hostPath: 'relative', node: 'n' }, /^--cache-host-path relative: must be an absolute path/],
      [{ hostPath: '/x', node: 'n', storageClass: 'fast' }, /^--cache-storage-class is for the PVC/],
      [{ upstream: 'https://quay.io' }, /^--cache-upstream https:\/\/quay.io: not a registry host/],
      [{ nodePort: 80 }, /^--cache-node-port 80: must be in the default NodePort range/],
      [{ clusterIP: 'cache' }, /^--cache-cluster-ip cache: not an IP address/],
    ];
    for (const [change, message] of bad) {
      expect(() => cacheManifests({ ...base, ...change })).toThrow(BadInputError);
      expect(() => cacheManifests({ ...base, ...change })).toThrow(message);
    }
  });

  it('the agents get --cache-mirror with the address the host network reaches (ClusterIP, or each node its own address for a NodePort), which the agent parses', () => {
    const arg = cacheMirrorArg('quay.io', '172.30.12.34');
    expect(arg).toBe('--cache-mirror=quay.io=172.30.12.34:5000');
    expect(parseCacheMirror(arg.slice('--cache-mirror='.length))).toEqual({ source: 'quay.io', location: '172.30.12.34:5000' });
    const daemonSet = installManifests({ namespace: 'prestage', image: 'r/p:1', cacheMirrorArg: arg }).find((manifest) => manifest.kind === 'DaemonSet') as unknown as Rendered;
    const container = daemonSet.spec.template.spec.containers[0];
    expect(container.args).toContain('--cache-mirror=quay.io=172.30.12.34:5000');
    expect(container.env.some((env) => env.name === 'HOST_IP')).toBe(false);

    const nodePort = cacheMirrorArg('quay.io', HOST_IP_ADDRESS, 30500);
    expect(nodePort).toBe('--cache-mirror=quay.io=$(HOST_IP):30500');
    const withNodePort = (installManifests({ namespace: 'prestage', image: 'r/p:1', cacheMirrorArg: nodePort }).find((manifest) => manifest.kind === 'DaemonSet') as unknown as Rendered).spec.template.spec.containers[0];
    expect(withNodePort.env).toContainEqual({ name: 'HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } });
    // Kubernetes expands $(HOST_IP) before the agent sees it: what the agent parses then.
    expect(parseCacheMirror('quay.io=10.0.0.7:30500')).toEqual({ source: 'quay.io', location: '10.0.0.7:30500' });
    // Without a cache, the DaemonSet has no such flag.
    const plain = (installManifests({ namespace: 'prestage', image: 'r/p:1' }).find((manifest) => manifest.kind === 'DaemonSet') as unknown as Rendered).spec.template.spec.containers[0];
    expect(plain.args.some((a: string) => a.startsWith('--cache-mirror'))).toBe(false);
  });

  it('the config is plain YAML the registry reads', () => {
    expect(cacheConfig('https://registry.example.com:8443')).toContain('remoteurl: https://registry.example.com:8443');
  });

  it('--no-cache deletes every object cacheManifests renders (with credentials and a PVC), and finds the wiring in a DaemonSet', () => {
    const rendered = cacheManifests({ ...base, credentials: { username: 'u', password: 'p' } }).map((manifest) => `${manifest.kind.toLowerCase()}/${manifest.metadata.name}`);
    const deleted = cacheObjectPaths('prestage').map(({ kind, name }) => `${kind}/${name}`);
    expect(new Set(deleted)).toEqual(new Set(rendered));
    const agent = installManifests({ namespace: 'prestage', image: 'registry.example/prestage:1', agentArgs: ['--reserve=1Gi'], imageStore: '/var/lib/containers/storage', cacheMirrorArg: cacheMirrorArg('quay.io', '10.0.0.7') });
    const daemonSet = agent.find((manifest) => manifest.kind === 'DaemonSet') as Parameters<typeof cacheMirrorArgsOf>[0];
    expect(cacheMirrorArgsOf(daemonSet)).toEqual(['--cache-mirror=quay.io=10.0.0.7:5000']);
    expect(cacheMirrorArgsOf(undefined)).toEqual([]);
  });
});
