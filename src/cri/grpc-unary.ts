/**
 * Unary gRPC calls over HTTP/2 on a unix socket: all the CRI client needs of gRPC. A request is
 * one length-prefixed message (a flag byte, four length bytes), the answer one message and the
 * trailers `grpc-status` / `grpc-message` (the gRPC over HTTP/2 protocol). Written here, on
 * Node's own http2, rather than with @grpc/grpc-js, whose channel machinery (balancers,
 * resolvers, retries) cost the agent on every node about 3.5 MiB of its RSS for calls to one
 * local socket (npm run bench:agent; docs/benchmarks.md).
 *
 * One connection serves every call; once it is gone (the runtime restarted, or sent GOAWAY to
 * stop gracefully) the next call opens another, so a runtime back after an outage is reached at
 * once. Calls while it is down fail with UNAVAILABLE.
 */
import { connect as http2Connect, constants, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { connect as connectSocket } from 'node:net';

/** gRPC status codes (grpc/doc/statuscodes.md). */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type GrpcStatusCode = (typeof GrpcStatus)[keyof typeof GrpcStatus];

/** A call that ended in a status other than OK; `details` is the server's message. */
export class GrpcCallError extends Error {
  constructor(
    readonly code: GrpcStatusCode,
    readonly details: string,
  ) {
    super(`${code} ${Object.keys(GrpcStatus).find((name) => GrpcStatus[name as keyof typeof GrpcStatus] === code) ?? ''}: ${details}`);
  }
}

export interface UnaryCallOptions {
  /** Milliseconds the call may take; sent as `grpc-timeout` and enforced here. */
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
}

/** HTTP statuses a gRPC client maps to codes when no grpc-status came (the protocol's table). */
function httpStatusCode(status: number): GrpcStatusCode {
  if (status === 400) return GrpcStatus.INTERNAL;
  if (status === 401) return GrpcStatus.UNAUTHENTICATED;
  if (status === 403) return GrpcStatus.PERMISSION_DENIED;
  if (status === 404) return GrpcStatus.UNIMPLEMENTED;
  if ([429, 502, 503, 504].includes(status)) return GrpcStatus.UNAVAILABLE;
  return GrpcStatus.UNKNOWN;
}

/** `grpc-timeout`: at most 8 digits and a unit. */
function grpcTimeout(ms: number): string {
  return ms < 1e8 ? `${Math.max(1, Math.ceil(ms))}m` : `${Math.ceil(ms / 1000)}S`;
}

export class UnaryChannel {
  private session: ClientHttp2Session | undefined;
  private closed = false;
  /** Calls not yet ended, per connection: a connection the runtime is done with ends after its last. */
  private readonly inFlight = new Map<ClientHttp2Session, number>();

  constructor(
    private readonly socketPath: string,
    /** Answers longer than this fail with RESOURCE_EXHAUSTED (image lists on a busy node are MiBs). */
    private readonly maxReceiveBytes: number,
  ) {}

  /** Opens the connection and waits for the runtime's HTTP/2 settings: it speaks, not only accepts. */
  async ready(timeoutMs: number): Promise<void> {
    const session = this.current();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`no HTTP/2 answer within ${timeoutMs} ms`)), timeoutMs);
      const done = (error?: Error): void => {
        clearTimeout(timer);
        session.off('remoteSettings', onSettings);
        session.off('error', done);
        session.off('close', onClose);
        if (error) reject(error);
        else resolve();
      };
      const onSettings = (): void => done();
      const onClose = (): void => done(new Error('the runtime closed the connection'));
      session.once('remoteSettings', onSettings);
      session.once('error', done);
      session.once('close', onClose);
    });
  }

  /** One unary call of `path` (`/runtime.v1.ImageService/PullImage`): the answer's message bytes. */
  call(path: string, request: Uint8Array, options: UnaryCallOptions): Promise<Buffer> {
    if (this.closed) return Promise.reject(new GrpcCallError(GrpcStatus.UNAVAILABLE, 'the client is closed'));
    if (options.signal?.aborted) return Promise.reject(new GrpcCallError(GrpcStatus.CANCELLED, 'cancelled by the caller'));
    let session: ClientHttp2Session;
    try {
      session = this.current();
    } catch (error) {
      return Promise.reject(new GrpcCallError(GrpcStatus.UNAVAILABLE, (error as Error).message));
    }
    return new Promise<Buffer>((resolve, reject) => {
      this.inFlight.set(session, (this.inFlight.get(session) ?? 0) + 1);
      const stream = session.request({
        ':method': 'POST',
        ':path': path,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': grpcTimeout(options.timeoutMs),
      });
      const chunks: Buffer[] = [];
      let received = 0;
      let headers: IncomingHttpHeaders = {};
      let settled = false;
      const finish = (error: GrpcCallError | undefined, answer?: Buffer): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        // A call given up on is cancelled, so the runtime stops its work (a pull) too.
        if (error && !stream.closed) stream.close(constants.NGHTTP2_CANCEL);
        if (error) reject(error);
        else resolve(answer!);
      };
      const timer = setTimeout(() => finish(new GrpcCallError(GrpcStatus.DEADLINE_EXCEEDED, `no answer within ${options.timeoutMs} ms`)), options.timeoutMs);
      const onAbort = (): void => finish(new GrpcCallError(GrpcStatus.CANCELLED, 'cancelled by the caller'));
      options.signal?.addEventListener('abort', onAbort, { once: true });
      const ended = (trailers: IncomingHttpHeaders): void => {
        const status = trailers['grpc-status'] ?? headers['grpc-status'];
        if (status === undefined) {
          const http = Number(headers[':status'] ?? 0);
          return finish(new GrpcCallError(http === 200 ? GrpcStatus.UNKNOWN : httpStatusCode(http), `no grpc-status in the answer (HTTP ${http})`));
        }
        const code = Number(status) as GrpcStatusCode;
        if (code !== GrpcStatus.OK) {
          const message = String(trailers['grpc-message'] ?? headers['grpc-message'] ?? '');
          let details = message;
          try {
            details = decodeURIComponent(message);
          } catch {
            // Not percent-encoded as the protocol asks: shown as sent.
          }
          return finish(new GrpcCallError(code, details));
        }
        const body = Buffer.concat(chunks);
        if (body.length < 5) return finish(new GrpcCallError(GrpcStatus.INTERNAL, 'an OK answer without a message'));
        if (body[0] !== 0) return finish(new GrpcCallError(GrpcStatus.INTERNAL, 'a compressed answer, which was not asked for'));
        const length = body.readUInt32BE(1);
        if (length !== body.length - 5) return finish(new GrpcCallError(GrpcStatus.INTERNAL, `an answer of ${body.length - 5} bytes framed as ${length}`));
        finish(undefined, body.subarray(5));
      };
      // A trailers-only answer (an error at once) has its status in the headers, then ends.
      stream.once('response', (h) => (headers = h));
      stream.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > this.maxReceiveBytes + 5) return finish(new GrpcCallError(GrpcStatus.RESOURCE_EXHAUSTED, `an answer over ${this.maxReceiveBytes} bytes`));
        chunks.push(chunk);
      });
      stream.once('trailers', ended);
      stream.once('end', () => ended({}));
      stream.once('error', (error: Error) => finish(new GrpcCallError(GrpcStatus.UNAVAILABLE, error.message)));
      stream.once('close', () => {
        finish(new GrpcCallError(GrpcStatus.UNAVAILABLE, `the stream closed (HTTP/2 code ${stream.rstCode ?? 0})`));
        const left = (this.inFlight.get(session) ?? 1) - 1;
        this.inFlight.set(session, left);
        if (left === 0 && session !== this.session) this.end(session);
      });
      const frame = Buffer.alloc(5 + request.length);
      frame.writeUInt32BE(request.length, 1);
      frame.set(request, 5);
      stream.end(frame);
    });
  }

  /** Ends the connection now: the runtime's graceful stop waits for every open one to go away. */
  close(): void {
    this.closed = true;
    for (const session of [...this.inFlight.keys(), ...(this.session ? [this.session] : [])]) this.end(session);
    this.session = undefined;
  }

  private end(session: ClientHttp2Session): void {
    this.inFlight.delete(session);
    session.destroy();
  }

  /** The open connection, or a new one once the last is gone. */
  private current(): ClientHttp2Session {
    if (this.session && !this.session.closed && !this.session.destroyed) return this.session;
    const session = http2Connect('http://localhost', { createConnection: () => connectSocket(this.socketPath) });
    const forget = (): void => {
      if (this.session === session) this.session = undefined;
    };
    // Errors reach the calls through their streams; a session error alone must not crash the agent.
    session.on('error', forget);
    session.once('close', () => {
      forget();
      this.inFlight.delete(session);
    });
    // The runtime stops gracefully: no new calls here; the ones running finish, then it ends.
    session.once('goaway', () => {
      forget();
      if ((this.inFlight.get(session) ?? 0) === 0) this.end(session);
    });
    this.session = session;
    return session;
  }
}
