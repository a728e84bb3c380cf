/**
 * The unary gRPC channel against a real HTTP/2 server on a unix socket that answers as a gRPC
 * server would (the real CRI-O is the integration suite's): what a runtime may send that CRI-O's
 * everyday answers do not show.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Http2Server, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GrpcStatus, UnaryChannel } from './grpc-unary.js';

type Handler = (stream: ServerHttp2Stream, request: Buffer, headers: Record<string, unknown>) => void;
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function serve(handler: Handler): Promise<{ socketPath: string; sessions: ServerHttp2Session[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'prestage-grpc-'));
  const socketPath = join(dir, 'runtime.sock');
  const sessions: ServerHttp2Session[] = [];
  const server: Http2Server = createServer();
  server.on('session', (session) => sessions.push(session));
  server.on('stream', (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => handler(stream, Buffer.concat(chunks), headers));
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  cleanup.push(async () => {
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });
  return { socketPath, sessions };
}

function framed(message: Buffer): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

function channelTo(socketPath: string, maxReceiveBytes = 1024): UnaryChannel {
  const channel = new UnaryChannel(socketPath, maxReceiveBytes);
  cleanup.push(async () => channel.close());
  return channel;
}

const ok: Handler = (stream, request) => {
  stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
  // Echoes the request's message.
  stream.end(framed(request.subarray(5)));
};

describe('UnaryChannel', () => {
  it('sends one framed message with the gRPC headers and gives back the answer\'s message', async () => {
    const seen: Array<Record<string, unknown>> = [];
    const { socketPath } = await serve((stream, request, headers) => {
      seen.push(headers);
      ok(stream, request, headers);
    });
    const channel = channelTo(socketPath);
    await channel.ready(2_000);
    const answer = await channel.call('/runtime.v1.ImageService/ListImages', Buffer.from('hello'), { timeoutMs: 5_000 });
    expect(answer.toString()).toBe('hello');
    expect(seen[0]).toMatchObject({ ':method': 'POST', ':path': '/runtime.v1.ImageService/ListImages', 'content-type': 'application/grpc', te: 'trailers', 'grpc-timeout': '5000m' });
  });

  it('fails with the status and the percent-decoded message of a trailers-only answer', async () => {
    const { socketPath } = await serve((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '5', 'grpc-message': 'image %22x%22 not found' }, { endStream: true });
    });
    await expect(channelTo(socketPath).call('/runtime.v1.ImageService/ImageStatus', Buffer.alloc(0), { timeoutMs: 5_000 })).rejects.toMatchObject({ code: GrpcStatus.NOT_FOUND, details: 'image "x" not found' });
  });

  it('fails with DEADLINE_EXCEEDED when the answer does not come in time, and the stream is cancelled', async () => {
    let cancelled = false;
    const { socketPath } = await serve((stream) => stream.on('close', () => (cancelled = stream.rstCode === 8)));
    await expect(channelTo(socketPath).call('/runtime.v1.ImageService/PullImage', Buffer.alloc(0), { timeoutMs: 200 })).rejects.toMatchObject({ code: GrpcStatus.DEADLINE_EXCEEDED });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(cancelled).toBe(true);
  });

  it('fails with CANCELLED when the caller aborts', async () => {
    const { socketPath } = await serve(() => undefined);
    const abort = new AbortController();
    const call = channelTo(socketPath).call('/runtime.v1.ImageService/PullImage', Buffer.alloc(0), { timeoutMs: 5_000, signal: abort.signal });
    setTimeout(() => abort.abort(), 50);
    await expect(call).rejects.toMatchObject({ code: GrpcStatus.CANCELLED });
  });

  it('refuses an answer over its bound with RESOURCE_EXHAUSTED', async () => {
    const { socketPath } = await serve((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      stream.end(framed(Buffer.alloc(4096)));
    });
    await expect(channelTo(socketPath, 1024).call('/runtime.v1.ImageService/ListImages', Buffer.alloc(0), { timeoutMs: 5_000 })).rejects.toMatchObject({ code: GrpcStatus.RESOURCE_EXHAUSTED });
  });

  it('maps an answer without grpc-status by its HTTP status', async () => {
    const { socketPath } = await serve((stream) => stream.respond({ ':status': 503 }, { endStream: true }));
    await expect(channelTo(socketPath).call('/x/Y', Buffer.alloc(0), { timeoutMs: 5_000 })).rejects.toMatchObject({ code: GrpcStatus.UNAVAILABLE });
  });

  it('opens a new connection for the next call once the runtime has gone away (GOAWAY, restart)', async () => {
    const { socketPath, sessions } = await serve(ok);
    const channel = channelTo(socketPath);
    await channel.call('/a/B', Buffer.from('1'), { timeoutMs: 5_000 });
    // The runtime stops gracefully: GOAWAY on its open connection; the next call opens another.
    sessions[0]!.goaway();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await channel.call('/a/B', Buffer.from('2'), { timeoutMs: 5_000 })).toString()).toBe('2');
    expect(sessions).toHaveLength(2);
  });

  it('fails with UNAVAILABLE while nothing listens, and reaches the runtime once it is back', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'prestage-grpc-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const socketPath = join(dir, 'runtime.sock');
    const channel = channelTo(socketPath);
    await expect(channel.call('/a/B', Buffer.from('1'), { timeoutMs: 5_000 })).rejects.toMatchObject({ code: GrpcStatus.UNAVAILABLE, details: expect.stringContaining('ENOENT') });
    const server = createServer();
    const sessions: ServerHttp2Session[] = [];
    server.on('session', (session) => sessions.push(session));
    server.on('stream', (stream) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => ok(stream, Buffer.concat(chunks), {}));
    });
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    cleanup.push(async () => {
      for (const session of sessions) session.destroy();
      await new Promise((resolve) => server.close(resolve));
    });
    expect((await channel.call('/a/B', Buffer.from('2'), { timeoutMs: 5_000 })).toString()).toBe('2');
  });
});
