/**
 * The HTTP dispatcher registry traffic goes through: one keep-alive pool per origin, direct
 * (node:http and node:https agents) or through the proxy the environment names for it
 * (src/net/proxy.ts; undici's ProxyAgent, loaded only then). Trust is the OS store plus
 * --ca-file, for registries and an HTTPS proxy alike; certificates go unchecked only for the
 * origins of registries the user named insecure.
 *
 * Direct requests use Node's own HTTP client: its parser is native, where undici compiles its
 * WebAssembly parser (and warms up its JavaScript) in every process, which cost a plan about a
 * sixth of its CPU. Stalls and connect timeouts fail with undici's error codes, so the retry
 * policy (registry/retry.ts) reads both paths alike.
 */
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { createSecureContext, type ConnectionOptions } from 'node:tls';
import type { Dispatcher as UndiciDispatcher, ProxyAgent as ProxyAgentClass } from 'undici';
import { proxyFor } from './proxy.js';
import { floorError, RateFloor, underRateFloor } from './rate-floor.js';
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

type Route = { readonly proxy: ProxyAgentClass } | { readonly https: boolean; readonly agent: HttpAgent };

/** Connections per origin: enough for parallel blobs and ranged parts of big ones. */
const CONNECTIONS_PER_ORIGIN = 32;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** A body dumped (not read) longer than this closes its connection instead of being drained. */
const DUMP_LIMIT = 128 * 1024;

/** undici's ProxyAgent and its request(); undici's index loads only when a proxy is configured. */
const load = createRequire(import.meta.url);
const undici = (): typeof import('undici') => load('undici') as typeof import('undici');

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
    if (!proxy) {
      const https = url.protocol === 'https:';
      return { https, agent: https ? (this.opts.insecureOrigin?.(url.href) === true ? this.unchecked : this.verifiedAgent()) : this.http };
    }
    const timeout = { timeout: this.connectTimeoutMs };
    const tls = this.opts.insecureOrigin?.(url.href) === true ? { rejectUnauthorized: false, ...timeout } : { ...this.verifiedTls(), ...timeout };
    // Plain-HTTP origins are forwarded (GET http://...), not tunnelled, as curl does: proxies
    // often allow CONNECT only to port 443. The proxy itself is always verified.
    const agent = new (undici().ProxyAgent)({
      headersTimeout: this.opts.stallTimeoutMs,
      bodyTimeout: this.opts.stallTimeoutMs,
      connections: CONNECTIONS_PER_ORIGIN,
      uri: proxy.href,
      requestTls: tls,
      ...(proxy.protocol === 'https:' ? { proxyTls: { ...this.verifiedTls(), ...timeout } } : {}),
      proxyTunnel: false,
    });
    return { proxy: agent };
  }

  request(url: string, init: RequestInit = {}): Promise<HttpResponse> {
    const at = new URL(url);
    let route = this.routes.get(at.origin);
    if (!route) this.routes.set(at.origin, (route = this.route(at)));
    if ('proxy' in route) return proxied(route.proxy, at, init, this.opts.stallTimeoutMs);
    return direct(route.https, route.agent, at, init, this.opts.stallTimeoutMs, this.connectTimeoutMs);
  }

  /** Ends every connection now: requests in flight fail. */
  async destroy(): Promise<void> {
    this.http.destroy();
    this.unchecked.destroy();
    this.verified?.destroy();
    await Promise.all([...this.routes.values()].map((r) => ('proxy' in r ? r.proxy.destroy() : undefined)));
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

function timeoutError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * One request on Node's client. A connection that is not up within `connectMs` fails with
 * UND_ERR_CONNECT_TIMEOUT; no byte for `stallMs`, or fewer than the rate floor's over a window
 * of `stallMs` once the request is sent (rate-floor.ts), fails with UND_ERR_HEADERS_TIMEOUT
 * before the headers and UND_ERR_BODY_TIMEOUT after them, unless the reader holds the body back.
 */
function direct(https: boolean, agent: HttpAgent, at: URL, init: RequestInit, stallMs: number, connectMs: number): Promise<HttpResponse> {
  return new Promise<HttpResponse>((resolve, reject) => {
    const options = {
      agent,
      protocol: at.protocol,
      hostname: at.hostname.replace(/^\[|\]$/g, ''),
      port: at.port,
      path: `${at.pathname}${at.search}`,
      method: init.method ?? 'GET',
      headers: (init.headers ?? {}) as OutgoingHttpHeaders,
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

/** Header names lower-cased; repeated headers as arrays, as undici gives them. */
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

/** Through undici's ProxyAgent, with undici's request(); its body under the rate floor (undici has none). */
async function proxied(agent: ProxyAgentClass, at: URL, init: RequestInit, stallMs: number): Promise<HttpResponse> {
  const res = await (agent as unknown as UndiciDispatcher).request({
    origin: at.origin,
    path: `${at.pathname}${at.search}`,
    method: init.method ?? 'GET',
    ...(init.headers ? { headers: init.headers } : {}),
    ...(init.body !== undefined ? { body: init.body } : {}),
    ...(init.signal ? { signal: init.signal } : {}),
  });
  return { statusCode: res.statusCode, headers: res.headers, body: underRateFloor(res.body, stallMs) };
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
