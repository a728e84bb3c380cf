/**
 * The HTTP dispatcher registry traffic goes through: one pool per origin, direct or through
 * the proxy the environment names for it (src/net/proxy.ts). Trust is the OS store plus
 * --ca-file, for registries and an HTTPS proxy alike; certificates go unchecked only for the
 * origins of registries the user named insecure.
 */
import { createRequire } from 'node:module';
import { createSecureContext, type ConnectionOptions } from 'node:tls';
import type { Agent as AgentClass, Dispatcher, Pool as PoolClass, ProxyAgent as ProxyAgentClass } from 'undici';
import { isInsecureOrigin, type InsecureRegistries } from '../registry/scheme.js';
import { proxyFor } from './proxy.js';
import { readBundle, systemTrust } from './trust.js';

export interface DispatcherOptions {
  readonly insecureRegistries: InsecureRegistries;
  /** Extra CA bundle (PEM) trusted in addition to the OS trust store. */
  readonly caFile?: string;
  /** Headers and idle body: longer is a stall. */
  readonly stallTimeoutMs: number;
  /** TCP and TLS connection setup; default undici's 10 s. */
  readonly connectTimeoutMs?: number;
}

// undici's index loads fetch, WebSocket, cookies, caches and mocks too: about 95 ms of CPU at
// every start. The dispatchers are all registry traffic needs (undici has no exports map, so
// its lib paths are stable files of the pinned version).
// Requests go through `dispatchRequest`, undici's own `request` bound to a dispatcher.
const load = createRequire(import.meta.url);
const Agent = load('undici/lib/dispatcher/agent.js') as typeof AgentClass;
const Pool = load('undici/lib/dispatcher/pool.js') as typeof PoolClass;
const apiRequest = load('undici/lib/api/api-request.js') as (this: Dispatcher, options: Dispatcher.RequestOptions) => Promise<Dispatcher.ResponseData>;
/**
 * Only when the environment names a proxy: the whole of undici, whose index also gives every
 * dispatcher the API methods a ProxyAgent's tunnel (CONNECT) uses.
 */
const proxyAgent = (): typeof ProxyAgentClass => (load('undici') as typeof import('undici')).ProxyAgent;

/** undici's `request(url, options)`: one request through `dispatcher`, without loading undici's index. */
export function dispatchRequest(dispatcher: Dispatcher, url: string, options: Omit<Dispatcher.RequestOptions, 'origin' | 'path' | 'method'> & { method?: Dispatcher.HttpMethod }): Promise<Dispatcher.ResponseData> {
  const at = new URL(url);
  return apiRequest.call(dispatcher, { ...options, origin: at.origin, path: `${at.pathname}${at.search}`, method: options.method ?? 'GET' });
}

/** Connections per origin: enough for parallel blobs and ranged parts of big ones. */
const CONNECTIONS_PER_ORIGIN = 32;

export function createDispatcher(opts: DispatcherOptions): Dispatcher {
  // A missing --ca-file is bad input before any request.
  const extra = opts.caFile ? [readBundle(opts.caFile, '--ca-file')] : [];
  const timeout = opts.connectTimeoutMs !== undefined ? { timeout: opts.connectTimeoutMs } : {};
  // Parsed once for every connection (an OS store holds about 150 certificates), and only once
  // an origin needs it: a run against plain-HTTP registries never pays for it.
  let verified: ConnectionOptions | undefined;
  const verifiedTls = (): ConnectionOptions => (verified ??= { rejectUnauthorized: true, secureContext: createSecureContext({ ca: [...systemTrust().certificates, ...extra] }), ...timeout });
  const unchecked: ConnectionOptions = { rejectUnauthorized: false, ...timeout };
  const pool = { headersTimeout: opts.stallTimeoutMs, bodyTimeout: opts.stallTimeoutMs, connections: CONNECTIONS_PER_ORIGIN };
  return new Agent({
    ...pool,
    factory: (origin, options) => {
      const url = new URL(origin);
      const proxy = proxyFor(url);
      const tls = (): ConnectionOptions => (isInsecureOrigin(opts.insecureRegistries, url.href) ? unchecked : verifiedTls());
      // Plain-HTTP origins are forwarded (GET http://...), not tunnelled, as curl does: proxies
      // often allow CONNECT only to port 443. The proxy itself is always verified.
      if (proxy) return new (proxyAgent())({ ...pool, uri: proxy.href, requestTls: tls(), ...(proxy.protocol === 'https:' ? { proxyTls: verifiedTls() } : {}), proxyTunnel: false });
      return new Pool(origin, { ...options, ...pool, connect: url.protocol === 'https:' ? tls() : timeout });
    },
  });
}
