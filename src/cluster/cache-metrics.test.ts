import { describe, expect, it } from 'vitest';
import { cacheEvent, parseCacheMetrics } from './cache-metrics.js';

/** What distribution v3.1.2's debug server printed (test bed, one miss then one hit of a 5-byte blob), trimmed. */
const METRICS = `# HELP registry_proxy_hits_total The number of total proxy request hits
# TYPE registry_proxy_hits_total counter
registry_proxy_hits_total{type="blob"} 1
registry_proxy_hits_total{type="manifest"} 0
# TYPE registry_proxy_misses_total counter
registry_proxy_misses_total{type="blob"} 1
registry_proxy_misses_total{type="manifest"} 0
# TYPE registry_proxy_pulled_bytes_total counter
registry_proxy_pulled_bytes_total{type="blob"} 5
registry_proxy_pulled_bytes_total{type="manifest"} 0
# TYPE registry_proxy_pushed_bytes_total counter
registry_proxy_pushed_bytes_total{type="blob"} 10
registry_proxy_pushed_bytes_total{type="manifest"} 0
registry_proxy_requests_total{type="blob"} 2
registry_proxy_requests_total{type="manifest"} 0
registry_http_requests_total{code="200",method="get"} 2
`;

describe('the cache figures wait shows', () => {
  it('reads the proxy blob counters out of the Prometheus text format, manifests and other metrics left out', () => {
    expect(parseCacheMetrics(METRICS)).toEqual({ requests: 2, hits: 1, misses: 1, upstreamBytes: 5, servedBytes: 10 });
    // Large counters come as floats in exponent form.
    expect(parseCacheMetrics('registry_proxy_pulled_bytes_total{type="blob"} 1.2345678901e+10\n')?.upstreamBytes).toBe(12345678901);
  });

  it('says nothing of a registry that is not a proxy', () => {
    expect(parseCacheMetrics('registry_http_requests_total{code="200",method="get"} 2\n')).toBeUndefined();
    expect(parseCacheMetrics('')).toBeUndefined();
  });

  it('counts from the reading wait started with, and from zero after the cache restarted (its counters went down)', () => {
    const start = { requests: 10, hits: 4, misses: 6, upstreamBytes: 600, servedBytes: 1_000 };
    expect(cacheEvent('prestage/prestage-cache', start, { requests: 40, hits: 30, misses: 10, upstreamBytes: 1_000, servedBytes: 4_000 }, 't')).toEqual({
      type: 'cache', time: 't', cache: 'prestage/prestage-cache', upstreamBytes: 400, servedBytes: 3_000, hits: 26, misses: 4, hitRatio: 26 / 30,
    });
    expect(cacheEvent('c', start, { requests: 3, hits: 2, misses: 1, upstreamBytes: 100, servedBytes: 300 }, 't')).toMatchObject({ upstreamBytes: 100, servedBytes: 300, hits: 2, misses: 1 });
    expect(cacheEvent('c', start, start, 't')).not.toHaveProperty('hitRatio');
  });
});

describe('the cache tree: a line per cache', () => {
  it('tags the root and each leaf, and says what each holds: its fetched bytes since its start', () => {
    const since = { requests: 10, hits: 4, misses: 6, upstreamBytes: 600, servedBytes: 1_000 };
    const now = { requests: 30, hits: 20, misses: 10, upstreamBytes: 1_000, servedBytes: 5_000 };
    expect(cacheEvent('prestage/prestage-cache-leaf-zone-a', since, now, 't', 'leaf')).toEqual({
      type: 'cache', time: 't', cache: 'prestage/prestage-cache-leaf-zone-a', upstreamBytes: 400, servedBytes: 4_000, hits: 16, misses: 4, hitRatio: 0.8, tier: 'leaf', heldBytes: 1_000,
    });
    expect(cacheEvent('prestage/prestage-cache', since, now, 't')).not.toHaveProperty('tier');
  });
});
