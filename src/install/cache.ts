/**
 * `prestage install --cache`: an in-cluster pull-through cache of one upstream registry (quay.io
 * for a release), on the CNCF distribution registry in proxy mode (`proxy.remoteurl`), in the
 * agent's namespace: a Deployment (1 replica, Recreate: the storage is one volume), its storage
 * (a PVC, or a hostPath directory on one named node), a Service, and the upstream credentials in
 * a Secret (from the pull secret's entry for that host). The agents then get
 * `--cache-mirror UPSTREAM=<ClusterIP>:5000`.
 *
 * CRI-O pulls from the HOST network namespace and resolves names with the host's resolver, so
 * the cache is named by the Service's ClusterIP, never by a cluster DNS name. A ClusterIP answers
 * host-network clients where the service proxy handles host traffic (kube-proxy in iptables,
 * ipvs or nftables mode, OVN-Kubernetes: both do); `--cache-node-port` is the alternative where
 * it does not (the cache at a node's own address).
 */
import yaml from 'js-yaml';
import { BadInputError } from '../errors.js';
import type { Manifest } from './apply.js';
import { CACHE_METRICS_PORT_NAME, CACHE_NAME } from '../api/names.js';

export const CACHE_PORT = 5000;
/**
 * The registry's debug server: Prometheus metrics at `/metrics`, among them the proxy's
 * `registry_proxy_{requests,hits,misses,pulled_bytes,pushed_bytes}_total{type="blob"}`: what the
 * cache fetched upstream and what it served (`wait` reads them through the API server's service proxy).
 */
export const CACHE_METRICS_PORT = 5001;
/**
 * distribution 3: its proxy fetches a missing blob from upstream once and tees it into storage and the
 * answer (distribution/distribution#3569); 2.8 fetches it twice (measured on the test bed, test/cache.test.ts).
 */
export const DEFAULT_CACHE_IMAGE = 'docker.io/library/registry:3';
export const DEFAULT_CACHE_SIZE = '100Gi';
export const DEFAULT_CACHE_UPSTREAM = 'quay.io';

export interface CacheCredentials {
  readonly username: string;
  readonly password: string;
}

export interface CacheOptions {
  readonly namespace: string;
  /** The registry host cached: `quay.io`. */
  readonly upstream: string;
  readonly image: string;
  /** PVC size (`100Gi`); ignored with `hostPath`. */
  readonly size: string;
  readonly storageClass?: string;
  /** A directory on `node` instead of a PVC. */
  readonly hostPath?: string;
  readonly node?: string;
  /** Upstream credentials (a Secret the registry reads as REGISTRY_PROXY_USERNAME/PASSWORD). */
  readonly credentials?: CacheCredentials;
  /** The Service's ClusterIP, when chosen up front (rendering); else the API server picks it. */
  readonly clusterIP?: string;
  /** Expose on this port of every node too (Service type NodePort). */
  readonly nodePort?: number;
  /** Leaf caches under this one (src/install/cache-leaves.ts); needs --apply. */
  readonly tree?: CacheTreeOptions;
}

/** `--cache-leaves N` or `--cache-leaf-label LABEL`, and the leaves' storage. */
export interface CacheTreeOptions {
  readonly leaves?: number;
  readonly label?: string;
  /** Each leaf's PVC size; ignored with `hostPath`. */
  readonly size: string;
  /** A directory on whatever node a leaf's pod runs, instead of a PVC. */
  readonly hostPath?: string;
}

const QUANTITY = /^\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$/;

/** Checks the options a user typed: one-line BadInputErrors naming the flag. */
export function checkCacheOptions(options: CacheOptions): void {
  if (!/^[a-z0-9.-]+(:\d+)?$/i.test(options.upstream)) throw new BadInputError(`--cache-upstream ${options.upstream}: not a registry host[:port], e.g. quay.io`);
  if (!QUANTITY.test(options.size)) throw new BadInputError(`--cache-size ${options.size}: not a Kubernetes quantity, e.g. 100Gi`);
  if ((options.hostPath === undefined) !== (options.node === undefined)) throw new BadInputError('--cache-host-path and --cache-node go together: the directory and the node it is on');
  if (options.hostPath !== undefined && !options.hostPath.startsWith('/')) throw new BadInputError(`--cache-host-path ${options.hostPath}: must be an absolute path`);
  if (options.hostPath !== undefined && options.storageClass !== undefined) throw new BadInputError('--cache-storage-class is for the PVC; --cache-host-path uses none');
  if (options.clusterIP !== undefined && !/^(\d{1,3}\.){3}\d{1,3}$|^[0-9a-f:]+$/i.test(options.clusterIP)) throw new BadInputError(`--cache-cluster-ip ${options.clusterIP}: not an IP address`);
  if (options.nodePort !== undefined && !(Number.isInteger(options.nodePort) && options.nodePort >= 30000 && options.nodePort <= 32767)) {
    throw new BadInputError(`--cache-node-port ${options.nodePort}: must be in the default NodePort range 30000-32767`);
  }
}

/** The distribution registry's config: proxy mode, filesystem storage, no auth in front (in-cluster, digest pulls). */
export function cacheConfig(remoteUrl: string): string {
  return yaml.dump(
    {
      version: 0.1,
      log: { level: 'info', fields: { service: CACHE_NAME } },
      storage: {
        filesystem: { rootdirectory: '/var/lib/registry' },
        // The proxy's expiry scheduler deletes blobs it no longer keeps.
        delete: { enabled: true },
      },
      http: { addr: `:${CACHE_PORT}`, headers: { 'X-Content-Type-Options': ['nosniff'] }, debug: { addr: `:${CACHE_METRICS_PORT}`, prometheus: { enabled: true, path: '/metrics' } } },
      health: { storagedriver: { enabled: true, interval: '10s', threshold: 3 } },
      // Credentials come from the environment (REGISTRY_PROXY_USERNAME/PASSWORD), never from this ConfigMap.
      proxy: { remoteurl: remoteUrl },
    },
    { lineWidth: -1 },
  );
}

/** The labels every cache object has (root and leaves). */
export function cacheLabels(upstream: string): Record<string, string> {
  return { 'app.kubernetes.io/name': CACHE_NAME, 'app.kubernetes.io/part-of': 'prestage', 'prestage.dev/cache-upstream': upstream.replace(/:/g, '-') };
}

/** In apply order. */
export function cacheManifests(options: CacheOptions): Manifest[] {
  checkCacheOptions(options);
  const { namespace } = options;
  // The tier label is not in the selector: a Deployment's selector is immutable, and earlier installs have none.
  const labels = { ...cacheLabels(options.upstream), 'prestage.dev/cache-tier': 'root' };
  const selector = { 'app.kubernetes.io/name': CACHE_NAME };
  const secretName = `${CACHE_NAME}-upstream`;
  const manifests: Manifest[] = [
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: CACHE_NAME, namespace, labels }, data: { 'config.yml': cacheConfig(`https://${options.upstream}`) } },
  ];
  if (options.credentials) {
    manifests.push({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secretName, namespace, labels },
      type: 'Opaque',
      data: { username: Buffer.from(options.credentials.username).toString('base64'), password: Buffer.from(options.credentials.password).toString('base64') },
    });
  }
  if (options.hostPath === undefined) {
    manifests.push({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: CACHE_NAME, namespace, labels },
      spec: {
        accessModes: ['ReadWriteOnce'],
        resources: { requests: { storage: options.size } },
        ...(options.storageClass !== undefined ? { storageClassName: options.storageClass } : {}),
      },
    });
  }
  manifests.push(
    cacheDeployment({
      name: CACHE_NAME,
      namespace,
      labels,
      selector,
      image: options.image,
      ...(options.credentials ? { secretName } : {}),
      ...(options.node !== undefined ? { nodeSelector: { 'kubernetes.io/hostname': options.node } } : {}),
      ...(options.hostPath !== undefined ? { hostPath: options.hostPath } : {}),
    }),
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: CACHE_NAME, namespace, labels },
      spec: {
        type: options.nodePort !== undefined ? 'NodePort' : 'ClusterIP',
        selector,
        ...(options.clusterIP !== undefined ? { clusterIP: options.clusterIP } : {}),
        ports: [
          { name: 'registry', port: CACHE_PORT, targetPort: CACHE_PORT, protocol: 'TCP', ...(options.nodePort !== undefined ? { nodePort: options.nodePort } : {}) },
          // `wait`'s cache figures, read through the API server's service proxy.
          { name: CACHE_METRICS_PORT_NAME, port: CACHE_METRICS_PORT, targetPort: CACHE_METRICS_PORT, protocol: 'TCP' },
        ],
      },
    },
  );
  return manifests;
}

/** What differs between the root's Deployment and a leaf's. */
export interface CacheDeploymentOptions {
  /** The Deployment's, ConfigMap's and PVC's name. */
  readonly name: string;
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly selector: Readonly<Record<string, string>>;
  readonly image: string;
  /** The upstream credentials' Secret (root only). */
  readonly secretName?: string;
  readonly nodeSelector?: Readonly<Record<string, string>>;
  readonly affinity?: unknown;
  readonly hostPath?: string;
}

/** A cache's Deployment: 1 replica, Recreate, the same probes, limits and security for root and leaves. */
export function cacheDeployment(options: CacheDeploymentOptions): Manifest {
  const { name, namespace, labels, secretName } = options;
  const probe = (periodSeconds: number, failureThreshold: number) => ({ httpGet: { path: '/', port: CACHE_PORT }, periodSeconds, failureThreshold, timeoutSeconds: 5 });
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace, labels },
    spec: {
      replicas: 1,
      // One volume (RWO PVC or a node's directory): the old pod must be gone before the new one mounts it.
      strategy: { type: 'Recreate' },
      selector: { matchLabels: options.selector },
      template: {
        metadata: { labels },
        spec: {
          // No API access: the cache needs none.
          automountServiceAccountToken: false,
          ...(options.nodeSelector !== undefined ? { nodeSelector: options.nodeSelector } : {}),
          ...(options.affinity !== undefined ? { affinity: options.affinity } : {}),
          securityContext: { runAsNonRoot: false, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'registry',
              image: options.image,
              args: ['serve', '/etc/distribution/config.yml'],
              env: [
                // distribution 3 exports OpenTelemetry traces to localhost:4318 unless told not to (an error line every few seconds).
                { name: 'OTEL_TRACES_EXPORTER', value: 'none' },
                ...(secretName !== undefined
                  ? [
                      { name: 'REGISTRY_PROXY_USERNAME', valueFrom: { secretKeyRef: { name: secretName, key: 'username' } } },
                      { name: 'REGISTRY_PROXY_PASSWORD', valueFrom: { secretKeyRef: { name: secretName, key: 'password' } } },
                    ]
                  : []),
              ],
              ports: [
                { name: 'registry', containerPort: CACHE_PORT },
                { name: CACHE_METRICS_PORT_NAME, containerPort: CACHE_METRICS_PORT },
              ],
              // `/` answers 200 once the registry serves; the storage health check makes `/` fail when the volume does.
              readinessProbe: probe(5, 3),
              livenessProbe: { ...probe(20, 6), initialDelaySeconds: 10 },
              resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '1Gi' } },
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, readOnlyRootFilesystem: true },
              volumeMounts: [
                { name: 'config', mountPath: '/etc/distribution', readOnly: true },
                { name: 'storage', mountPath: '/var/lib/registry' },
                { name: 'tmp', mountPath: '/tmp' },
              ],
            },
          ],
          volumes: [
            { name: 'config', configMap: { name } },
            { name: 'tmp', emptyDir: {} },
            options.hostPath !== undefined
              ? { name: 'storage', hostPath: { path: options.hostPath, type: 'DirectoryOrCreate' } }
              : { name: 'storage', persistentVolumeClaim: { claimName: name } },
          ],
        },
      },
    },
  };
}

/** The two ports every cache's Service has. */
export function cacheServicePorts(): Array<Record<string, unknown>> {
  return [
    { name: 'registry', port: CACHE_PORT, targetPort: CACHE_PORT, protocol: 'TCP' },
    { name: CACHE_METRICS_PORT_NAME, port: CACHE_METRICS_PORT, targetPort: CACHE_METRICS_PORT, protocol: 'TCP' },
  ];
}

/** The agent flag that wires each node to the cache at `address` (a ClusterIP, or a node address with the NodePort). */
export function cacheMirrorArg(upstream: string, address: string, port = CACHE_PORT): string {
  return `--cache-mirror=${upstream}=${address.includes(':') && !address.startsWith('$(') ? `[${address}]` : address}:${port}`;
}

/** With a NodePort, each agent names its own node's address: the DaemonSet sets HOST_IP, and Kubernetes expands `$(HOST_IP)` in args. */
export const HOST_IP_ADDRESS = '$(HOST_IP)';

/** The cache's objects, as `cacheManifests` names them: what `install --no-cache` deletes (absent ones skipped). */
export function cacheObjectPaths(namespace: string): Array<{ kind: string; name: string; path: string }> {
  const ns = `namespaces/${namespace}`;
  return [
    { kind: 'deployment', name: CACHE_NAME, path: `/apis/apps/v1/${ns}/deployments/${CACHE_NAME}` },
    { kind: 'service', name: CACHE_NAME, path: `/api/v1/${ns}/services/${CACHE_NAME}` },
    { kind: 'configmap', name: CACHE_NAME, path: `/api/v1/${ns}/configmaps/${CACHE_NAME}` },
    { kind: 'secret', name: `${CACHE_NAME}-upstream`, path: `/api/v1/${ns}/secrets/${CACHE_NAME}-upstream` },
    { kind: 'persistentvolumeclaim', name: CACHE_NAME, path: `/api/v1/${ns}/persistentvolumeclaims/${CACHE_NAME}` },
  ];
}

/** The `--cache-mirror` flags of a rendered or running DaemonSet's agent container. */
export function cacheMirrorArgsOf(daemonSet: { spec?: { template?: { spec?: { containers?: Array<{ args?: string[] }> } } } } | undefined): string[] {
  return (daemonSet?.spec?.template?.spec?.containers ?? []).flatMap((container) => container.args ?? []).filter((arg) => arg.startsWith('--cache-mirror='));
}

/** The cache tree's flags (`--cache-leaf`, `--cache-leaf-label`) of a rendered or running DaemonSet's agent container. */
export function cacheTreeArgsOf(daemonSet: Parameters<typeof cacheMirrorArgsOf>[0]): string[] {
  return (daemonSet?.spec?.template?.spec?.containers ?? []).flatMap((container) => container.args ?? []).filter((arg) => arg.startsWith('--cache-leaf=') || arg.startsWith('--cache-leaf-label='));
}
