/**
 * Node's own agents for the way through a forward proxy, as curl takes it: an https origin through
 * a CONNECT tunnel (TLS to the registry inside it, checked as if direct), a plain-HTTP origin
 * forwarded (`GET http://host/path` to the proxy: proxies often allow CONNECT only to port 443).
 * The proxy is reached over http or https (an https proxy always verified); credentials in the
 * proxy's URL go in Proxy-Authorization. Node's client parses every answer natively: no
 * WebAssembly, so the agent can run V8 without its compilers (--jitless).
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest, type AgentOptions as HttpsAgentOptions } from 'node:https';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { timeoutError } from './rate-floor.js';

export interface ProxyRoute {
  readonly proxy: URL;
  /** Its Proxy-Authorization, from the credentials in its URL (`proxyAuthorization`). */
  readonly authorization: string | undefined;
  /** TLS for an https proxy (its trust: the OS store and --ca-file). */
  readonly proxyTls: ConnectionOptions;
  readonly connectTimeoutMs: number;
}

/** `Basic` credentials from the proxy URL's user and password, or none. */
export function proxyAuthorization(proxy: URL): string | undefined {
  if (!proxy.username && !proxy.password) return undefined;
  const user = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
  return `Basic ${Buffer.from(user).toString('base64')}`;
}

/**
 * An https agent whose connections are CONNECT tunnels through the proxy. A proxy that answers
 * other than 2xx fails the request with `Proxy response (STATUS)`, which registry/failure.ts words.
 */
export class TunnelAgent extends HttpsAgent {
  constructor(
    private readonly route: ProxyRoute,
    options: HttpsAgentOptions,
  ) {
    super(options);
  }

  override createConnection(options: Record<string, unknown>, done: (err: Error | null, socket?: Duplex) => void): undefined {
    const { proxy, authorization, proxyTls, connectTimeoutMs } = this.route;
    const authority = `${String(options.host)}:${String(options.port)}`;
    const https = proxy.protocol === 'https:';
    const request = (https ? httpsRequest : httpRequest)({
      host: proxy.hostname.replace(/^\[|\]$/g, ''),
      port: proxy.port || (https ? 443 : 80),
      method: 'CONNECT',
      path: authority,
      headers: { host: authority, ...(authorization ? { 'proxy-authorization': authorization } : {}) },
      agent: false,
      ...(https ? proxyTls : {}),
    });
    let settled = false;
    const finish = (err: Error | null, socket?: Duplex): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      done(err, socket);
    };
    const timer = setTimeout(() => {
      request.destroy(timeoutError('UND_ERR_CONNECT_TIMEOUT', `Connect Timeout Error (proxy ${proxy.host})`));
    }, connectTimeoutMs);
    request.once('error', (err) => finish(err));
    // Node gives every answer to CONNECT here, whatever its status.
    request.once('connect', (res: IncomingMessage, socket) => {
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 299) {
        // A refusal (403, 407, a login page): the request was not let through.
        socket.destroy();
        finish(new Error(`Proxy response (${status}) to CONNECT ${authority}`));
        return;
      }
      // TLS to the registry inside the tunnel, with the options the request gave (servername, trust).
      const tls = tlsConnect({ ...(options as ConnectionOptions), socket });
      finish(null, tls);
    });
    request.end();
    return undefined;
  }
}

/**
 * The pool that forwards plain-HTTP requests to the proxy itself, a connection a request: proxies
 * differ in keeping a client's connection after a forwarded answer (tinyproxy closes it without
 * saying so, and a request sent on it fails), and a new connection to the proxy is one local
 * handshake. Tunnels (https origins) are kept alive.
 */
export function forwardAgent(route: ProxyRoute, maxSockets: number): HttpAgent {
  const pool = { keepAlive: false, maxSockets };
  return route.proxy.protocol === 'https:' ? new HttpsAgent({ ...pool, ...route.proxyTls }) : new HttpAgent(pool);
}
