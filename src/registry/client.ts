/**
 * The registry client: manifests and blobs by reference, with every digest verified where
 * the bytes are read. One transport (auth, retries, concurrency) per registry host.
 */
import { createHash, type Hash } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { Readable } from 'node:stream';
import { BadInputError, DigestMismatchError, RegistryError } from '../errors.js';
import { dumpBody, type Dispatcher } from '../net/dispatcher.js';
import { PREPAID_BYTES } from '../net/link-rate.js';
import { READ_BOUNDS, readBounded } from '../net/read-bounded.js';
import { MANIFEST_ACCEPT, parseManifest, selectPlatform, listArchitectures, type Descriptor, type ImageManifest, type Manifest } from './manifest.js';
import { applyMirrors, type MirrorRule } from './mirrors.js';
import { formatReference, isDigest, type ImageReference } from './reference.js';
import { asRegistryError, shortPath } from './failure.js';
import { MIN_BODY_PROGRESS, RetryBudget, retrying } from './retry.js';
import { RegistryTransport, registryDispatcher, type TransportOptions } from './transport.js';
import { count } from '../plural.js';

export interface RegistryClientOptions extends TransportOptions {
  readonly mirrors: readonly MirrorRule[];
}

export interface FetchedManifest {
  /** sha256 of the bytes, checked against the requested digest and Docker-Content-Digest. */
  readonly digest: string;
  readonly bytes: Buffer;
  readonly manifest: Manifest;
}

export interface ResolvedImage {
  /** Digest of the manifest list the reference named, when it named one. */
  readonly listDigest?: string;
  /** Digest of the platform's image manifest. */
  readonly digest: string;
  readonly manifest: ImageManifest;
  readonly manifestBytes: number;
}

/** Bytes of a blob already held (a partial file) and their running hash: where a read continues. */
export interface BlobResume {
  readonly offset: number;
  readonly hash: Hash;
}

export interface ReadCounters {
  requests: number;
  bodyBytes: number;
}

export class RegistryClient {
  private readonly opts: RegistryClientOptions;
  private readonly dispatcher: Dispatcher;
  private readonly transports = new Map<string, RegistryTransport>();
  private readonly routes = new Map<string, { readonly transport: RegistryTransport; readonly repository: string }>();
  private readonly closing = new AbortController();
  /** What this client read from registries: for progress and the benchmark's byte count. */
  readonly counters: ReadCounters = { requests: 0, bodyBytes: 0 };
  /** Manifests read, by `registry/repository@digest`, once rememberManifests() asked for them. */
  private manifests: Map<string, FetchedManifest> | undefined;
  /** Small blobs read with `keep` (the node OS images' configs a plan reads), by digest, in the same mode. */
  private blobs: Map<string, Buffer> | undefined;

  constructor(opts: RegistryClientOptions) {
    this.opts = opts;
    // Every read waiting out a backoff listens: hundreds at once are expected, not a leak.
    setMaxListeners(Infinity, this.closing.signal);
    this.dispatcher = registryDispatcher(opts);
  }

  /**
   * Ends every read at once: after a fatal error the reads still running must neither retry
   * (their lines once followed the error) nor keep the process waiting out backoffs and stalls.
   */
  async close(): Promise<void> {
    this.closing.abort();
    await this.dispatcher.destroy();
  }

  /** Where a repository is read: mirror rules applied once per repository, not per request. */
  private transportFor(ref: ImageReference): { transport: RegistryTransport; repository: string } {
    const key = `${ref.registry}/${ref.repository}`;
    let route = this.routes.get(key);
    if (!route) {
      const at = applyMirrors(ref, this.opts.mirrors);
      let transport = this.transports.get(at.registry);
      if (!transport) {
        transport = new RegistryTransport(at.registry, this.opts, this.dispatcher, this.closing.signal);
        this.transports.set(at.registry, transport);
      }
      this.routes.set(key, (route = { transport, repository: at.repository }));
    }
    return route;
  }

  /**
   * From now on, keep every manifest read (small, and immutable by digest) and answer a later
   * read of the same digest from memory: `bundle create RELEASE` reads again the manifests its
   * plan read, a plan the release manifest it resolved. Small blobs read with `keep` (the
   * configs planning reads) are kept too, so the bundle reads them from memory. For one
   * command's client, not a long-lived one (the agent's), whose reads may be meant to reach a
   * registry again.
   */
  rememberManifests(): void {
    this.manifests ??= new Map();
    this.blobs ??= new Map();
  }

  /** The manifest a tag or digest names, verified. `declaredSize`: its size where a descriptor gives it (paid whole before it is asked for, under a meter). */
  async fetchManifest(ref: ImageReference, reference: string | undefined = ref.digest ?? ref.tag ?? 'latest', declaredSize?: number): Promise<FetchedManifest> {
    const known = this.manifests && isDigest(reference) ? this.manifests.get(`${ref.registry}/${ref.repository}@${reference}`) : undefined;
    if (known) return known;
    const { transport, repository } = this.transportFor(ref);
    const where = `${formatReference({ registry: ref.registry, repository: ref.repository })}${isDigest(reference) ? '@' : ':'}${reference}`;
    this.counters.requests++;
    const path = `${repository}/manifests/${reference}`;
    // One retry budget for the request and its body: a body that stalls or trickles is retried too.
    const { res, bytes } = await retrying(transport.retryHooks(path), async () => {
      const res = await transport.request(repository, path, { headers: { accept: MANIFEST_ACCEPT }, accept: [404], once: true, ...(declaredSize !== undefined && declaredSize >= 0 && declaredSize <= READ_BOUNDS.manifest && { expectedBytes: declaredSize }) });
      if (res.status === 404) {
        await dumpBody(res.body);
        throw new ManifestNotFoundError(`${where}: manifest not found (404); check the tag or digest, and --mirror if the image was mirrored`);
      }
      return { res, bytes: await readBounded(res.body, READ_BOUNDS.manifest, `${where} manifest`) };
    });
    this.counters.bodyBytes += bytes.length;
    const digest = sha256(bytes);
    if (isDigest(reference) && digest !== reference) {
      throw new DigestMismatchError(`${where}: manifest content has digest ${digest}, not the requested one; the registry or a proxy altered it`);
    }
    const header = res.headers['docker-content-digest'];
    if (typeof header === 'string' && isDigest(header) && header !== digest) {
      throw new DigestMismatchError(`${where}: registry says digest ${header} but content hashes to ${digest}`);
    }
    const contentType = res.headers['content-type'];
    const fetched = { digest, bytes, manifest: parseManifest(bytes, typeof contentType === 'string' ? contentType : undefined, where) };
    this.manifests?.set(`${ref.registry}/${ref.repository}@${digest}`, fetched);
    return fetched;
  }

  /** Follow a manifest list to the image manifest for `arch`. */
  async resolveImage(ref: ImageReference, arch: string, reference?: string): Promise<ResolvedImage> {
    const top = await this.fetchManifest(ref, reference);
    if (top.manifest.kind === 'image') return { digest: top.digest, manifest: top.manifest, manifestBytes: top.bytes.length };
    const entry = selectPlatform(top.manifest, arch);
    if (!entry) {
      throw new PlatformNotFoundError(`${formatReference(ref)} has no linux/${arch} image (it has ${listArchitectures(top.manifest).join(', ') || 'no platforms'}); pick one with --arch`);
    }
    const child = await this.fetchManifest(ref, entry.digest, entry.size);
    if (child.manifest.kind !== 'image') throw new RegistryError(`${formatReference(ref)}: the ${arch} entry ${entry.digest} is itself a list`);
    return { listDigest: top.digest, digest: child.digest, manifest: child.manifest, manifestBytes: top.bytes.length + child.bytes.length };
  }

  /**
   * A blob as a stream, verified against its digest and size as it is read. A connection that
   * breaks mid-blob is resumed with a Range request from the last byte received. With
   * `resume`, the stream starts after the bytes the caller already holds (and has hashed).
   */
  blobStream(ref: ImageReference, blob: Descriptor, resume?: BlobResume): Readable {
    return Readable.from(this.blobChunks(ref, blob, resume), { objectMode: false });
  }

  /**
   * One retry budget for the whole blob: a failed request and a broken body spend the same
   * attempts (no retries of retries), and a body that broke after real progress reconnects
   * with a Range request without spending one.
   */
  private async *blobChunks(ref: ImageReference, blob: Descriptor, resume?: BlobResume): AsyncGenerator<Buffer> {
    const { transport, repository } = this.transportFor(ref);
    const where = `${formatReference({ registry: ref.registry, repository: ref.repository })}@${blob.digest}`;
    const path = `${repository}/blobs/${blob.digest}`;
    const hash = resume?.hash ?? createHash('sha256');
    let received = resume?.offset ?? 0;
    const budget = blobBudget(transport, path, ref, blob, where, () => received);
    // Under a ledger meter a long blob is asked for in parts, each paid before it is sent: no
    // byte crosses the link before it was charged, whatever the buffers on the way hold.
    const part = transport.partBytes;
    let wholeAnswered = false;
    while (received < blob.size || (received === 0 && !resume)) {
      const startedAt = received;
      try {
        const end = part !== undefined && !wholeAnswered ? Math.min(blob.size, received + part) : blob.size;
        const bounded = part !== undefined && !wholeAnswered && (end < blob.size || received > 0);
        const headers: Record<string, string> = bounded ? { range: `bytes=${received}-${end - 1}` } : received > 0 ? { range: `bytes=${received}-` } : {};
        this.counters.requests++;
        const res = await transport.request(repository, path, { headers, once: true, expectedBytes: part !== undefined ? end - received : Math.min(blob.size - received, PREPAID_BYTES), bodyBytes: blob.size - received });
        // A server that ignores Range restarts at byte 0: skip what we already hashed, and read on to the end.
        if (res.status !== 206) wholeAnswered = true;
        let skip = received > 0 && res.status !== 206 ? received : 0;
        if (received > 0 && res.status === 206 && !String(res.headers['content-range'] ?? '').startsWith(`bytes ${received}-`)) {
          await dumpBody(res.body);
          throw new RegistryError(`${where}: resume at byte ${received} answered with range ${String(res.headers['content-range'])}`);
        }
        const partEnd = res.status === 206 ? end : blob.size;
        for await (const raw of res.body as AsyncIterable<Buffer>) {
          this.counters.bodyBytes += raw.length;
          let chunk = raw;
          if (skip > 0) {
            const n = Math.min(skip, chunk.length);
            skip -= n;
            chunk = chunk.subarray(n);
            if (chunk.length === 0) continue;
          }
          received += chunk.length;
          if (received > blob.size) throw new DigestMismatchError(`${where}: blob is longer than the ${blob.size} bytes its manifest declares`);
          if (received > partEnd) throw new DigestMismatchError(`${where}: asked for bytes up to ${partEnd - 1}, the registry sent more`);
          hash.update(chunk);
          yield chunk;
        }
        if (received < partEnd) throw Object.assign(new Error(`short body: ${received} of ${blob.size} bytes`), { code: 'ECONNRESET' });
        if (received >= blob.size) break;
      } catch (err) {
        await budget.failed(err, received - startedAt >= MIN_BODY_PROGRESS);
      }
    }
    const digest = `sha256:${hash.digest('hex')}`;
    if (digest !== blob.digest) throw new DigestMismatchError(`${where}: content hashes to ${digest}; the registry or a proxy corrupted it`);
  }

  /**
   * Bytes `start` to `end` (exclusive) of a blob through Range requests, for parallel parts of
   * a big blob; NOT verified here: the caller hashes the whole blob in order before trusting
   * any of it. One retry budget for the part; a break after real progress continues where it
   * stopped. Throws RangesRefused when the registry answers the first request with the whole
   * blob (200): it does not serve ranges, so the caller reads the blob in one stream.
   */
  async *blobPart(ref: ImageReference, blob: Descriptor, start: number, end: number): AsyncGenerator<Buffer> {
    const { transport, repository } = this.transportFor(ref);
    const where = `${formatReference({ registry: ref.registry, repository: ref.repository })}@${blob.digest}`;
    const path = `${repository}/blobs/${blob.digest}`;
    let received = start;
    const budget = blobBudget(transport, path, ref, blob, where, () => received);
    // Under a ledger meter, in parts each paid before it is asked for (as blobStream).
    const part = transport.partBytes;
    while (received < end) {
      const startedAt = received;
      try {
        this.counters.requests++;
        const partEnd = part === undefined ? end : Math.min(end, received + part);
        const res = await transport.request(repository, path, { headers: { range: `bytes=${received}-${partEnd - 1}` }, once: true });
        if (res.status !== 206) {
          res.body.destroy();
          if (received === start && start === 0) throw new RangesRefused(`${where}: the registry answered a Range request with the whole blob`);
          throw new RegistryError(`${where}: the registry stopped honouring Range requests at byte ${received}`);
        }
        const range = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(String(res.headers['content-range'] ?? ''));
        if (!range || Number(range[1]) !== received || Number(range[2]) !== partEnd - 1 || Number(range[3]) !== blob.size) {
          res.body.destroy();
          throw new DigestMismatchError(`${where}: asked for bytes ${received}-${partEnd - 1} of ${blob.size}, the registry answered ${String(res.headers['content-range'])}`);
        }
        for await (const chunk of res.body as AsyncIterable<Buffer>) {
          this.counters.bodyBytes += chunk.length;
          received += chunk.length;
          if (received > partEnd) throw new DigestMismatchError(`${where}: the registry sent more than bytes ${start}-${end - 1}`);
          yield chunk;
        }
        if (received < partEnd) throw Object.assign(new Error(`short body: ${received - start} of ${end - start} bytes`), { code: 'ECONNRESET' });
      } catch (err) {
        await budget.failed(err, received - startedAt >= MIN_BODY_PROGRESS);
      }
    }
  }

  /** A small blob (an image config) in memory, verified; `keep`: remembered for later reads (rememberManifests). */
  async readBlob(ref: ImageReference, blob: Descriptor, maxBytes: number, keep = false): Promise<Buffer> {
    if (blob.size > maxBytes) throw new RegistryError(`${formatReference(ref)}: blob ${blob.digest} is ${blob.size} bytes, more than the ${maxBytes} expected`);
    const known = this.blobs?.get(blob.digest);
    if (known) return known;
    const parts: Buffer[] = [];
    for await (const chunk of this.blobChunks(ref, blob)) parts.push(chunk);
    const bytes = Buffer.concat(parts);
    if (keep) this.blobs?.set(blob.digest, bytes);
    return bytes;
  }

  /**
   * The last `n` bytes of a blob through a suffix Range request, or undefined when the
   * registry does not honour ranges (the caller falls back rather than reading the blob).
   * The size in Content-Range must match the descriptor's.
   */
  async readBlobTail(ref: ImageReference, blob: Descriptor, n: number): Promise<Buffer | undefined> {
    if (blob.size < n) return undefined;
    const { transport, repository } = this.transportFor(ref);
    this.counters.requests++;
    const res = await transport.request(repository, `${repository}/blobs/${blob.digest}`, { headers: { range: `bytes=-${n}` }, accept: [416] });
    if (res.status !== 206) {
      res.body.destroy();
      return undefined;
    }
    const range = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(String(res.headers['content-range'] ?? ''));
    const bytes = await readBounded(res.body, n, `${formatReference(ref)} blob ${blob.digest} tail`);
    this.counters.bodyBytes += bytes.length;
    if (!range || Number(range[3]) !== blob.size || Number(range[1]) !== blob.size - n || bytes.length !== n) {
      throw new DigestMismatchError(`${formatReference(ref)}: blob ${blob.digest} range reply ${String(res.headers['content-range'])} does not match its declared size ${blob.size}`);
    }
    return bytes;
  }
}

/** One blob transfer's retry budget (whole stream or a Range part); its messages name the byte it got to. */
function blobBudget(transport: RegistryTransport, path: string, ref: ImageReference, blob: Descriptor, where: string, received: () => number): RetryBudget {
  const hooks = transport.retryHooks(path);
  return new RetryBudget({
    ...hooks,
    onRetry: (notice) => hooks.onRetry?.({ ...notice, reason: `${notice.reason} at byte ${received()}` }),
    exhausted: (reason, attempts, last) => new RegistryError(`${where}: blob transfer kept failing (${reason}) at byte ${received()} of ${blob.size} after ${count(attempts, 'attempt')}`, { cause: last }),
    fatal: (err) => asRegistryError(err, ref.registry, `blob ${shortPath(blob.digest)}`),
  });
}

export class ManifestNotFoundError extends RegistryError {}
/** The registry answered a Range request with the whole blob: read it in one stream instead. */
export class RangesRefused extends RegistryError {}
/** The user asked for an architecture the image does not have: bad input. */
export class PlatformNotFoundError extends BadInputError {}

export function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}
