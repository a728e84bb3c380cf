/**
 * A transparent HTTP reverse proxy in front of a test registry that misbehaves on demand:
 * added latency, a shared bandwidth cap, injected error statuses, broken bodies, and
 * Quay-style blob redirects to a second origin (the "cdn") that behaves like S3.
 *
 * Transparency: the registry builds its `Location` URLs from `X-Forwarded-Host` and
 * `X-Forwarded-Proto`, so they point back at the proxy without rewriting. Token realms in
 * `WWW-Authenticate` are left alone: clients fetch tokens from the issuer directly.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import {
  Agent as HttpAgent,
  createServer,
  request as httpRequest,
  STATUS_CODES,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';

export type Origin = 'registry' | 'cdn';

/** What a fault rule's predicate sees. */
export interface ProxiedRequest {
  readonly origin: Origin;
  readonly method: string;
  /** Request target: path and query. */
  readonly target: string;
  readonly headers: IncomingHttpHeaders;
}

export type Fault =
  /** Answer at once, without asking upstream, with an nginx-style HTML error page. */
  | { kind: 'status'; status: number; /** seconds, sent as `Retry-After` */ retryAfter?: number }
  /**
   * Send the headers and `afterBytes` of the body, then reset the connection (TCP RST).
   * Node clients see a reset after data as EOF (libuv), like a truncation; only a later
   * write on the socket fails with ECONNRESET.
   */
  | { kind: 'reset'; afterBytes: number }
  /** Send the headers and `afterBytes` of the body, then close cleanly (FIN): short of Content-Length. */
  | { kind: 'truncate'; afterBytes: number }
  /** Send the headers and `afterBytes` of the body, then go silent until the client gives up. */
  | { kind: 'stall'; afterBytes: number }
  /** Flip every bit of one body byte (default: the middle one); the length stays right. */
  | { kind: 'corrupt'; atByte?: number }
  /** Drop the request's `Range` header, as registries and caches without range support do: the whole body, 200. */
  | { kind: 'ignore-range' };

export interface FaultRule {
  /** A regex tested on the request target, or a predicate; default: every request. */
  match?: RegExp | ((request: ProxiedRequest) => boolean);
  /** How many matching requests get the fault; default 1, `Infinity` for all. */
  times?: number;
  fault: Fault;
}

export interface RequestRecord {
  readonly origin: Origin;
  readonly method: string;
  readonly target: string;
  readonly range: string | undefined;
  readonly fault: Fault['kind'] | undefined;
  /** When the request arrived (ms since the epoch). */
  readonly startedAt: number;
  /** Whether the exchange is over: response sent in full, cut, or the client gone. */
  ended: boolean;
  /** 0 until the response headers are sent. */
  status: number;
  /** Response body bytes written so far. */
  bytesSent: number;
}

export interface ProxyStats {
  /** Requests received on both origins. */
  readonly requests: number;
  /** Response body bytes written on both origins: what clients read. */
  readonly bytesSent: number;
  /** `performance.now()` when the first and the last body byte were written; 0 before any. */
  readonly firstByteAt: number;
  readonly lastByteAt: number;
  /**
   * Response body bytes written on both origins per whole second: key `Math.floor(Date.now() / 1000)`
   * when the bytes were written, value their sum; seconds without a byte are absent. What
   * `linkWindows` reads.
   */
  readonly perSecond: ReadonlyMap<number, number>;
  /** One record per request, in arrival order, updated while the response is sent. */
  readonly log: readonly RequestRecord[];
}

export interface FaultProxy {
  /** `127.0.0.1:PORT` of the registry origin. */
  readonly host: string;
  /** `http://127.0.0.1:PORT` of the registry origin. */
  readonly url: string;
  /** `http://127.0.0.1:PORT` of the cdn origin that redirected blobs go to. */
  readonly cdnUrl: string;
  readonly stats: ProxyStats;
  inject(rule: FaultRule): void;
  clearFaults(): void;
  /**
   * One network round trip: added before every request on both origins is forwarded, and
   * once more on the first request of each new connection (its TCP handshake).
   */
  setLatency(ms: number): void;
  /** Cap the response body throughput of all connections together; `null` lifts it. */
  setBandwidth(bytesPerSecond: number | null): void;
  /**
   * Cap each response on its own as well (a flow held back by its TCP window over a long round
   * trip, or a CDN's per-connection limit); `null` lifts it. Applies to responses started after.
   */
  setFlowBandwidth(bytesPerSecond: number | null): void;
  /**
   * A TCP window of `bytes` on every connection, as a real link has: body pieces are written
   * only while the bytes in flight (written by the proxy, not yet read by the client: the proxy
   * socket's tx_queue and the client socket's rx_queue in Linux's /proc/net/tcp) leave room. Over
   * loopback the kernel takes megabytes a paced client has not asked for (a 4 MiB send buffer, a
   * receive buffer that grows as the client drains it in bursts), which `stats` would count as
   * sent though a link would not have carried them yet. For tests of a client's own pacing
   * (`--link-rate`), whose client runs on this host; `null` lifts it. Applies to pieces written after.
   */
  setWindow(bytes: number | null): void;
  /** Answer registry blob GETs the client may read with a 307 to the cdn, as Quay does. */
  redirectBlobsToCdn(enabled: boolean): void;
  /** Count each response's status line and headers in `stats` too, as the bytes a link carries (off: bodies only). */
  countHeads(enabled: boolean): void;
  resetStats(): void;
  stop(): Promise<void>;
}

export interface FaultProxyOptions {
  /** `http(s)://host:port` of the registry. */
  upstream: string;
  /** CA for an https upstream. */
  caFile?: string;
  /** Also answer on the host's other addresses (`0.0.0.0`), e.g. for pods; `host` and `url` stay on 127.0.0.1. */
  listenAddress?: string;
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const upstream = new URL(options.upstream);
  const ca = options.caFile ? await readFile(options.caFile) : undefined;
  const proxy = new FaultInjectingProxy(upstream, ca);
  await proxy.listen(options.listenAddress);
  return proxy;
}

const BLOB_PATH = /^\/v2\/(.+)\/blobs\/([a-z0-9]+):([a-f0-9]+)$/;
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection',
  'te', 'trailer', 'transfer-encoding', 'upgrade',
]);
const S3_ONE_AUTH_MESSAGE = 'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, '
  + 'Signature query string parameter or the Authorization header should be specified';

interface ActiveRule {
  readonly match: FaultRule['match'];
  remaining: number;
  readonly fault: Fault;
}

/** A presigned cdn URL stands for one upstream blob read with the original credentials. */
interface CdnObject {
  readonly cdnPath: string;
  readonly upstreamPath: string;
  readonly authorization: string | undefined;
}

class FaultInjectingProxy implements FaultProxy {
  host = '';
  url = '';
  cdnUrl = '';
  private readonly registryServer: Server;
  private readonly cdnServer: Server;
  private readonly agent: HttpAgent;
  private readonly bandwidth = new SharedBandwidth();
  private flowBytesPerSecond: number | null = null;
  private window: number | null = null;
  private headsCounted = false;
  private readonly inFlight = new InFlight();
  private rules: ActiveRule[] = [];
  private latencyMs = 0;
  private readonly handshaken = new WeakSet<object>();
  private cdnRedirects = false;
  private readonly cdnObjects = new Map<string, CdnObject>();
  private counters = emptyCounters();

  constructor(private readonly upstream: URL, ca: Buffer | undefined) {
    this.agent = upstream.protocol === 'https:' ? new HttpsAgent({ keepAlive: true, ca }) : new HttpAgent({ keepAlive: true });
    this.registryServer = createServer((req, res) => this.handle('registry', req, res));
    this.cdnServer = createServer((req, res) => this.handle('cdn', req, res));
  }

  get stats(): ProxyStats {
    return this.counters;
  }

  async listen(address = '127.0.0.1'): Promise<void> {
    const [registryPort, cdnPort] = await Promise.all([listen(this.registryServer, address), listen(this.cdnServer, address)]);
    this.host = `127.0.0.1:${registryPort}`;
    this.url = `http://${this.host}`;
    this.cdnUrl = `http://127.0.0.1:${cdnPort}`;
  }

  inject(rule: FaultRule): void {
    this.rules.push({ match: rule.match, remaining: rule.times ?? 1, fault: rule.fault });
  }

  clearFaults(): void {
    this.rules = [];
  }

  setLatency(ms: number): void {
    this.latencyMs = ms;
  }

  setBandwidth(bytesPerSecond: number | null): void {
    this.bandwidth.setRate(bytesPerSecond);
  }

  setFlowBandwidth(bytesPerSecond: number | null): void {
    this.flowBytesPerSecond = bytesPerSecond;
  }

  countHeads(enabled: boolean): void {
    this.headsCounted = enabled;
  }

  setWindow(bytes: number | null): void {
    this.window = bytes;
  }

  redirectBlobsToCdn(enabled: boolean): void {
    this.cdnRedirects = enabled;
  }

  resetStats(): void {
    this.counters = emptyCounters();
  }

  async stop(): Promise<void> {
    for (const server of [this.registryServer, this.cdnServer]) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    this.agent.destroy();
    this.inFlight.stop();
  }

  /** Every request: count it, pick its fault, wait out the latency, then serve it. */
  private handle(origin: Origin, req: IncomingMessage, res: ServerResponse): void {
    const { fault, record } = this.admit(origin, req);
    res.once('close', () => {
      record.ended = true;
    });
    const serve = async (): Promise<void> => {
      if (this.latencyMs > 0) {
        const newConnection = !this.handshaken.has(req.socket);
        this.handshaken.add(req.socket);
        await sleep(newConnection ? 2 * this.latencyMs : this.latencyMs);
      }
      if (fault?.kind === 'status') return this.sendStatusFault(req, res, record, fault);
      if (origin === 'registry') await this.serveRegistry(req, res, record, fault);
      else await this.serveCdn(req, res, record, fault);
    };
    // An upstream failure becomes a 502 if nothing was sent yet, else a dropped connection.
    serve().catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      this.send(req, res, record, 502, { 'content-type': 'text/plain' }, `fault proxy: upstream failed: ${String(error)}\n`);
    });
  }

  private async serveRegistry(req: IncomingMessage, res: ServerResponse, record: RequestRecord, fault: Fault | undefined): Promise<void> {
    const target = req.url ?? '/';
    const blob = BLOB_PATH.exec(target);
    if (this.cdnRedirects && req.method === 'GET' && blob && (await this.upstreamServes(req))) {
      const [, , algorithm = '', hex = ''] = blob;
      return this.send(req, res, record, 307, { location: this.presign(target, algorithm, hex, req.headers.authorization) }, '');
    }
    const headers = this.upstreamHeaders(req);
    if (fault?.kind === 'ignore-range') delete headers.range;
    const response = await this.openUpstream(req.method ?? 'GET', target, headers, req);
    this.writeHead(res, record, response.statusCode ?? 502, withoutHopByHop(response.headers));
    await this.relayBody(response, res, record, fault, contentLength(response));
  }

  /** The cdn: S3 semantics for presigned GETs, bytes from the upstream registry. */
  private async serveCdn(req: IncomingMessage, res: ServerResponse, record: RequestRecord, fault: Fault | undefined): Promise<void> {
    // S3 checks this before anything else: a presigned URL is already an auth mechanism.
    if (req.headers.authorization !== undefined) {
      return this.sendS3Error(req, res, record, 400, 'InvalidArgument', S3_ONE_AUTH_MESSAGE);
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return this.sendS3Error(req, res, record, 405, 'MethodNotAllowed', 'The specified method is not allowed against this resource.');
    }
    const url = new URL(req.url ?? '/', this.cdnUrl);
    const object = this.cdnObjects.get(url.searchParams.get('X-Amz-Signature') ?? '');
    if (!object || object.cdnPath !== url.pathname) {
      return this.sendS3Error(req, res, record, 403, 'SignatureDoesNotMatch',
        'The request signature we calculated does not match the signature you provided.');
    }
    const response = await this.openUpstream(req.method, object.upstreamPath, {
      ...(object.authorization !== undefined && { authorization: object.authorization }),
      ...(req.headers.range !== undefined && { range: req.headers.range }),
    });
    const status = response.statusCode ?? 502;
    if (status !== 200 && status !== 206) {
      response.resume();
      const [code, message] = status === 404 ? ['NoSuchKey', 'The specified key does not exist.']
        : status === 416 ? ['InvalidRange', 'The requested range is not satisfiable']
        : ['InternalError', `upstream registry answered ${status}`];
      return this.sendS3Error(req, res, record, status, code, message);
    }
    this.writeHead(res, record, status, {
      'content-type': 'application/octet-stream',
      'accept-ranges': 'bytes',
      'x-amz-request-id': randomBytes(8).toString('hex').toUpperCase(),
      ...pick(response.headers, ['content-length', 'content-range', 'etag', 'last-modified']),
    });
    await this.relayBody(response, res, record, fault, contentLength(response));
  }

  /** Counts and logs the request, and takes the first fault rule it matches. */
  private admit(origin: Origin, req: IncomingMessage): { fault: Fault | undefined; record: RequestRecord } {
    const request: ProxiedRequest = { origin, method: req.method ?? 'GET', target: req.url ?? '/', headers: req.headers };
    const rule = this.rules.find((candidate) => matches(candidate.match, request));
    if (rule && --rule.remaining <= 0) this.rules = this.rules.filter((candidate) => candidate !== rule);
    const record: RequestRecord = {
      origin,
      method: request.method,
      target: request.target,
      range: req.headers.range,
      fault: rule?.fault.kind,
      startedAt: Date.now(),
      ended: false,
      status: 0,
      bytesSent: 0,
    };
    this.counters.requests += 1;
    this.counters.log.push(record);
    return { fault: rule?.fault, record };
  }

  /** Quay only redirects reads the client is allowed to make; anything else is relayed as is. */
  private async upstreamServes(req: IncomingMessage): Promise<boolean> {
    const headers = this.upstreamHeaders(req);
    delete headers.range;
    try {
      const response = await this.openUpstream('HEAD', req.url ?? '/', headers);
      response.resume();
      return response.statusCode === 200;
    } catch {
      return false;
    }
  }

  /** The client's headers, and where the client thinks it is, for the registry's URLs. */
  private upstreamHeaders(req: IncomingMessage): OutgoingHttpHeaders {
    const headers = withoutHopByHop(req.headers);
    delete headers.host;
    headers['x-forwarded-host'] = req.headers.host ?? this.host;
    headers['x-forwarded-proto'] = 'http';
    return headers;
  }

  private presign(target: string, algorithm: string, hex: string, authorization: string | undefined): string {
    const cdnPath = `/datastorage/registry/${algorithm}/${hex.slice(0, 2)}/${hex}`;
    const signature = randomBytes(32).toString('hex');
    this.cdnObjects.set(signature, { cdnPath, upstreamPath: target, authorization });
    const now = new Date().toISOString().replace(/[-:]|\.\d+/g, '');
    const query = new URLSearchParams({
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      'X-Amz-Credential': `PRESTAGETESTKEY/${now.slice(0, 8)}/us-east-1/s3/aws4_request`,
      'X-Amz-Date': now,
      'X-Amz-Expires': '600',
      'X-Amz-SignedHeaders': 'host',
      'X-Amz-Signature': signature,
    });
    return `${this.cdnUrl}${cdnPath}?${query}`;
  }

  private openUpstream(method: string, target: string, headers: OutgoingHttpHeaders, body?: IncomingMessage): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const send = this.upstream.protocol === 'https:' ? httpsRequest : httpRequest;
      const request = send({
        hostname: this.upstream.hostname,
        port: this.upstream.port,
        method,
        path: target,
        headers,
        agent: this.agent,
      });
      request.once('response', resolve);
      request.once('error', reject);
      // pipeline, not pipe: a client that aborts an upload aborts the upstream request too.
      if (body) pipeline(body, request).catch(reject);
      else request.end();
    });
  }

  /**
   * Streams a body through the bandwidth cap, applying a body fault on the way. Stops
   * quietly if the client goes away.
   */
  private async relayBody(
    body: Readable,
    res: ServerResponse,
    record: RequestRecord,
    fault: Fault | undefined,
    length: number | undefined,
  ): Promise<void> {
    const cutAfter = fault && 'afterBytes' in fault ? fault.afterBytes : Infinity;
    const corruptAt = fault?.kind === 'corrupt' ? fault.atByte ?? Math.floor((length ?? 0) / 2) : -1;
    // This response's own link, when flows are capped: paced like the shared one.
    const flow = new SharedBandwidth();
    flow.setRate(this.flowBytesPerSecond);
    const pieceSize = Math.min(this.bandwidth.pieceSize, flow.pieceSize);
    let offset = 0;
    try {
      // The empty write sends the headers, so even a cut at byte 0 is a response, then a cut.
      if (cutAfter <= 0) {
        if (await write(res, Buffer.alloc(0), true)) this.cut(res, fault);
        return;
      }
      for await (const chunk of body as AsyncIterable<Buffer>) {
        for (let start = 0; start < chunk.length;) {
          const size = Math.min(chunk.length - start, pieceSize, cutAfter - offset);
          let piece = chunk.subarray(start, start + size);
          start += size;
          if (corruptAt >= offset && corruptAt < offset + size) {
            piece = Buffer.from(piece);
            piece[corruptAt - offset] = (piece[corruptAt - offset] ?? 0) ^ 0xff;
          }
          await flow.take(size);
          await this.bandwidth.take(size);
          if (this.window !== null && res.socket) await this.inFlight.room(res.socket, size, this.window);
          const cutNow = offset + size >= cutAfter;
          // Before a cut the bytes must have reached the socket, or a reset would drop them.
          if (!(await write(res, piece, cutNow))) return;
          offset += size;
          record.bytesSent += size;
          this.countSent(size);
          if (cutNow) return this.cut(res, fault);
        }
      }
      res.end();
    } finally {
      if (!body.readableEnded) body.destroy();
    }
  }

  /** Ends a response early, the way the fault says. */
  private cut(res: ServerResponse, fault: Fault | undefined): void {
    if (fault?.kind === 'reset') res.socket?.resetAndDestroy();
    else if (fault?.kind === 'truncate') res.socket?.end();
    // 'stall': leave the connection open; the client's timeout or stop() ends it.
  }

  private sendStatusFault(req: IncomingMessage, res: ServerResponse, record: RequestRecord, fault: Extract<Fault, { kind: 'status' }>): void {
    const title = `${fault.status} ${STATUS_CODES[fault.status] ?? 'Error'}`;
    const page = `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n<center><h1>${title}</h1></center>\r\n`
      + '<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n';
    this.send(req, res, record, fault.status, {
      'content-type': 'text/html',
      ...(fault.retryAfter !== undefined && { 'retry-after': String(fault.retryAfter) }),
    }, page);
  }

  private sendS3Error(req: IncomingMessage, res: ServerResponse, record: RequestRecord, status: number, code: string, message: string): void {
    const requestId = randomBytes(8).toString('hex').toUpperCase();
    const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message>`
      + `<RequestId>${requestId}</RequestId></Error>`;
    this.send(req, res, record, status, { 'content-type': 'application/xml', 'x-amz-request-id': requestId }, xml);
  }

  private send(req: IncomingMessage, res: ServerResponse, record: RequestRecord, status: number, headers: OutgoingHttpHeaders, body: string): void {
    const bytes = Buffer.from(body);
    this.writeHead(res, record, status, { ...headers, 'content-length': bytes.length });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    res.end(bytes);
    record.bytesSent += bytes.length;
    this.countSent(bytes.length);
  }

  private countSent(bytes: number): void {
    if (bytes === 0) return;
    const now = performance.now();
    if (this.counters.bytesSent === 0) this.counters.firstByteAt = now;
    this.counters.lastByteAt = now;
    this.counters.bytesSent += bytes;
    const second = Math.floor(Date.now() / 1000);
    this.counters.perSecond.set(second, (this.counters.perSecond.get(second) ?? 0) + bytes);
  }

  private writeHead(res: ServerResponse, record: RequestRecord, status: number, headers: OutgoingHttpHeaders): void {
    record.status = status;
    res.writeHead(status, headers);
    if (this.headsCounted) {
      // What Node writes: the status line, these headers, its own Date / Connection / Keep-Alive, the blank line.
      const lines = Object.entries(headers).filter(([, value]) => value !== undefined).map(([name, value]) => `${name}: ${Array.isArray(value) ? value.join(', ') : String(value)}\r\n`);
      this.countSent(Buffer.byteLength(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${lines.join('')}Date: Wed, 02 Dec 2026 05:00:00 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n`));
    }
  }
}

function emptyCounters(): { requests: number; bytesSent: number; firstByteAt: number; lastByteAt: number; perSecond: Map<number, number>; log: RequestRecord[] } {
  return { requests: 0, bytesSent: 0, firstByteAt: 0, lastByteAt: 0, perSecond: new Map(), log: [] };
}

/** What a link carried, from `ProxyStats.perSecond`, in bytes per second. */
export interface LinkWindows {
  /**
   * The most any `windowSeconds` consecutive whole seconds carried, over `windowSeconds`: every
   * window lying between the first and the last second that carried a byte (a second without
   * one inside counts 0). A span shorter than one window is one window, padded with empty
   * seconds: its total over `windowSeconds`.
   */
  readonly maxBytesPerSecond: number;
  /** All bytes over the seconds from the first to the last that carried a byte (both counted whole). */
  readonly meanBytesPerSecond: number;
  /** Those seconds: last - first + 1; 0 when nothing was carried. */
  readonly seconds: number;
}

/**
 * The rate a link held, averaged over sliding windows of `windowSeconds` whole seconds (what
 * "at most R, averaged over 5 s" means), and over the whole span. Pure: it reads only `perSecond`.
 */
export function linkWindows(perSecond: ReadonlyMap<number, number>, windowSeconds = 5): LinkWindows {
  if (!(Number.isInteger(windowSeconds) && windowSeconds > 0)) throw new RangeError(`a window is a whole number of seconds, not ${windowSeconds}`);
  const carried = [...perSecond].filter(([, bytes]) => bytes > 0);
  if (carried.length === 0) return { maxBytesPerSecond: 0, meanBytesPerSecond: 0, seconds: 0 };
  const first = Math.min(...carried.map(([second]) => second));
  const last = Math.max(...carried.map(([second]) => second));
  const seconds = last - first + 1;
  const bytes = Array.from({ length: Math.max(seconds, windowSeconds) }, (_, i) => perSecond.get(first + i) ?? 0);
  let inWindow = bytes.slice(0, windowSeconds).reduce((a, b) => a + b, 0);
  let max = inWindow;
  for (let end = windowSeconds; end < bytes.length; end++) {
    inWindow += bytes[end]! - bytes[end - windowSeconds]!;
    max = Math.max(max, inWindow);
  }
  const total = carried.reduce((a, [, b]) => a + b, 0);
  return { maxBytesPerSecond: max / windowSeconds, meanBytesPerSecond: total / seconds, seconds };
}

/**
 * A link that slows for a while, then recovers: `proxy`'s shared bandwidth set to
 * `bytesPerSecond` from `afterMs` to `afterMs + forMs` after `startedAt` (a `performance.now()`),
 * then lifted. Resolves once it is lifted.
 */
export async function slowLinkFor(proxy: Pick<FaultProxy, 'setBandwidth'>, startedAt: number, afterMs: number, forMs: number, bytesPerSecond: number): Promise<void> {
  await sleep(Math.max(0, afterMs - (performance.now() - startedAt)));
  proxy.setBandwidth(bytesPerSecond);
  await sleep(forMs);
  proxy.setBandwidth(null);
}

/**
 * One link shared by all responses, a token bucket in time units: each piece reserves the
 * next slot on the link and is sent when its slot ends, so all streams together stay at
 * the rate. Up to one piece of idle time is credited, so timer lateness does not add up.
 */
class SharedBandwidth {
  private bytesPerSecond: number | null = null;
  private linkFreeAt = 0;

  setRate(bytesPerSecond: number | null): void {
    this.bytesPerSecond = bytesPerSecond;
    this.linkFreeAt = 0;
  }

  /** Pieces of ~20 ms keep the pacing smooth at any rate. */
  get pieceSize(): number {
    if (this.bytesPerSecond === null) return Infinity;
    return Math.min(64 * 1024, Math.max(1024, Math.floor(this.bytesPerSecond / 50)));
  }

  async take(bytes: number): Promise<void> {
    if (this.bytesPerSecond === null) return;
    const now = performance.now();
    const credit = (this.pieceSize * 1000) / this.bytesPerSecond;
    this.linkFreeAt = Math.max(now - credit, this.linkFreeAt) + (bytes * 1000) / this.bytesPerSecond;
    const wait = this.linkFreeAt - now;
    if (wait >= 1) await sleep(wait);
  }
}

/**
 * How often the kernel's queues are read while a response waits for room in its window: every
 * 5 ms, or less often where reading them is slow (a host with thousands of sockets, most in
 * TIME_WAIT, takes tens of milliseconds to list), so the reads take at most a third of the time.
 */
const WINDOW_POLL_MS = 5;

/**
 * Bytes in flight on the proxy's connections (its socket's tx_queue and its client's rx_queue,
 * from /proc/net/tcp{,6}), read only while a writer waits. A connection may take a piece while
 * what it held at the last read, plus what was written to it since, stays within its window (an
 * upper bound: nothing written, the queues only shrink); a socket /proc does not list holds
 * nothing. One writer per connection at a time (a response's pieces go in order).
 *
 * The read is asynchronous and parses only the lines of the waiting sockets' ports: a read that
 * blocked the proxy (44 ms of every 132 on a CI host with 4,766 sockets) stopped every response,
 * and the links it emulated ran far below the caps under test.
 */
class InFlight {
  private readonly state = new WeakMap<Socket, { queued: number; writtenSince: number }>();
  private waiters: Array<{ socket: Socket; size: number; window: number; resolve: () => void }> = [];
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  private readMs = 0;
  private stopped = false;

  async room(socket: Socket, size: number, window: number): Promise<void> {
    if (!this.fits(socket, size, window)) {
      await new Promise<void>((resolve) => {
        this.waiters.push({ socket, size, window, resolve });
        this.schedule();
      });
    }
    const known = this.state.get(socket);
    if (known) known.writtenSince += size;
  }

  stop(): void {
    this.stopped = true;
    for (const waiter of this.waiters) waiter.resolve();
    this.waiters = [];
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.reading || this.stopped) return;
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      void this.poll();
    }, Math.max(WINDOW_POLL_MS, 2 * this.readMs));
  }

  /** Room for a piece; a piece bigger than the window goes alone into an empty one. */
  private fits(socket: Socket, size: number, window: number): boolean {
    const known = this.state.get(socket);
    if (!known) return false;
    const held = known.queued + known.writtenSince;
    return held === 0 || held + size <= window;
  }

  private async poll(): Promise<void> {
    this.reading = true;
    const started = performance.now();
    const waiting = [...this.waiters];
    const queues = await kernelQueues(new Set(waiting.map(({ socket }) => socket.localPort).filter((port): port is number => port !== undefined)));
    this.readMs = performance.now() - started;
    this.reading = false;
    if (this.stopped) return;
    // A waiting socket's one writer was held while the read was under way: nothing was written to it since.
    for (const { socket } of waiting) {
      const sending = queues.get(`${socket.localPort}:${socket.remotePort}`)?.tx ?? 0;
      const receiving = queues.get(`${socket.remotePort}:${socket.localPort}`)?.rx ?? 0;
      this.state.set(socket, { queued: sending + receiving, writtenSince: 0 });
    }
    const ready = this.waiters.filter((w) => w.socket.destroyed || this.fits(w.socket, w.size, w.window));
    this.waiters = this.waiters.filter((w) => !ready.includes(w));
    if (this.waiters.length > 0) this.schedule();
    for (const waiter of ready) waiter.resolve();
  }
}

/** tx_queue and rx_queue of the TCP sockets of this host on `ports` (either end), by `localPort:remotePort`. */
async function kernelQueues(ports: ReadonlySet<number>): Promise<Map<string, { tx: number; rx: number }>> {
  const queues = new Map<string, { tx: number; rx: number }>();
  const hex = [...ports].map((port) => `:${port.toString(16).toUpperCase().padStart(4, '0')} `);
  const port = (address: string): number => parseInt(address.slice(address.lastIndexOf(':') + 1), 16);
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      if (!hex.some((wanted) => line.includes(wanted))) continue;
      const [, local, remote, , queue] = line.trim().split(/\s+/, 5);
      if (!local || !remote || !queue) continue;
      const [tx = '0', rx = '0'] = queue.split(':');
      const key = `${port(local)}:${port(remote)}`;
      const seen = queues.get(key);
      // The same ports on other addresses (a socket in TIME_WAIT, say) hold no more than their own.
      queues.set(key, { tx: Math.max(seen?.tx ?? 0, parseInt(tx, 16)), rx: Math.max(seen?.rx ?? 0, parseInt(rx, 16)) });
    }
  }
  return queues;
}

function matches(match: FaultRule['match'], request: ProxiedRequest): boolean {
  if (match === undefined) return true;
  if (typeof match === 'function') return match(request);
  match.lastIndex = 0;
  return match.test(request.target);
}

/**
 * Resolves false if the client went away. Waits for the socket's drain, or with `flush` until
 * the piece was handed to the socket.
 */
function write(res: ServerResponse, piece: Buffer, flush: boolean): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const settle = (written: boolean): void => {
      res.off('close', onClose);
      res.off('drain', onDrain);
      resolve(written);
    };
    const onClose = (): void => settle(false);
    const onDrain = (): void => settle(true);
    res.once('close', onClose);
    if (flush) res.write(piece, (error) => settle(!error));
    else if (res.write(piece)) settle(true);
    else res.once('drain', onDrain);
  });
}

function withoutHopByHop(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const kept: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) kept[name] = value;
  }
  return kept;
}

function pick(headers: IncomingHttpHeaders, names: string[]): OutgoingHttpHeaders {
  const picked: OutgoingHttpHeaders = {};
  for (const name of names) {
    const value = headers[name];
    if (value !== undefined) picked[name] = value;
  }
  return picked;
}

function contentLength(response: IncomingMessage): number | undefined {
  const header = response.headers['content-length'];
  return header === undefined ? undefined : Number(header);
}

async function listen(server: Server, address: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, address, resolve);
  });
  return (server.address() as AddressInfo).port;
}
