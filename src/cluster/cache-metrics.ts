/**
 * What the in-cluster cache (`install --cache`) fetched upstream and served, for `wait`: the
 * distribution registry's proxy counters from its debug server's Prometheus metrics, read
 * through the API server's service proxy (the cache's ClusterIP is not reachable from where
 * `wait` runs; the API server is). Blob counters only: the bytes that matter on a slow link.
 */
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { CACHE_METRICS_PORT_NAME, CACHE_NAME } from '../api/names.js';

/** The proxy's blob counters since the cache started (`registry_proxy_*_total{type="blob"}`). */
export interface CacheCounters {
  readonly requests: number;
  readonly hits: number;
  readonly misses: number;
  /** Fetched from the upstream registry: what crossed the link. */
  readonly upstreamBytes: number;
  /** Sent to the nodes. */
  readonly servedBytes: number;
}

/** A `wait` event: the cache's figures since `wait` started. */
export interface CacheEvent {
  readonly type: 'cache';
  readonly time: string;
  readonly cache: string;
  readonly upstreamBytes: number;
  readonly servedBytes: number;
  readonly hits: number;
  readonly misses: number;
  /** hits / (hits + misses), when there were any. */
  readonly hitRatio?: number;
  /** In a cache tree: the root (on the link) or a leaf (fed by the root). */
  readonly tier?: CacheTier;
  /**
   * What it stores: the blob bytes it fetched since its process started (each miss is stored;
   * its expiry's deletions are not counted, so after a TTL this is an upper bound).
   */
  readonly heldBytes?: number;
}

export type CacheTier = 'root' | 'leaf';
/** The label `install` puts on the cache tree's objects: `root` or `leaf`. */
export const CACHE_TIER_LABEL = 'prestage.dev/cache-tier';

const COUNTERS: Record<string, keyof CacheCounters> = {
  registry_proxy_requests_total: 'requests',
  registry_proxy_hits_total: 'hits',
  registry_proxy_misses_total: 'misses',
  registry_proxy_pulled_bytes_total: 'upstreamBytes',
  registry_proxy_pushed_bytes_total: 'servedBytes',
};
const SAMPLE = /^(registry_proxy_[a-z_]+_total)\{([^}]*)\}\s+(\S+)/;

/** The blob counters out of the Prometheus text format; undefined when it has none (not a proxy, or another engine). */
export function parseCacheMetrics(text: string): CacheCounters | undefined {
  const counters: Record<keyof CacheCounters, number> = { requests: 0, hits: 0, misses: 0, upstreamBytes: 0, servedBytes: 0 };
  let found = false;
  for (const line of text.split('\n')) {
    const sample = SAMPLE.exec(line);
    if (!sample) continue;
    const field = COUNTERS[sample[1]!];
    const value = Number(sample[3]);
    if (!field || !/(^|,)type="blob"(,|$)/.test(sample[2]!) || !Number.isFinite(value)) continue;
    counters[field] = value;
    found = true;
  }
  return found ? counters : undefined;
}

/** The figures between two readings; a counter that went down means the cache restarted: count from zero. */
export function cacheEvent(cache: string, since: CacheCounters, now: CacheCounters, time: string, tier?: CacheTier): CacheEvent {
  const restarted = (Object.keys(now) as Array<keyof CacheCounters>).some((key) => now[key] < since[key]);
  const base = restarted ? { requests: 0, hits: 0, misses: 0, upstreamBytes: 0, servedBytes: 0 } : since;
  const hits = now.hits - base.hits;
  const misses = now.misses - base.misses;
  return {
    type: 'cache',
    time,
    cache,
    upstreamBytes: now.upstreamBytes - base.upstreamBytes,
    servedBytes: now.servedBytes - base.servedBytes,
    hits,
    misses,
    ...(hits + misses > 0 ? { hitRatio: hits / (hits + misses) } : {}),
    ...(tier ? { tier, heldBytes: now.upstreamBytes } : {}),
  };
}

export type CacheReading = { readonly counters: CacheCounters } | { readonly absent: string } | { readonly error: string };

/** Reads the cache's counters through `services/<name>:metrics/proxy` in `namespace`. */
export class CacheMetricsReader {
  readonly name: string;
  private readonly path: string;

  constructor(
    private readonly client: KubeClient,
    namespace: string,
    service: string = CACHE_NAME,
    /** Set when the cache is part of a tree (it has leaves). */
    readonly tier?: CacheTier,
  ) {
    this.name = `${namespace}/${service}`;
    this.path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/services/http:${encodeURIComponent(service)}:${CACHE_METRICS_PORT_NAME}/proxy/metrics`;
  }

  /**
   * Absent when there is no such Service (no cache installed), or when this user may not read
   * it (`get services/proxy`: the figures are extra; a user without them waits as before). Never throws.
   */
  async read(): Promise<CacheReading> {
    try {
      const counters = parseCacheMetrics(await this.client.getText(this.path));
      return counters ? { counters } : { error: `${this.name} metrics have no registry_proxy_* counters (distribution 3 in proxy mode has them; 2.x keeps them in expvar)` };
    } catch (error) {
      if (error instanceof KubeApiError && (error.status === 404 || error.status === 403)) return { absent: (error as Error).message.split('\n')[0]! };
      return { error: (error as Error).message.split('\n')[0]! };
    }
  }
}

/** Leaf Services read at most: `install` makes at most MAX_CACHE_LEAVES. */
const MAX_LEAF_SERVICES = 100;

/**
 * The readers of every cache of the tree in `namespace`: the root, and each leaf's Service
 * (labelled `prestage.dev/cache-tier=leaf`); the root alone when there are no leaves (or they cannot be listed).
 */
export async function cacheTreeReaders(client: KubeClient, namespace: string): Promise<CacheMetricsReader[]> {
  let leaves: string[] = [];
  try {
    const list = await client.request<{ items?: Array<{ metadata?: { name?: unknown } }> }>('GET', `/api/v1/namespaces/${encodeURIComponent(namespace)}/services?labelSelector=${encodeURIComponent(`${CACHE_TIER_LABEL}=leaf`)}&limit=${MAX_LEAF_SERVICES}`);
    leaves = (list.items ?? []).map((item) => item.metadata?.name).filter((name): name is string => typeof name === 'string' && /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name)).sort();
  } catch {
    // No right to list Services: the root's figures alone, as before.
  }
  if (leaves.length === 0) return [new CacheMetricsReader(client, namespace)];
  return [new CacheMetricsReader(client, namespace, CACHE_NAME, 'root'), ...leaves.map((name) => new CacheMetricsReader(client, namespace, name, 'leaf'))];
}
