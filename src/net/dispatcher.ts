/**
 * The HTTP dispatcher registry traffic goes through: one pool per origin, direct or through
 * the proxy the environment names for it (src/net/proxy.ts). Trust is the OS store plus
 * --ca-file, for registries and an HTTPS proxy alike; certificates go unchecked only for the
 * origins of registries the user named insecure.
 */
import { createSecureContext, type ConnectionOptions } from 'node:tls';
import { Agent, Pool, ProxyAgent, type Dispatcher } from 'undici';
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
      if (proxy) return new ProxyAgent({ ...pool, uri: proxy.href, requestTls: tls(), ...(proxy.protocol === 'https:' ? { proxyTls: verifiedTls() } : {}), proxyTunnel: false });
      return new Pool(origin, { ...options, ...pool, connect: url.protocol === 'https:' ? tls() : timeout });
    },
  });
}
