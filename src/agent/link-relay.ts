/**
 * The link relay: under a cap, CRI-O pulls through the agent, so the agent asks for every byte
 * of a pull over the link only once it is paid on the cluster's ledger.
 *
 * Why: a CRI pull cannot be slowed. `PullImage` is one unary call, and CRI-O fetches each blob
 * at the link's speed, so an image charged whole before its pull still crossed in a burst: a
 * layer bigger than the cap's 5 s allowance put one window over the cap however the pulls were
 * spaced (measured: a 1 MiB layer at 64 KiB/s is 3x the cap over its 5 s). Through the relay a
 * blob is read upstream as Range parts of half a second of the cap, each paid before it is asked
 * for (`RegistryClient.blobStream` under a `LedgerMeter`), and streamed on to CRI-O as one answer.
 *
 * How CRI-O reaches it: the registries.conf drop-in the cache uses (`cache-mirror.ts`) names the
 * relay as the first digest-only mirror of each source, `HOST:PORT/TOKEN/SOURCE`. It serves only
 * the images the agent opened a session for, and in them only the manifests and blobs those
 * manifests name; anything else is 404, and containers/image goes on to the next mirror or the
 * source, as it does when the relay is down. TOKEN, random per agent start and written only to
 * the root-owned drop-in, keeps other pods on the network from pulling through the node's
 * credentials. Upstream it reads where CRI-O would have (the node's mirrors, then the source)
 * with the node's and the sets' pull secrets; manifests are verified against their digests and
 * whole blobs as they stream; a resumed blob (Range from CRI-O) is passed on unverified, and
 * CRI-O checks the whole layer's digest as it always does.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import { LedgerMeter, type LinkLedger } from '../net/link-meter.js';
import { RegistryClient } from '../registry/client.js';
import type { PullSecret } from '../registry/credentials.js';
import type { Descriptor } from '../registry/manifest.js';
import { formatReference, parseReference, type ImageReference } from '../registry/reference.js';
import type { CacheMirror } from './cache-mirror.js';
import { listen } from './http.js';
import { oneLine } from './one-line.js';
import { loadRegistriesConf, pullSources, type PullSource } from './registries-conf.js';

export interface LinkRelayOptions {
  /** Where to listen: `127.0.0.1:0` beside CRI-O on the host, `0.0.0.0:5055` in a pod. */
  readonly listen: { readonly host: string; readonly port: number };
  /** The host CRI-O dials (the pod's IP in the DaemonSet); default: the listen host. */
  readonly advertise?: string;
  readonly registriesConf: string;
  readonly registriesConfDir: string;
  readonly ledger: LinkLedger;
  readonly log: Logger;
  /** Per upstream request: connect, headers and idle body. */
  readonly requestTimeoutMs?: number;
}

/** One image's pull through the relay. */
export interface RelaySession {
  /** The pull is over: its reads end on the ledger. What the relay fetched upstream for it. */
  close(): Promise<{ readonly bytes: number; readonly requests: number }>;
}

interface Session {
  readonly image: ImageReference;
  readonly meter: LedgerMeter;
  readonly pullSecrets: readonly PullSecret[];
  /** Repositories CRI-O may ask under (`quay.io/org/repo`). */
  readonly repository: string;
  /** Manifests it may ask for, with their size where a list gave it. */
  readonly manifests: Map<string, number | undefined>;
  /** Manifest bytes fetched, for CRI-O's second read. */
  readonly fetched: Map<string, { bytes: Buffer; mediaType: string }>;
  /** Blobs the manifests named. */
  readonly blobs: Map<string, Descriptor>;
  /** Where the first manifest came from: the blobs are read there too. */
  source?: { client: RegistryClient; ref: ImageReference };
  readonly clients: RegistryClient[];
  bytes: number;
  requests: number;
}

const ROUTE = /^\/v2\/([A-Za-z0-9_-]+)\/(.+)\/(manifests|blobs)\/(sha256:[a-f0-9]{64})$/;
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/** The smallest slice a pull reserves: a manifest, a config and their heads. */
const MIN_SLICE_BYTES = 16 * 1024;

export class LinkRelay {
  private server: Server | undefined;
  private port = 0;
  private readonly token = randomBytes(16).toString('hex');
  private readonly sessions = new Map<string, Session>();

  constructor(private readonly options: LinkRelayOptions) {}

  async start(): Promise<void> {
    const server = createServer((req, res) => void this.serve(req, res));
    this.port = await listen(server, this.options.listen.port, this.options.listen.host);
    this.server = server;
    this.options.log.info({ listen: `${this.options.listen.host}:${this.port}` }, 'link relay listening');
  }

  /** The drop-in's mirrors: the relay first for each source registry. */
  mirrors(sources: readonly string[]): CacheMirror[] {
    const host = this.options.advertise ?? this.options.listen.host;
    const at = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
    return [...new Set(sources)].sort().map((source) => ({ source, location: `${at}:${this.port}/${this.token}/${source}` }));
  }

  /**
   * CRI-O may now pull `image` (a digest pullspec) through the relay; its reads pay on the ledger
   * at `capBytesPerSecond`, in slices no bigger than the pull is expected to move (`expectedBytes`):
   * a small image does not wait for room for a whole second of the cap it will not use.
   */
  open(image: string, capBytesPerSecond: number, pullSecrets: readonly PullSecret[], expectedBytes?: number): RelaySession {
    const ref = parseReference(image);
    if (!ref.digest) throw new Error(`${image} is not a digest pullspec`);
    const key = `${ref.registry}/${ref.repository}@${ref.digest}`;
    const second = Math.max(MIN_SLICE_BYTES, Math.round(capBytesPerSecond));
    const sliceBytes = expectedBytes && expectedBytes > 0 ? Math.min(second, Math.max(MIN_SLICE_BYTES, expectedBytes)) : second;
    const meter = new LedgerMeter(this.options.ledger, capBytesPerSecond, { sliceBytes });
    const session: Session = { image: ref, meter, pullSecrets, repository: `${ref.registry}/${ref.repository}`, manifests: new Map([[ref.digest, undefined]]), fetched: new Map(), blobs: new Map(), clients: [], bytes: 0, requests: 0 };
    this.sessions.set(key, session);
    return {
      close: async () => {
        if (this.sessions.get(key) === session) this.sessions.delete(key);
        await meter.finish();
        await Promise.all(session.clients.map((client) => client.close().catch(() => undefined)));
        return { bytes: session.bytes, requests: session.requests };
      },
    };
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.setHeader('docker-distribution-api-version', 'registry/2.0');
    const path = (req.url ?? '').split('?')[0]!;
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(res, 405, 'UNSUPPORTED', 'the link relay serves pulls only');
    if (path === '/v2/' || path === '/v2') return answer(res, 200);
    const route = ROUTE.exec(path);
    if (!route || !this.tokenMatches(route[1]!)) return answer(res, 404, 'NAME_UNKNOWN', 'not relayed');
    const [, , repository, kind, digest] = route as unknown as [string, string, string, 'manifests' | 'blobs', string];
    const session = this.sessionFor(repository, digest, kind);
    if (!session) return answer(res, 404, kind === 'manifests' ? 'MANIFEST_UNKNOWN' : 'BLOB_UNKNOWN', 'not relayed: no pull under way asks for it');
    try {
      if (kind === 'manifests') await this.serveManifest(session, digest, req, res);
      else await this.serveBlob(session, digest, req, res);
    } catch (error) {
      this.options.log.warn({ image: formatReference(session.image), digest, err: oneLine((error as Error).message, 300) }, 'link relay could not serve a pull');
      if (!res.headersSent) answer(res, 502, 'UNAVAILABLE', oneLine((error as Error).message, 300));
      else res.destroy();
    }
  }

  private tokenMatches(token: string): boolean {
    const given = Buffer.from(token);
    const own = Buffer.from(this.token);
    return given.length === own.length && timingSafeEqual(given, own);
  }

  private sessionFor(repository: string, digest: string, kind: 'manifests' | 'blobs'): Session | undefined {
    for (const session of this.sessions.values()) {
      if (session.repository !== repository) continue;
      if (kind === 'manifests' ? session.manifests.has(digest) : session.blobs.has(digest)) return session;
    }
    return undefined;
  }

  private async serveManifest(session: Session, digest: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    let fetched = session.fetched.get(digest);
    if (!fetched) {
      const got = await this.fetchManifest(session, digest);
      fetched = { bytes: got.bytes, mediaType: got.manifest.mediaType };
      session.fetched.set(digest, fetched);
      // What this manifest names may be asked for next, nothing else.
      if (got.manifest.kind === 'list') for (const entry of got.manifest.manifests) session.manifests.set(entry.digest, entry.size);
      else for (const blob of [got.manifest.config, ...got.manifest.layers]) session.blobs.set(blob.digest, blob);
    }
    res.writeHead(200, { 'content-type': fetched.mediaType, 'content-length': fetched.bytes.length, 'docker-content-digest': digest });
    res.end(req.method === 'HEAD' ? undefined : fetched.bytes);
  }

  /** The first source (the node's mirrors in order, then the registry) that has it; the session's blobs come from there. */
  private async fetchManifest(session: Session, digest: string) {
    if (session.source) {
      session.requests++;
      const got = await session.source.client.fetchManifest(session.source.ref, digest, session.manifests.get(digest));
      session.bytes += got.bytes.length;
      return got;
    }
    const conf = await loadRegistriesConf(this.options.registriesConf, this.options.registriesConfDir);
    const failures: string[] = [];
    for (const source of pullSources(conf, session.image)) {
      const client = this.clientFor(session, source);
      try {
        session.requests++;
        const got = await client.fetchManifest(source.ref, digest, session.manifests.get(digest));
        session.bytes += got.bytes.length;
        session.source = { client, ref: source.ref };
        return got;
      } catch (error) {
        failures.push(`${formatReference(source.ref)}: ${oneLine((error as Error).message, 200)}`);
      }
    }
    throw new Error(failures.join('; '));
  }

  private async serveBlob(session: Session, digest: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const blob = session.blobs.get(digest)!;
    const source = session.source;
    if (!source) throw new Error(`blob ${digest} asked before its manifest`);
    const range = /^bytes=(\d+)-$/.exec(String(req.headers.range ?? ''));
    const offset = range ? Number(range[1]) : 0;
    if (offset >= blob.size && blob.size > 0) return answer(res, 416, 'RANGE', `offset ${offset} past the blob's ${blob.size} bytes`);
    const headers = { 'content-type': 'application/octet-stream', 'docker-content-digest': digest, 'accept-ranges': 'bytes', 'content-length': blob.size - offset };
    if (req.method === 'HEAD') {
      res.writeHead(200, headers);
      return void res.end();
    }
    res.writeHead(offset > 0 ? 206 : 200, offset > 0 ? { ...headers, 'content-range': `bytes ${offset}-${blob.size - 1}/${blob.size}` } : headers);
    const body = offset > 0 ? Readable.from(source.client.blobPart(source.ref, blob, offset, blob.size)) : source.client.blobStream(source.ref, blob);
    session.requests++;
    body.on('data', (chunk: Buffer) => {
      session.bytes += chunk.length;
    });
    // CRI-O going away (a strict window's close, its own timeout) ends the upstream read with it.
    await pipeline(body, res);
  }

  private clientFor(session: Session, source: PullSource): RegistryClient {
    const timeoutMs = this.options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    const client = new RegistryClient({
      mirrors: [],
      pullSecrets: session.pullSecrets,
      insecureRegistries: source.insecure ? 'all' : [],
      retry: { attempts: 5, baseDelayMs: 500, maxDelayMs: 5_000 },
      concurrency: 8,
      stallTimeoutMs: timeoutMs,
      connectTimeoutMs: timeoutMs,
      linkMeter: session.meter,
    });
    session.clients.push(client);
    return client;
  }
}

/** A registry's answer: its error JSON, as containers/image reads one. */
function answer(res: ServerResponse, status: number, code?: string, message?: string): void {
  const body = Buffer.from(code ? JSON.stringify({ errors: [{ code, message }] }) : '{}');
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length });
  res.end(body);
}
