/**
 * The in-cluster cache on the test bed: the distribution registry the test bed builds (v3, what
 * `install --cache` runs as `registry:3`) in proxy mode on 127.0.0.1, its volume a tmpfs (so it
 * can be filled), its metrics on the host's own address; and the Service, pod and Endpoints that
 * let `wait` read those metrics through the API server as it would in a cluster.
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { dump } from 'js-yaml';
import { testbedBinaries } from '../cluster/binaries.js';
import type { TestCluster } from '../cluster/index.js';
import { Daemon, waitFor } from '../cluster/processes.js';
import type { RequestRecord } from '../harness/fault-proxy.js';
import { freePort } from '../harness/free-port.js';
import { withGoCollector } from '../harness/go-runtime.js';

const run = promisify(execFile);

export interface ProxyCacheOptions {
  /** Where its config, logs and volume go. */
  readonly dir: string;
  /** The upstream registry (the link in front of it). */
  readonly remoteUrl: string;
  /** The tmpfs volume's size; default 64 MiB. */
  readonly volumeBytes?: number;
}

export class ProxyCache {
  private logs = 0;

  private constructor(
    readonly binary: string,
    /** `registry --version`. */
    readonly version: string,
    readonly host: string,
    /** The debug server: Prometheus metrics at /metrics. */
    readonly metrics: string,
    readonly storage: string,
    private readonly dir: string,
    private readonly config: string,
    private daemon: Daemon | undefined,
  ) {}

  /**
   * How often its proxy fetches a missing blob upstream: distribution 2.x twice (storeLocal and
   * copyContent each fetch it), 3.x once (teed, distribution/distribution#3569).
   */
  get fetchesPerMiss(): number {
    return /\bv?2\.\d+\.\d+/.test(this.version.split(' ').at(-1) ?? '') ? 2 : 1;
  }

  /** The test bed's distribution v3, or PRESTAGE_CACHE_REGISTRY (e.g. Debian's docker-registry, 2.8). */
  static async start(options: ProxyCacheOptions): Promise<ProxyCache> {
    const binary = process.env.PRESTAGE_CACHE_REGISTRY ?? (await testbedBinaries()).distribution;
    const version = execFileSync(binary, ['--version'], { encoding: 'utf8' }).trim();
    const host = `127.0.0.1:${await freePort()}`;
    // The API server's service proxy refuses loopback endpoints: the metrics listen on the host's own address.
    const metrics = `${hostAddress()}:${await freePort()}`;
    const storage = join(options.dir, 'cache', 'storage');
    await mkdir(storage, { recursive: true });
    await run('mount', ['-t', 'tmpfs', '-o', `size=${options.volumeBytes ?? 64 * 1024 * 1024}`, 'prestage-cache-volume', storage]).catch((error: Error) => {
      throw new Error(`cannot mount a tmpfs for the cache's volume (needs root, as the test bed's image stores): ${error.message}`);
    });
    const config = join(options.dir, 'cache-config.yml');
    await writeFile(
      config,
      dump({
        version: 0.1,
        log: { level: 'info' },
        storage: { filesystem: { rootdirectory: storage }, delete: { enabled: true } },
        http: { addr: host, secret: randomBytes(16).toString('hex'), debug: { addr: metrics, prometheus: { enabled: true, path: '/metrics' } } },
        proxy: { remoteurl: options.remoteUrl },
      }),
    );
    const cache = new ProxyCache(binary, version, host, metrics, storage, options.dir, config, undefined);
    await cache.restart();
    return cache;
  }

  /** (Again) on its config: same address, same storage. */
  async restart(): Promise<void> {
    // distribution reads every REGISTRY_* variable as a config override; no OpenTelemetry export, as install --cache sets it.
    // Go's collector quiet, as for the tests' other registries (harness/go-runtime.ts).
    const env = withGoCollector({ ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('REGISTRY_'))), OTEL_TRACES_EXPORTER: 'none' });
    const daemon = Daemon.start({ name: 'distribution registry (proxy cache)', command: this.binary, args: ['serve', this.config], logPath: join(this.dir, `cache-${this.logs++}.log`), env });
    await daemon.whileRunning(waitFor(`the proxy cache on ${this.host}`, () => answers(`http://${this.host}/v2/`), 15_000, 50));
    this.daemon = daemon;
  }

  /** SIGKILL: no draining, as a crash or an OOM kill. */
  kill(): void {
    this.daemon?.killGroupNow();
  }

  async stop(): Promise<void> {
    await this.daemon?.stop(5_000);
    await run('umount', [this.storage]).catch(() => undefined);
  }
}

/** This machine's first non-loopback IPv4 address. */
export function hostAddress(): string {
  const address = Object.values(networkInterfaces()).flat().find((entry) => entry && entry.family === 'IPv4' && !entry.internal)?.address;
  if (!address) throw new Error('the cache tests need a non-loopback IPv4 address (the API server proxies to no loopback endpoint); this machine has none');
  return address;
}

/**
 * The cache as `install --cache` leaves it for `wait`: Service prestage-cache with a `metrics` port, backed by a pod.
 * The API server proxies only to endpoint addresses that are a pod's IP: a pod object stands for the cache's pod (no
 * kubelet runs it; its status names the host's address, where the test cache's debug server listens), and Endpoints
 * point at it, as the endpoints controller would write them.
 */
export async function exposeCacheMetrics(cluster: TestCluster, namespace: string, metrics: string, serviceAccount: string): Promise<void> {
  const [ip, port] = [metrics.split(':')[0]!, Number(metrics.split(':')[1])];
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  const pod = await core.createNamespacedPod({
    namespace,
    body: { metadata: { name: 'prestage-cache-0' }, spec: { nodeName: cluster.nodes[0]!.name, serviceAccountName: serviceAccount, automountServiceAccountToken: false, containers: [{ name: 'registry', image: 'docker.io/library/registry:3' }] } },
  });
  await core.patchNamespacedPodStatus(
    { name: 'prestage-cache-0', namespace, body: [{ op: 'add', path: '/status', value: { phase: 'Running', podIP: ip, podIPs: [{ ip }] } }] },
    setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
  );
  await core.createNamespacedService({ namespace, body: { metadata: { name: 'prestage-cache' }, spec: { ports: [{ name: 'metrics', port: 5001, targetPort: port, protocol: 'TCP' }] } } });
  await core.createNamespacedEndpoints({
    namespace,
    body: { metadata: { name: 'prestage-cache' }, subsets: [{ addresses: [{ ip, targetRef: { kind: 'Pod', namespace, name: 'prestage-cache-0', uid: pod.metadata!.uid! } }], ports: [{ name: 'metrics', port, protocol: 'TCP' }] }] },
  });
}

/** GET a URL to the end (the cache stores what it fetched once its answer is complete). */
export function fetchToEnd(url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume();
      res.once('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`GET ${url}: ${res.statusCode}`))));
    });
    req.once('error', reject);
    req.end();
  });
}

function answers(url: string): Promise<true | undefined> {
  return new Promise((resolve) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume();
      resolve(true);
    });
    req.setTimeout(1_000, () => req.destroy());
    req.once('error', () => resolve(undefined));
    req.end();
  });
}

const BLOB = /^\/v2\/.+\/blobs\/sha256:[a-f0-9]{64}$/;
/** The blob GETs among the requests a counting proxy saw. */
export const blobGets = (log: readonly RequestRecord[]) => log.filter((record) => record.method === 'GET' && BLOB.test(record.target));
export const bytesOf = (records: readonly RequestRecord[]) => records.reduce((total, record) => total + record.bytesSent, 0);

interface Blob {
  readonly digest: string;
  readonly size: number;
}

/** Compressed bytes of every blob (config and layers) the images need, each once; minus those in `held`. */
export function uniqueBlobs(components: ReadonlyArray<{ readonly config: Blob; readonly layers: readonly Blob[] }>, held = new Set<string>()): Map<string, number> {
  const blobs = new Map<string, number>();
  for (const component of components) {
    for (const blob of [component.config, ...component.layers]) if (!held.has(blob.digest)) blobs.set(blob.digest, blob.size);
  }
  return blobs;
}
export const sum = (blobs: Map<string, number>) => [...blobs.values()].reduce((total, size) => total + size, 0);

/** The agents' log lines (parsed, JSON only) with this message, logged at `since` (ms since the epoch) or later; `logs`: each node's log file. */
export async function agentsLogged(logs: ReadonlyMap<string, string>, message: string, since = 0): Promise<Array<{ node: string; line: Record<string, unknown> }>> {
  const found: Array<{ node: string; line: Record<string, unknown> }> = [];
  for (const [node, path] of logs) {
    for (const text of (await readFile(path, 'utf8')).split('\n')) {
      if (!text.startsWith('{')) continue;
      const line = JSON.parse(text) as Record<string, unknown>;
      if (line.msg === message && Number(line.time) >= since) found.push({ node, line });
    }
  }
  return found;
}
