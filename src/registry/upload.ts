/**
 * The write side of the registry API for one target registry: blob presence (HEAD),
 * cross-repository mounts, monolithic blob uploads streamed from the caller, manifests put
 * by digest, and tags. Same transport as reads (auth, TLS, retries, concurrency), with tokens
 * scoped `pull,push`.
 */
import type { Readable } from 'node:stream';
import { DigestMismatchError, RegistryError } from '../errors.js';
import { dumpBody, type Dispatcher } from '../net/dispatcher.js';
import { MANIFEST_ACCEPT } from './manifest.js';
import { RetryBudget } from './retry.js';
import { RegistryTransport, registryDispatcher, type RegistryResponse, type RequestOptions, type TransportOptions } from './transport.js';

export interface BlobToPush {
  readonly digest: string;
  readonly size: number;
}

export interface PushCounters {
  requests: number;
  /** Bytes of blobs uploaded (mounts and blobs already present send none). */
  bytesUploaded: number;
}

export class PushClient {
  readonly registry: string;
  readonly counters: PushCounters = { requests: 0, bytesUploaded: 0 };
  private readonly dispatcher: Dispatcher;
  private readonly transport: RegistryTransport;

  constructor(registry: string, opts: TransportOptions) {
    this.registry = registry;
    this.dispatcher = registryDispatcher(opts);
    this.transport = new RegistryTransport(registry, opts, this.dispatcher);
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  async hasBlob(repository: string, digest: string): Promise<boolean> {
    const res = await this.send(repository, `${repository}/blobs/${digest}`, { method: 'HEAD', accept: [404] });
    return res.status === 200;
  }

  async hasManifest(repository: string, digest: string): Promise<boolean> {
    const res = await this.send(repository, `${repository}/manifests/${digest}`, { method: 'HEAD', headers: { accept: MANIFEST_ACCEPT }, accept: [404] });
    return res.status === 200;
  }

  /** The digest a tag (or digest) names in `repository`, from HEAD's Docker-Content-Digest; undefined when absent. */
  async manifestDigest(repository: string, reference: string): Promise<string | undefined> {
    const res = await this.send(repository, `${repository}/manifests/${reference}`, { method: 'HEAD', headers: { accept: MANIFEST_ACCEPT }, accept: [404] });
    const digest = res.headers['docker-content-digest'];
    return res.status === 200 && typeof digest === 'string' ? digest : undefined;
  }

  /**
   * Mount a blob from another repository of this registry without sending its bytes.
   * False when the registry would not (it then opened an upload session, which is cancelled).
   */
  async mountBlob(repository: string, digest: string, from: string): Promise<boolean> {
    const started = await this.startUpload(repository, { digest, from });
    if (started.mounted) return true;
    await this.send(repository, started.location, { method: 'DELETE', accept: [404] });
    return false;
  }

  /**
   * Upload a blob: POST to open a session (mounting from `mountFrom` when given), then one
   * PUT of the whole body with its digest, which the registry verifies. A session does not
   * survive a half-sent body, so a transient failure starts a new session. `open` must give
   * the blob's bytes from the start on every call.
   */
  async uploadBlob(repository: string, blob: BlobToPush, open: () => Readable, mountFrom?: string): Promise<'mounted' | 'uploaded'> {
    const budget = new RetryBudget(this.transport.retryHooks(`upload of ${blob.digest} to ${repository}`, `${this.registry}/v2/${repository}/blobs/uploads/`));
    for (;;) {
      const started = await this.startUpload(repository, mountFrom ? { digest: blob.digest, from: mountFrom } : undefined);
      if (started.mounted) return 'mounted';
      const target = new URL(started.location);
      target.searchParams.set('digest', blob.digest);
      try {
        await this.send(repository, target.href, {
          method: 'PUT',
          headers: { 'content-type': 'application/octet-stream', 'content-length': String(blob.size) },
          body: open,
          once: true,
        });
        this.counters.bytesUploaded += blob.size;
        return 'uploaded';
      } catch (err) {
        await budget.failed(err);
      }
    }
  }

  /**
   * Put a manifest by digest (children before the lists that name them), or by `tag`; the
   * registry must store these exact bytes.
   */
  async putManifest(repository: string, digest: string, bytes: Buffer, mediaType: string, tag?: string): Promise<void> {
    const res = await this.send(repository, `${repository}/manifests/${tag ?? digest}`, {
      method: 'PUT',
      headers: { 'content-type': mediaType },
      body: () => bytes,
    });
    const stored = res.headers['docker-content-digest'];
    if (typeof stored === 'string' && stored !== digest) {
      throw new DigestMismatchError(`${this.registry}/${repository}: the registry stored manifest ${digest} as ${stored}; it rewrote the bytes, so digest pullspecs would not resolve there`);
    }
  }

  /** POST `blobs/uploads/`: 201 = mounted, 202 = a session at `Location`. */
  private async startUpload(repository: string, mount?: { digest: string; from: string }): Promise<{ mounted: true } | { mounted: false; location: string }> {
    const query = mount ? `?mount=${encodeURIComponent(mount.digest)}&from=${encodeURIComponent(mount.from)}` : '';
    const res = await this.send(repository, `${repository}/blobs/uploads/${query}`, {
      method: 'POST',
      // A mount reads the other repository, so the token must allow that too.
      ...(mount ? { scopes: [pushScope(repository), `repository:${mount.from}:pull`] } : {}),
    });
    if (res.status === 201 && mount) return { mounted: true };
    const location = res.headers.location;
    if (res.status !== 202 || typeof location !== 'string') {
      throw new RegistryError(`${this.registry}: starting an upload to ${repository} answered ${res.status}${typeof location === 'string' ? '' : ' without a Location'}; the registry does not accept pushes here`);
    }
    // Location may be relative and may carry the session state in its query.
    return { mounted: false, location: new URL(location, res.url).href };
  }

  /** Every write-side request: push-scoped, body drained (nothing here reads a response body). */
  private async send(repository: string, path: string, ro: RequestOptions): Promise<RegistryResponse> {
    this.counters.requests++;
    const res = await this.transport.request(repository, path, { scopes: [pushScope(repository)], ...ro });
    await dumpBody(res.body);
    return res;
  }
}

function pushScope(repository: string): string {
  return `repository:${repository}:pull,push`;
}
