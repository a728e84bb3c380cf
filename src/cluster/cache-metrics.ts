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
}

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
export function cacheEvent(cache: string, since: CacheCounters, now: CacheCounters, time: string): CacheEvent {
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
  };
}

export type CacheReading = { readonly counters: CacheCounters } | { readonly absent: string } | { readonly error: string };

/** Reads the cache's counters through `services/<name>:metrics/proxy` in `namespace`. */
export class CacheMetricsReader {
  readonly name: string;
  private readonly path: string;

  constructor(private readonly client: KubeClient, namespace: string) {
    this.name = `${namespace}/${CACHE_NAME}`;
    this.path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/services/http:${CACHE_NAME}:${CACHE_METRICS_PORT_NAME}/proxy/metrics`;
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
