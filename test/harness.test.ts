/**
 * Proves the integration-test harness is real: registries speak the distribution API with
 * each auth mode, and every fault of the fault proxy fires. Uses undici and raw sockets,
 * never the prestage client.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { linkWindows } from './harness/fault-proxy.js';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';

const REPOSITORY = 'harness/blobs';
const SMALL = Buffer.from('hello from the prestage harness\n');
const LARGE = randomBytes(1024 * 1024);

let anonymous: RegistryHandle;
let basic: RegistryHandle;
let token: RegistryHandle;
let tls: RegistryHandle;
let smallDigest: string;
let largeDigest: string;

beforeAll(async () => {
  anonymous = await startRegistry();
  smallDigest = await pushBlob(anonymous.url, REPOSITORY, SMALL);
  largeDigest = await pushBlob(anonymous.url, REPOSITORY, LARGE);
  const shared = { storageDir: anonymous.storageDir };
  [basic, token, tls] = await Promise.all([
    startRegistry({ ...shared, auth: 'basic' }),
    startRegistry({ ...shared, auth: 'token' }),
    startRegistry({ ...shared, tls: true }),
  ]);
});

afterAll(async () => {
  await Promise.all([basic?.stop(), token?.stop(), tls?.stop()]);
  await anonymous?.stop();
});

describe('registries', () => {
  it('an anonymous registry takes a pushed blob and serves it back', async () => {
    expect(anonymous.host).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(anonymous.url).toBe(`http://${anonymous.host}`);
    const response = await request(`${anonymous.url}/v2/${REPOSITORY}/blobs/${smallDigest}`);
    expect(response.statusCode).toBe(200);
    expect(response.headers['docker-content-digest']).toBe(smallDigest);
    expect(Buffer.from(await response.body.arrayBuffer())).toEqual(SMALL);
  });

  it('a basic-auth registry sharing the storage answers 401 without credentials and 200 with them', async () => {
    const blobUrl = `${basic.url}/v2/${REPOSITORY}/blobs/${smallDigest}`;
    const anonymousRead = await request(blobUrl);
    await anonymousRead.body.dump();
    expect(anonymousRead.statusCode).toBe(401);
    expect(anonymousRead.headers['www-authenticate']).toMatch(/^Basic realm="/);

    const authorization = `Basic ${Buffer.from(`${basic.username}:${basic.password}`).toString('base64')}`;
    const read = await request(blobUrl, { headers: { authorization } });
    expect(read.statusCode).toBe(200);
    expect(Buffer.from(await read.body.arrayBuffer())).toEqual(SMALL);
  });

  describe('token auth', () => {
    const issuer = (): NonNullable<RegistryHandle['tokenIssuer']> => token.tokenIssuer!;
    const basicAuth = (password: string): string =>
      `Basic ${Buffer.from(`${token.username}:${password}`).toString('base64')}`;

    afterEach(() => {
      issuer().quayMode = false;
      issuer().expiresIn = 300;
      issuer().resetStats();
    });

    it('challenges with a Bearer realm and service, and accepts the token the realm issues', async () => {
      const challenge = await request(`${token.url}/v2/`);
      await challenge.body.dump();
      expect(challenge.statusCode).toBe(401);
      const { realm, service } = parseBearerChallenge(String(challenge.headers['www-authenticate']));
      expect(realm).toBe(issuer().realm);
      expect(service).toBe(issuer().service);

      const issued = await fetchToken(realm, service, REPOSITORY, basicAuth(token.password!));
      expect(issued.statusCode).toBe(200);
      expect(issued.body.token).toBe(issued.body.access_token);
      expect(issued.body.expires_in).toBe(300);
      const [header, claims] = decodeJwt(issued.body.token);
      expect(header).toMatchObject({ alg: 'ES256', x5c: [expect.any(String)] });
      expect(claims).toMatchObject({
        iss: issuer().issuer,
        sub: token.username,
        aud: service,
        access: [{ type: 'repository', name: REPOSITORY, actions: ['pull'] }],
      });

      const read = await request(`${token.url}/v2/${REPOSITORY}/blobs/${smallDigest}`, {
        headers: { authorization: `Bearer ${issued.body.token}` },
      });
      expect(read.statusCode).toBe(200);
      expect(Buffer.from(await read.body.arrayBuffer())).toEqual(SMALL);
      expect(issuer().requests).toBe(1);
      expect(issuer().log).toEqual([{
        scopes: [`repository:${REPOSITORY}:pull`],
        hadAuthorization: true,
        authenticated: true,
        granted: [{ type: 'repository', name: REPOSITORY, actions: ['pull'] }],
      }]);
    });

    it('refuses a wrong password, and missing credentials, with 401', async () => {
      const wrong = await fetchToken(issuer().realm, issuer().service, REPOSITORY, basicAuth('wrong'));
      expect(wrong.statusCode).toBe(401);
      const missing = await fetchToken(issuer().realm, issuer().service, REPOSITORY, undefined);
      expect(missing.statusCode).toBe(401);
      expect(issuer().log.map((entry) => entry.hadAuthorization)).toEqual([true, false]);
      expect(JSON.stringify(issuer().log)).not.toContain('wrong');
    });

    it('in Quay mode gives a wrong password a token without access, which the registry refuses with 401', async () => {
      issuer().quayMode = true;
      const issued = await fetchToken(issuer().realm, issuer().service, REPOSITORY, basicAuth('wrong'));
      expect(issued.statusCode).toBe(200);
      expect(decodeJwt(issued.body.token)[1]).toMatchObject({ access: [] });

      const read = await request(`${token.url}/v2/${REPOSITORY}/blobs/${smallDigest}`, {
        headers: { authorization: `Bearer ${issued.body.token}` },
      });
      await read.body.dump();
      expect(read.statusCode).toBe(401);
      expect(read.headers['www-authenticate']).toContain('error="insufficient_scope"');
    });

    it('issues tokens with the configured lifetime', async () => {
      issuer().expiresIn = 30;
      const issued = await fetchToken(issuer().realm, issuer().service, REPOSITORY, basicAuth(token.password!));
      expect(issued.body.expires_in).toBe(30);
      const claims = decodeJwt(issued.body.token)[1] as { exp: number; iat: number };
      expect(claims.exp - claims.iat).toBe(30);
    });
  });

  it('a TLS registry is reachable with its CA and refused without it', async () => {
    expect(tls.url).toBe(`https://${tls.host}`);
    const trusting = new Agent({ connect: { ca: await readFile(tls.caFile!) } });
    try {
      const read = await request(`${tls.url}/v2/${REPOSITORY}/blobs/${smallDigest}`, { dispatcher: trusting });
      expect(read.statusCode).toBe(200);
      expect(Buffer.from(await read.body.arrayBuffer())).toEqual(SMALL);
    } finally {
      await trusting.close();
    }
    await expect(request(`${tls.url}/v2/`)).rejects.toThrow(/certificate/i);
  });

  it('a TLS token registry serves its realm over TLS under the same CA', async () => {
    const registry = await startRegistry({ storageDir: anonymous.storageDir, auth: 'token', tls: true });
    const trusting = new Agent({ connect: { ca: await readFile(registry.caFile!) } });
    try {
      expect(registry.tokenIssuer!.realm).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/token$/);
      const credentials = Buffer.from(`${registry.username}:${registry.password}`).toString('base64');
      const issued = await fetchToken(registry.tokenIssuer!.realm, registry.tokenIssuer!.service, REPOSITORY,
        `Basic ${credentials}`, trusting);
      const read = await request(`${registry.url}/v2/${REPOSITORY}/blobs/${smallDigest}`, {
        dispatcher: trusting,
        headers: { authorization: `Bearer ${issued.body.token}` },
      });
      expect(read.statusCode).toBe(200);
      await read.body.dump();
    } finally {
      await trusting.close();
      await registry.stop();
    }
  });
});

describe('fault proxy', () => {
  let proxy: FaultProxy;
  const blobPath = (digest: string): string => `/v2/${REPOSITORY}/blobs/${digest}`;

  beforeAll(async () => {
    proxy = await startFaultProxy({ upstream: anonymous.url });
  });
  afterAll(async () => {
    await proxy?.stop();
  });
  afterEach(() => {
    proxy.clearFaults();
    proxy.setLatency(0);
    proxy.setBandwidth(null);
    proxy.redirectBlobsToCdn(false);
    proxy.resetStats();
  });

  it('forwards transparently, and upload Locations point back at the proxy', async () => {
    const read = await request(`${proxy.url}${blobPath(smallDigest)}`);
    expect(read.statusCode).toBe(200);
    expect(read.headers['docker-content-digest']).toBe(smallDigest);
    expect(Buffer.from(await read.body.arrayBuffer())).toEqual(SMALL);

    const pushed = await pushBlob(proxy.url, 'harness/through-proxy', Buffer.from('pushed via the proxy'));
    expect(proxy.stats.log.map((entry) => [entry.method, entry.status])).toEqual([['GET', 200], ['POST', 202], ['PUT', 201]]);
    expect(proxy.stats.log[2]?.target).toMatch(/^\/v2\/harness\/through-proxy\/blobs\/uploads\//);
    expect(pushed).toMatch(/^sha256:/);
  });

  it('injects 429 with Retry-After and an HTML body, only as many times as asked', async () => {
    proxy.inject({ match: /\/blobs\//, times: 2, fault: { kind: 'status', status: 429, retryAfter: 1 } });
    for (let attempt = 0; attempt < 2; attempt++) {
      const limited = await request(`${proxy.url}${blobPath(smallDigest)}`);
      expect(limited.statusCode).toBe(429);
      expect(limited.headers['retry-after']).toBe('1');
      expect(limited.headers['content-type']).toBe('text/html');
      expect(await limited.body.text()).toContain('<h1>429 Too Many Requests</h1>');
    }
    const served = await request(`${proxy.url}${blobPath(smallDigest)}`);
    await served.body.dump();
    expect(served.statusCode).toBe(200);
    expect(proxy.stats.log.map((entry) => entry.fault)).toEqual(['status', 'status', undefined]);
  });

  it.each([502, 503, 504])('injects %i', async (status) => {
    proxy.inject({ match: /^\/v2\/$/, fault: { kind: 'status', status } });
    const failed = await request(`${proxy.url}/v2/`);
    expect(failed.statusCode).toBe(status);
    expect(await failed.body.text()).toContain(`<title>${status} `);
  });

  it('reset: sends the headers and N body bytes, then resets the connection', async () => {
    proxy.inject({ match: /\/blobs\//, fault: { kind: 'reset', afterBytes: 1000 } });
    const reply = await rawGet(proxy.host, blobPath(largeDigest));
    expect(reply.status).toBe(200);
    expect(reply.headers['content-length']).toBe(String(LARGE.length));
    expect(reply.ending).toBe('reset');
    expect(reply.body).toEqual(LARGE.subarray(0, 1000));
    expect(proxy.stats.log[0]).toMatchObject({ fault: 'reset', bytesSent: 1000 });

    proxy.inject({ match: /\/blobs\//, fault: { kind: 'reset', afterBytes: 0 } });
    const read = await request(`${proxy.url}${blobPath(largeDigest)}`);
    expect(read.statusCode).toBe(200);
    await expect(read.body.arrayBuffer()).rejects.toThrow();
  });

  it('truncate: sends fewer bytes than Content-Length, then closes cleanly', async () => {
    proxy.inject({ match: /\/blobs\//, fault: { kind: 'truncate', afterBytes: 4096 } });
    const reply = await rawGet(proxy.host, blobPath(largeDigest));
    expect(reply.headers['content-length']).toBe(String(LARGE.length));
    expect(reply.ending).toBe('close');
    expect(reply.body).toEqual(LARGE.subarray(0, 4096));
  });

  it('stall: sends N body bytes, then nothing until the client gives up', async () => {
    proxy.inject({ match: /\/blobs\//, fault: { kind: 'stall', afterBytes: 10 } });
    const reply = await rawGet(proxy.host, blobPath(largeDigest), 300);
    expect(reply.ending).toBe('timeout');
    expect(reply.body).toEqual(LARGE.subarray(0, 10));
  });

  it('corrupt: keeps the length and changes the sha256', async () => {
    proxy.inject({ match: /\/blobs\//, fault: { kind: 'corrupt' } });
    const read = await request(`${proxy.url}${blobPath(largeDigest)}`);
    const body = Buffer.from(await read.body.arrayBuffer());
    expect(body.length).toBe(LARGE.length);
    expect(`sha256:${sha256(body)}`).not.toBe(largeDigest);
    const differing = [...body.keys()].filter((index) => body[index] !== LARGE[index]);
    expect(differing).toEqual([LARGE.length / 2]);
  });

  it('redirects blob GETs to the cdn, which refuses Authorization and serves bytes and ranges', async () => {
    proxy.redirectBlobsToCdn(true);
    const redirected = await request(`${proxy.url}${blobPath(largeDigest)}`);
    await redirected.body.dump();
    expect(redirected.statusCode).toBe(307);
    const location = String(redirected.headers.location);
    expect(location.startsWith(`${proxy.cdnUrl}/`)).toBe(true);
    expect(new URL(location).searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);

    const withAuthorization = await request(location, { headers: { authorization: 'Bearer leaked' } });
    expect(withAuthorization.statusCode).toBe(400);
    expect(await withAuthorization.body.text()).toContain('Only one auth mechanism allowed');

    const whole = await request(location);
    expect(whole.statusCode).toBe(200);
    expect(sha256(Buffer.from(await whole.body.arrayBuffer()))).toBe(largeDigest.slice('sha256:'.length));

    const part = await request(location, { headers: { range: 'bytes=100-199' } });
    expect(part.statusCode).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 100-199/${LARGE.length}`);
    expect(Buffer.from(await part.body.arrayBuffer())).toEqual(LARGE.subarray(100, 200));

    const forged = await request(location.replace(/X-Amz-Signature=[0-9a-f]+/, `X-Amz-Signature=${'0'.repeat(64)}`));
    await forged.body.dump();
    expect(forged.statusCode).toBe(403);
    expect(proxy.stats.log.map((entry) => `${entry.origin} ${entry.status}`))
      .toEqual(['registry 307', 'cdn 400', 'cdn 200', 'cdn 206', 'cdn 403']);
  });

  it('redirects only reads the client may make; the cdn reads with the original credentials', async () => {
    const guarded = await startFaultProxy({ upstream: token.url });
    try {
      guarded.redirectBlobsToCdn(true);
      const refused = await request(`${guarded.url}${blobPath(smallDigest)}`);
      await refused.body.dump();
      expect(refused.statusCode).toBe(401);

      const credentials = Buffer.from(`${token.username}:${token.password}`).toString('base64');
      const issued = await fetchToken(token.tokenIssuer!.realm, token.tokenIssuer!.service, REPOSITORY, `Basic ${credentials}`);
      const redirected = await request(`${guarded.url}${blobPath(smallDigest)}`, {
        headers: { authorization: `Bearer ${issued.body.token}` },
      });
      await redirected.body.dump();
      expect(redirected.statusCode).toBe(307);
      const read = await request(String(redirected.headers.location));
      expect(read.statusCode).toBe(200);
      expect(Buffer.from(await read.body.arrayBuffer())).toEqual(SMALL);
    } finally {
      await guarded.stop();
    }
  });

  it('faults can target one origin with a predicate', async () => {
    proxy.redirectBlobsToCdn(true);
    proxy.inject({ match: (req) => req.origin === 'cdn', fault: { kind: 'status', status: 503 } });
    const redirected = await request(`${proxy.url}${blobPath(smallDigest)}`);
    await redirected.body.dump();
    expect(redirected.statusCode).toBe(307);
    const failed = await request(String(redirected.headers.location));
    await failed.body.dump();
    expect(failed.statusCode).toBe(503);
  });

  it('latency delays every request by at least the set time', async () => {
    proxy.setLatency(150);
    const started = performance.now();
    const reply = await request(`${proxy.url}/v2/`);
    await reply.body.dump();
    expect(performance.now() - started).toBeGreaterThanOrEqual(150);
  });

  it('the bandwidth cap holds a 1 MB read to the rate (whole, never faster)', async () => {
    const rate = 2 * 1024 * 1024;
    proxy.setBandwidth(rate);
    const started = performance.now();
    const read = await request(`${proxy.url}${blobPath(largeDigest)}`);
    const body = Buffer.from(await read.body.arrayBuffer());
    const seconds = (performance.now() - started) / 1000;
    expect(body.length).toBe(LARGE.length);
    // Never faster than the cap; how close to it the proxy keeps a read is a speed: `npm run bench:harness`.
    expect(body.equals(LARGE)).toBe(true);
    expect(body.length / seconds).toBeLessThan(rate * 1.15);
  });

  it('counts requests and body bytes sent, and resets the counts', async () => {
    const read = await request(`${proxy.url}${blobPath(largeDigest)}`, { headers: { range: 'bytes=0-99' } });
    await read.body.dump();
    expect(proxy.stats).toMatchObject({ requests: 1, bytesSent: 100 });
    expect(proxy.stats.log[0]).toMatchObject({ method: 'GET', status: 206, range: 'bytes=0-99', bytesSent: 100 });
    // The body's first and last byte were stamped, in order (what bench:bundle's link use reads).
    expect(proxy.stats.firstByteAt).toBeGreaterThan(0);
    expect(proxy.stats.lastByteAt).toBeGreaterThanOrEqual(proxy.stats.firstByteAt);
    proxy.resetStats();
    expect(proxy.stats).toEqual({ requests: 0, bytesSent: 0, firstByteAt: 0, lastByteAt: 0, perSecond: new Map(), log: [] });
  });

  it('logs body bytes per second on both origins: the buckets add up to the bytes sent', async () => {
    // 1.5 MiB at 1 MiB/s, so the bytes land in two or three seconds; two thirds through the cdn.
    const rate = 1024 * 1024;
    proxy.setBandwidth(rate);
    const started = Math.floor(Date.now() / 1000);
    const first = await request(`${proxy.url}${blobPath(largeDigest)}`, { headers: { range: 'bytes=0-524287' } });
    expect((await first.body.arrayBuffer()).byteLength).toBe(512 * 1024);
    proxy.redirectBlobsToCdn(true);
    const redirected = await request(`${proxy.url}${blobPath(largeDigest)}`);
    await redirected.body.dump();
    expect(redirected.statusCode).toBe(307);
    const fromCdn = await request(String(redirected.headers.location));
    expect(Buffer.from(await fromCdn.body.arrayBuffer())).toEqual(LARGE);
    const ended = Math.floor(Date.now() / 1000);

    const { perSecond, bytesSent, log } = proxy.stats;
    expect(log.map((r) => `${r.origin} ${r.status} ${r.bytesSent}`)).toEqual(['registry 206 524288', 'registry 307 0', `cdn 200 ${LARGE.length}`]);
    expect(bytesSent).toBe(512 * 1024 + LARGE.length);
    expect([...perSecond.values()].reduce((a, b) => a + b, 0)).toBe(bytesSent);
    // Each bucket is a second the bytes were written in: inside the run, more than one.
    expect(perSecond.size).toBeGreaterThanOrEqual(2);
    for (const second of perSecond.keys()) expect(second >= started && second <= ended, `second ${second} of ${started}..${ended}`).toBe(true);
    const busiest = linkWindows(perSecond, 1);
    expect(busiest.seconds).toBe(Math.max(...perSecond.keys()) - Math.min(...perSecond.keys()) + 1);
    expect(busiest.maxBytesPerSecond).toBeLessThanOrEqual(rate * 1.1);
    proxy.resetStats();
    expect(proxy.stats.perSecond.size).toBe(0);
  });

  it('a window holds what a client has not read: over loopback the kernel would take it all', async () => {
    const unread = async (): Promise<number> => {
      proxy.resetStats();
      // A connection of its own: not a kept-alive socket an earlier test's faults left behind.
      const dispatcher = new Agent({ pipelining: 0 });
      try {
        const read = await request(`${proxy.url}${blobPath(largeDigest)}`, { dispatcher });
        // The client reads nothing for a while: only the kernel's buffers (or the window) take bytes.
        await new Promise((resolve) => setTimeout(resolve, 500));
        const sent = proxy.stats.bytesSent;
        expect(Buffer.from(await read.body.arrayBuffer())).toEqual(LARGE);
        expect(proxy.stats.bytesSent).toBe(LARGE.length);
        return sent;
      } finally {
        await dispatcher.close();
      }
    };
    expect(await unread()).toBe(LARGE.length);
    proxy.setWindow(64 * 1024);
    try {
      // The window, and what the client's own buffers took out of it.
      expect(await unread()).toBeLessThanOrEqual(512 * 1024);
    } finally {
      proxy.setWindow(null);
    }
    // A deadline, not a pace: this test took 10 s idle, 40 s beside 8 busy processes, and over
    // 60 s beside them and two other files (test:load).
  }, 180_000);
});

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A monolithic blob upload: POST for an upload URL, then PUT the bytes with the digest. */
async function pushBlob(registryUrl: string, repository: string, bytes: Buffer): Promise<string> {
  const digest = `sha256:${sha256(bytes)}`;
  const started = await request(`${registryUrl}/v2/${repository}/blobs/uploads/`, { method: 'POST' });
  await started.body.dump();
  expect(started.statusCode).toBe(202);
  const upload = new URL(String(started.headers.location), registryUrl);
  expect(upload.origin).toBe(registryUrl);
  upload.searchParams.set('digest', digest);
  const finished = await request(upload, {
    method: 'PUT',
    headers: { 'content-type': 'application/octet-stream' },
    body: bytes,
  });
  await finished.body.dump();
  expect(finished.statusCode).toBe(201);
  return digest;
}

function parseBearerChallenge(header: string): { realm: string; service: string } {
  expect(header).toMatch(/^Bearer /);
  const params = Object.fromEntries([...header.matchAll(/(\w+)="([^"]*)"/g)].map((match) => [match[1], match[2]]));
  return { realm: params.realm ?? '', service: params.service ?? '' };
}

interface TokenReply {
  statusCode: number;
  body: { token: string; access_token: string; expires_in: number };
}

async function fetchToken(realm: string, service: string, repository: string, authorization: string | undefined,
  dispatcher?: Agent): Promise<TokenReply> {
  const url = new URL(realm);
  url.searchParams.set('service', service);
  url.searchParams.set('scope', `repository:${repository}:pull`);
  const reply = await request(url, {
    ...(dispatcher && { dispatcher }),
    ...(authorization !== undefined && { headers: { authorization } }),
  });
  return { statusCode: reply.statusCode, body: (await reply.body.json()) as TokenReply['body'] };
}

function decodeJwt(jwt: string): [unknown, unknown] {
  const [header = '', claims = ''] = jwt.split('.');
  return [JSON.parse(Buffer.from(header, 'base64url').toString()), JSON.parse(Buffer.from(claims, 'base64url').toString())];
}

interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** How the connection ended: FIN, RST, or our own timeout. */
  ending: 'close' | 'reset' | 'timeout';
}

/**
 * A keep-alive HTTP/1.1 GET over a bare socket, so the way the server ends the connection
 * (FIN, RST, silence) is visible rather than folded into one client error.
 */
function rawGet(host: string, path: string, timeoutMs = 5_000): Promise<RawReply> {
  const [hostname = '', port = ''] = host.split(':');
  return new Promise((resolve) => {
    const socket = connect({ port: Number(port), host: hostname, allowHalfOpen: true });
    const chunks: Buffer[] = [];
    const finish = (ending: RawReply['ending']): void => {
      clearTimeout(timer);
      socket.destroy();
      const received = Buffer.concat(chunks);
      const headEnd = received.indexOf('\r\n\r\n');
      const [statusLine = '', ...headerLines] = received.subarray(0, headEnd).toString().split('\r\n');
      const headers = Object.fromEntries(headerLines.map((line) => {
        const colon = line.indexOf(':');
        return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()];
      }));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: received.subarray(headEnd + 4), ending });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // Node reports a reset after data as a plain end; a write after it tells them apart.
    socket.once('end', () => socket.write('\r\n', (error) => finish(error ? 'reset' : 'close')));
    socket.once('error', (error: NodeJS.ErrnoException) => finish(error.code === 'ECONNRESET' ? 'reset' : 'close'));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  });
}
