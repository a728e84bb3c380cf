/**
 * The HTTP dispatcher registry traffic goes through: one keep-alive pool per origin, on Node's own
 * client (node:http and node:https agents), direct or through the proxy the environment names for
 * it (src/net/proxy.ts; a CONNECT tunnel for https, forwarding for plain HTTP: net/proxy-agents.ts).
 * Trust is the OS store plus --ca-file, for registries and an HTTPS proxy alike; certificates go
 * unchecked only for the origins of registries the user named insecure.
 *
 * Node's parser is native, where undici compiles a WebAssembly parser (and warms up its
 * JavaScript) in every process: that cost a plan about a sixth of its CPU, and WebAssembly is
 * missing where V8 runs without its compilers (the agent's --jitless). Stalls and connect timeouts
 * fail with undici's error codes, which the retry policy (registry/retry.ts) reads.
 */
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { createSecureContext, type ConnectionOptions } from 'node:tls';
import { forwardAgent, proxyAuthorization, TunnelAgent, type ProxyRoute } from './proxy-agents.js';
import { proxyFor } from './proxy.js';
import { floorError, RateFloor, timeoutError } from './rate-floor.js';
import { readBundle, systemTrust } from './trust.js';

export interface DispatcherOptions {
  /** Origins whose certificates go unchecked (the registries named insecure); default none. */
  readonly insecureOrigin?: (origin: string) => boolean;
  /** Extra CA bundle (PEM) trusted in addition to the OS trust store. */
  readonly caFile?: string;
  /** Headers and idle body: longer is a stall. */
  readonly stallTimeoutMs: number;
  /** TCP and TLS connection setup; default 10 s. */
  readonly connectTimeoutMs?: number;
}

export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface RequestInit {
  readonly method?: HttpMethod;
  readonly headers?: Record<string, string>;
  readonly body?: Buffer | string | Readable;
  readonly signal?: AbortSignal;
}

export type ResponseHeaders = Record<string, string | string[] | undefined>;

export interface HttpResponse {
  readonly statusCode: number;
  /** Lower-case names; a header sent more than once is an array (every `WWW-Authenticate`). */
  readonly headers: ResponseHeaders;
  /** Read it, dump it or destroy it: the connection is reused only once the body ended. */
  readonly body: Readable;
}

/**
 * How an origin is reached: over `https` or not to the first hop, through `agent`; `forward` is
 * the proxy a plain-HTTP request is sent to (absolute URL, its Proxy-Authorization).
 */
interface Route {
  readonly https: boolean;
  readonly agent: HttpAgent;
  readonly forward?: ProxyRoute;
}

/** Connections per origin: enough for parallel blobs and ranged parts of big ones. */
const CONNECTIONS_PER_ORIGIN = 32;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** A body dumped (not read) longer than this closes its connection instead of being drained. */
const DUMP_LIMIT = 128 * 1024;

export class Dispatcher {
  private readonly http: HttpAgent;
  private readonly unchecked: HttpsAgent;
  private verified: HttpsAgent | undefined;
  private trusted: ConnectionOptions | undefined;
  /** How each origin is reached, decided at its first request. */
  private readonly routes = new Map<string, Route>();
  private readonly extraCa: string[];
  private readonly connectTimeoutMs: number;

  constructor(private readonly opts: DispatcherOptions) {
    // A missing --ca-file is bad input before any request.
    this.extraCa = opts.caFile ? [readBundle(opts.caFile, '--ca-file')] : [];
    this.connectTimeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const pool = { keepAlive: true, maxSockets: CONNECTIONS_PER_ORIGIN };
    this.http = new HttpAgent(pool);
    this.unchecked = new HttpsAgent({ ...pool, rejectUnauthorized: false });
  }

  /**
   * The OS store parsed once for every connection (about 150 certificates), and only once an
   * origin needs it: a run against plain-HTTP registries never pays for it.
   */
  private verifiedTls(): ConnectionOptions {
    return (this.trusted ??= { rejectUnauthorized: true, secureContext: createSecureContext({ ca: [...systemTrust().certificates, ...this.extraCa] }) });
  }

  private verifiedAgent(): HttpsAgent {
    return (this.verified ??= new HttpsAgent({ keepAlive: true, maxSockets: CONNECTIONS_PER_ORIGIN, ...this.verifiedTls() }));
  }

  /** Through the proxy the environment names for the origin, else direct with the origin's trust. */
  private route(url: URL): Route {
    const proxy = proxyFor(url);
    const https = url.protocol === 'https:';
    const insecure = this.opts.insecureOrigin?.(url.href) === true;
    if (!proxy) return { https, agent: https ? (insecure ? this.unchecked : this.verifiedAgent()) : this.http };
    // The proxy itself is always verified.
    const via: ProxyRoute = { proxy, authorization: proxyAuthorization(proxy), proxyTls: this.verifiedTls(), connectTimeoutMs: this.connectTimeoutMs };
    const pool = { keepAlive: true, maxSockets: CONNECTIONS_PER_ORIGIN };
    // Plain-HTTP origins are forwarded (GET http://...), not tunnelled, as curl does: proxies
    // often allow CONNECT only to port 443.
    if (!https) return { https: proxy.protocol === 'https:', agent: forwardAgent(via, CONNECTIONS_PER_ORIGIN), forward: via };
    return { https: true, agent: new TunnelAgent(via, { ...pool, ...(insecure ? { rejectUnauthorized: false } : this.verifiedTls()) }) };
  }

  request(url: string, init: RequestInit = {}): Promise<HttpResponse> {
    const at = new URL(url);
    let route = this.routes.get(at.origin);
    if (!route) this.routes.set(at.origin, (route = this.route(at)));
    return direct(route, at, init, this.opts.stallTimeoutMs, this.connectTimeoutMs);
  }

  /** Ends every connection now: requests in flight fail. */
  async destroy(): Promise<void> {
    this.http.destroy();
    this.unchecked.destroy();
    this.verified?.destroy();
    for (const route of this.routes.values()) route.agent.destroy();
  }

  /** For a client whose requests are all done: the same as destroy. */
  close(): Promise<void> {
    return this.destroy();
  }
}

export function createDispatcher(opts: DispatcherOptions): Dispatcher {
  return new Dispatcher(opts);
}

/** One request through `dispatcher`: its status and headers once they arrived; the body to read. */
export function dispatchRequest(dispatcher: Dispatcher, url: string, init: RequestInit = {}): Promise<HttpResponse> {
  return dispatcher.request(url, init);
}

/**
 * One request on Node's client. A connection that is not up within `connectMs` fails with
 * UND_ERR_CONNECT_TIMEOUT; no byte for `stallMs`, or fewer than the rate floor's over a window
 * of `stallMs` once the request is sent (rate-floor.ts), fails with UND_ERR_HEADERS_TIMEOUT
 * before the headers and UND_ERR_BODY_TIMEOUT after them, unless the reader holds the body back.
 */
function direct(route: Route, at: URL, init: RequestInit, stallMs: number, connectMs: number): Promise<HttpResponse> {
  const { https, agent, forward } = route;
  return new Promise<HttpResponse>((resolve, reject) => {
    const headers = (init.headers ?? {}) as OutgoingHttpHeaders;
    const firstHop = forward?.proxy ?? at;
    const options = {
      agent,
      protocol: https ? 'https:' : 'http:',
      hostname: firstHop.hostname.replace(/^\[|\]$/g, ''),
      port: firstHop.port,
      // Forwarded: the absolute URL, and the origin as Host.
      path: forward ? at.href : `${at.pathname}${at.search}`,
      method: init.method ?? 'GET',
      headers: forward ? { ...headers, host: at.host, ...(forward.authorization ? { 'proxy-authorization': forward.authorization } : {}) } : headers,
      ...(init.signal ? { signal: init.signal } : {}),
    };
    const req: ClientRequest = https ? httpsRequest(options) : httpRequest(options);
    let res: IncomingMessage | undefined;
    let finished = false;
    let socket: Socket | undefined;
    let connectTimer: NodeJS.Timeout | undefined;
    let floorTimer: NodeJS.Timeout | undefined;
    let floor: RateFloor | undefined;
    const heldBack = (): boolean => res !== undefined && res.readableLength >= res.readableHighWaterMark;
    // After the parser's own listener (added before 'socket'): the body is pushed when this runs.
    const onData = (chunk: Buffer): void => floor?.arrived(chunk.length, heldBack());
    const checkFloor = (): void => {
      if (res?.complete) clearInterval(floorTimer);
      if (finished || !socket || !floor || res?.complete || !floor.tooSlow(heldBack())) return;
      const error = floorError(res ? 'UND_ERR_BODY_TIMEOUT' : 'UND_ERR_HEADERS_TIMEOUT', stallMs);
      if (res) res.destroy(error);
      else req.destroy(error);
    };
    const onTimeout = (): void => {
      if (finished || !socket) return;
      if (!res) {
        req.destroy(timeoutError('UND_ERR_HEADERS_TIMEOUT', 'Headers Timeout Error'));
      } else if (res.readableLength >= res.readableHighWaterMark) {
        // The reader holds the body back (its buffer is full): not the server's stall.
        socket.setTimeout(stallMs);
      } else {
        res.destroy(timeoutError('UND_ERR_BODY_TIMEOUT', 'Body Timeout Error'));
      }
    };
    const cleanup = (): void => {
      if (finished) return;
      finished = true;
      if (connectTimer) clearTimeout(connectTimer);
      if (floorTimer) clearInterval(floorTimer);
      socket?.removeListener('timeout', onTimeout);
      socket?.removeListener('data', onData);
    };
    req.once('socket', (s: Socket) => {
      socket = s;
      s.setTimeout(stallMs);
      s.on('timeout', onTimeout);
      s.on('data', onData);
      if (s.connecting) {
        connectTimer = setTimeout(() => req.destroy(timeoutError('UND_ERR_CONNECT_TIMEOUT', 'Connect Timeout Error')), connectMs);
        s.once(https ? 'secureConnect' : 'connect', () => clearTimeout(connectTimer));
      }
    });
    req.once('error', (err) => {
      cleanup();
      reject(err);
    });
    req.once('close', cleanup);
    // The floor's windows start once the request is sent: an upload's own time is no stall.
    req.once('finish', () => {
      if (finished) return;
      floor = new RateFloor(stallMs);
      floorTimer = setInterval(checkFloor, stallMs).unref();
    });
    req.once('response', (incoming: IncomingMessage) => {
      res = incoming;
      if (connectTimer) clearTimeout(connectTimer);
      incoming.once('end', cleanup);
      incoming.once('close', cleanup);
      resolve({ statusCode: incoming.statusCode ?? 0, headers: headersOf(incoming.rawHeaders), body: incoming });
    });
    const { body } = init;
    if (body instanceof Readable) {
      body.once('error', (err) => req.destroy(err));
      body.pipe(req);
    } else {
      req.end(body);
    }
  });
}

/** Header names lower-cased; repeated headers as arrays (every WWW-Authenticate). */
function headersOf(raw: readonly string[]): ResponseHeaders {
  const headers: ResponseHeaders = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    const seen = headers[name];
    headers[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return headers;
}

/**
 * Discard a body so its connection can serve the next request (a long one closes it instead).
 * A body that breaks while discarded has nothing to say: this never rejects.
 */
export function dumpBody(body: Readable): Promise<void> {
  if (body.readableEnded || body.destroyed) return Promise.resolve();
  return new Promise<void>((resolve) => {
    let seen = 0;
    const onData = (chunk: Buffer): void => {
      seen += chunk.length;
      if (seen > DUMP_LIMIT) body.destroy();
    };
    const done = (): void => {
      body.off('data', onData);
      resolve();
    };
    body.on('data', onData);
    body.once('end', done);
    body.once('close', done);
    body.once('error', done);
  });
}
