/**
 * A hostile registry for the tests of what prestage refuses: an HTTP server on 127.0.0.1 that
 * passes requests through to a real test registry (harness/registry.ts) and misbehaves on the
 * paths a test names: answers of gigabytes, a trickle, redirects out of http(s) or to a
 * link-local address, a token realm on another host, images of its own (a gzip bomb layer).
 * Every request it sees is recorded. `startSink` is the other host: a server on 127.0.0.2 that
 * records everything sent to it (as a token realm, or as the forward proxy of a child process,
 * so a connection to any other address shows up there too).
 */
import { createHash } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface SeenRequest {
  readonly method: string;
  /** Path and query, or the absolute URL a client sent to a forward proxy. */
  readonly target: string;
  readonly authorization: string | undefined;
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export interface HostileRegistry {
  /** `127.0.0.1:PORT`. */
  readonly host: string;
  readonly seen: SeenRequest[];
  /** Misbehave on requests whose path matches (the first rule added wins); pass the rest through. */
  on(match: RegExp, handler: Handler): void;
  /** Answer `/v2/` requests without a Bearer token with this challenge (undefined: pass through). */
  challenge: string | undefined;
  /** Serve an image of its own: its manifest by `tag` and digest, its blobs (Range too). */
  serveImage(repository: string, tag: string, image: SyntheticImage): { readonly digest: string };
  /** Forget the rules and the challenge, not the recorded requests. */
  reset(): void;
  stop(): Promise<void>;
}

export interface SyntheticImage {
  readonly config: Buffer;
  readonly layers: readonly { readonly bytes: Buffer; readonly mediaType: string }[];
}

export async function startHostileRegistry(upstream: string): Promise<HostileRegistry> {
  const seen: SeenRequest[] = [];
  let rules: Array<{ match: RegExp; handler: Handler }> = [];
  const state = { challenge: undefined as string | undefined };
  const server = createServer((req, res) => {
    seen.push({ method: req.method ?? 'GET', target: req.url ?? '', authorization: req.headers.authorization });
    const path = (req.url ?? '').replace(/\?.*$/, '');
    const rule = rules.find((r) => r.match.test(path));
    if (rule) return rule.handler(req, res);
    if (state.challenge && path.startsWith('/v2/') && !/^Bearer /.test(req.headers.authorization ?? '')) {
      res.writeHead(401, { 'www-authenticate': state.challenge, 'content-type': 'application/json' });
      res.end('{"errors":[{"code":"UNAUTHORIZED"}]}');
      return;
    }
    passThrough(upstream, req, res);
  });
  const sockets = track(server);
  await listen(server, '127.0.0.1');
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    host,
    seen,
    on: (match, handler) => void rules.push({ match, handler }),
    get challenge() {
      return state.challenge;
    },
    set challenge(value) {
      state.challenge = value;
    },
    serveImage(repository, tag, image) {
      const descriptor = (bytes: Buffer, mediaType: string) => ({ mediaType, digest: digestOf(bytes), size: bytes.length });
      const manifest = Buffer.from(JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: descriptor(image.config, 'application/vnd.oci.image.config.v1+json'),
        layers: image.layers.map((l) => descriptor(l.bytes, l.mediaType)),
      }));
      const digest = digestOf(manifest);
      rules.push({ match: new RegExp(`^/v2/${repository}/manifests/(${tag}|${digest})$`), handler: (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/vnd.oci.image.manifest.v1+json', 'docker-content-digest': digest, 'content-length': manifest.length });
        res.end(manifest);
      } });
      for (const bytes of [image.config, ...image.layers.map((l) => l.bytes)]) {
        rules.push({ match: new RegExp(`^/v2/${repository}/blobs/${digestOf(bytes)}$`), handler: (req, res) => serveBlob(bytes, req, res) });
      }
      return { digest };
    },
    reset() {
      rules = [];
      state.challenge = undefined;
    },
    stop: () => close(server, sockets),
  };
}

export interface Sink {
  /** `127.0.0.2:PORT`: another host than the registry's 127.0.0.1. */
  readonly host: string;
  readonly seen: SeenRequest[];
  stop(): Promise<void>;
}

/** Records every request and CONNECT; answers 200 with a token, so a client that got here would go on. */
export async function startSink(): Promise<Sink> {
  const seen: SeenRequest[] = [];
  const server = createServer((req, res) => {
    seen.push({ method: req.method ?? 'GET', target: req.url ?? '', authorization: req.headers.authorization ?? req.headers['proxy-authorization'] });
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"token":"from-the-sink"}');
  });
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    seen.push({ method: 'CONNECT', target: req.url ?? '', authorization: req.headers['proxy-authorization'] });
    socket.destroy();
  });
  const sockets = track(server);
  await listen(server, '127.0.0.2');
  return { host: `127.0.0.2:${(server.address() as AddressInfo).port}`, seen, stop: () => close(server, sockets) };
}

/** A body of `bytes` bytes (a JSON-looking start, then filler), written as the client takes it: never held in memory. */
export function hugeBody(status: number, bytes: number, start: string): Handler {
  return (req, res) => {
    req.resume();
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': bytes });
    const filler = Buffer.alloc(64 * 1024, 'a');
    let sent = 0;
    const write = (): void => {
      while (sent < bytes) {
        const chunk = sent === 0 ? Buffer.concat([Buffer.from(start), filler]).subarray(0, Math.min(filler.length, bytes)) : filler.subarray(0, Math.min(filler.length, bytes - sent));
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', write);
      }
      res.end();
    };
    res.on('close', () => (sent = bytes));
    write();
  };
}

/** Headers at once, then one byte of `bytes` every `everyMs`. */
export function trickle(bytes: Buffer, everyMs: number): Handler {
  return (req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/vnd.oci.image.manifest.v1+json', 'content-length': bytes.length });
    let at = 0;
    const timer = setInterval(() => {
      if (at >= bytes.length) return void (clearInterval(timer), res.end());
      res.write(bytes.subarray(at, ++at));
    }, everyMs);
    res.on('close', () => clearInterval(timer));
  };
}

export function redirect(location: string): Handler {
  return (req, res) => {
    req.resume();
    res.writeHead(302, { location });
    res.end();
  };
}

export function digestOf(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

function serveBlob(bytes: Buffer, req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  const range = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range ?? '');
  if (!range) {
    res.writeHead(200, { 'content-length': bytes.length, 'content-type': 'application/octet-stream' });
    return void res.end(req.method === 'HEAD' ? undefined : bytes);
  }
  const start = range[1] === '' ? bytes.length - Number(range[2]) : Number(range[1]);
  const end = range[1] === '' || range[2] === '' ? bytes.length - 1 : Number(range[2]);
  res.writeHead(206, { 'content-length': end - start + 1, 'content-range': `bytes ${start}-${end}/${bytes.length}` });
  res.end(bytes.subarray(start, end + 1));
}

function passThrough(upstream: string, req: IncomingMessage, res: ServerResponse): void {
  const [hostname, port] = upstream.split(':');
  const { authorization: _dropped, ...headers } = req.headers;
  const out = httpRequest({ hostname, port: Number(port), method: req.method, path: req.url, headers: { ...headers, host: upstream } }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  out.on('error', () => res.destroy());
  req.pipe(out);
}

function track(server: Server): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  return sockets;
}

function listen(server: Server, address: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, address, resolve);
  });
}

function close(server: Server, sockets: Set<Socket>): Promise<void> {
  for (const s of sockets) s.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}
