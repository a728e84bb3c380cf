/**
 * Warm first, then fan out: before nodes pull images through the in-cluster cache
 * (`--cache-mirror`), ONE node fills the cache with them, and only then do all nodes pull,
 * each from the cache over the LAN. Without this the link carries a blob more than once: the
 * cache's proxy (distribution 3, `registry/proxy/proxyblobstore.go`) fetches a blob upstream
 * once per request that arrives while it is still filling it, and nodes pulling at once ask for
 * the same blobs at once.
 *
 * One Lease, `prestage-cache-warm-0` in the agent's namespace, with the pull slots' election
 * (pacing.ts). Its holder reads each missing image's manifest (the node's platform) and every
 * blob once, through the cache only, digest-verified, a few distinct digests at a time (the
 * proxy fetches a digest twice when asked for it while it is in flight, for any repository),
 * and on release records on the Lease which images it warmed: `arch@digest` keys in the
 * `prestage.dev/cache-warmed` annotation, tied to the caches' locations. Nodes that need no
 * unrecorded image do not wait; the others wait for the record (or take the Lease over when
 * its holder died). A warm that fails (the cache down, full, erring) is
 * recorded too: it only decides the order of pulls, and CRI-O falls back past the cache to the
 * next mirror or the source, so nothing waits on a broken cache.
 *
 * The proxy keeps blobs per repository (a blob of repository B is a miss even when A holds it),
 * so a blob is read once per repository. A record outlives what the cache evicts (its TTL) at
 * the cost of one thing only: nodes then pull those images through the cache at once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/client.js';
import type { Descriptor } from '../registry/manifest.js';
import { RegistryClient } from '../registry/client.js';
import { applyMirrors } from '../registry/mirrors.js';
import { formatReference, parseReference, type ImageReference } from '../registry/reference.js';
import { RetryableStatus } from '../registry/retry.js';
import { fetchSigstoreAttachment } from '../signatures/sigstore.js';
import type { CacheMirror } from './cache-mirror.js';
import { isUnreachable } from './image-sizes.js';
import { LeasePacer } from './pacing.js';
import { pacerMeter, StreamPacer } from '../net/link-rate.js';
import { UNMETERED, type LinkMeter } from '../net/link-meter.js';

export { CACHE_WARM_PREFIX } from '../api/names.js';
import { CACHE_WARM_PREFIX } from '../api/names.js';
export const CACHE_WARM_LABEL = 'prestage.dev/cache-warm';
import { CACHE_WARMED_ANNOTATION } from '../api/names.js';
export { CACHE_WARMED_ANNOTATION };
/** Keys kept in the record, newest last: about 75 bytes each, well inside an object's 256 KiB of annotations. */
const MAX_RECORDED = 2_000;
/** Distinct blobs read at once: enough to keep a slow link busy across small blobs (distinct blobs never make the proxy fetch twice). */
const DEFAULT_BLOB_CONCURRENCY = 8;
const MANIFEST_CONCURRENCY = 8;
const DEFAULT_UNREACHABLE_RETRY_MS = 60_000;
const UNREACHABLE_PAUSE_MS = 2_000;

export interface CacheWarmer {
  /**
   * Returns once the cache was warmed with those of `images` it serves, for a node of `arch`:
   * by this node, or by another (recorded). `onWait` is called at each step while it waits or
   * warms (progress for the agent's liveness). Never throws: a failed warm only costs link bytes.
   */
  warm(images: readonly string[], arch: string, onWait: () => void, linkRate?: number): Promise<void>;
  close(): Promise<void>;
}

/** What a warm did, for the log and tests. */
export interface WarmResult {
  readonly images: number;
  readonly blobs: number;
  readonly bytes: number;
  readonly failures: readonly string[];
  /** Passes over the images: more than one when the cache went away mid-fill (a restart) and came back. */
  readonly passes: number;
  /** Why the last pass stopped early: the cache did not answer. */
  readonly unreachable?: string;
}

/** The images a cache serves: digest pullspecs (the drop-in is digest-only) under a cached source. */
export function cachedImages(images: readonly string[], mirrors: readonly CacheMirror[]): ImageReference[] {
  const rules = mirrors.map(({ source, location }) => ({ source, mirror: location }));
  const refs: ImageReference[] = [];
  for (const image of new Set(images)) {
    let ref: ImageReference;
    try {
      ref = parseReference(image);
    } catch {
      continue;
    }
    if (ref.digest && applyMirrors(ref, rules) !== ref) refs.push(ref);
  }
  return refs;
}

/**
 * The cache is not there (rather than answering with an error): nothing listens (its pod restarting, a
 * Service without endpoints), the connection broke, or a gateway in front of it says so (502/503/504).
 */
function unavailable(error: unknown): boolean {
  if (isUnreachable(error)) return true;
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (e instanceof RetryableStatus && [502, 503, 504].includes(e.status)) return true;
  }
  return false;
}

export const warmKey = (arch: string, ref: ImageReference): string => `${arch}@${ref.digest}`;

interface WarmRecord {
  /** The cache locations the keys hold for: another cache starts empty. */
  readonly caches: string;
  readonly keys: readonly string[];
}

/** The record on the Lease, or an empty one when it is missing, unreadable, or for other caches. */
export function readRecord(annotation: string | undefined, caches: string): Set<string> {
  if (!annotation) return new Set();
  try {
    const record = JSON.parse(annotation) as Partial<WarmRecord>;
    if (record.caches !== caches || !Array.isArray(record.keys)) return new Set();
    return new Set(record.keys.filter((key): key is string => typeof key === 'string'));
  } catch {
    return new Set();
  }
}

/** The record with `added` appended (newest last), capped. */
export function writeRecord(previous: ReadonlySet<string>, added: readonly string[], caches: string): string {
  const keys = [...previous].filter((key) => !added.includes(key));
  keys.push(...added);
  return JSON.stringify({ caches, keys: keys.slice(-MAX_RECORDED) } satisfies WarmRecord);
}

export interface LeaseCacheWarmerOptions {
  readonly namespace: string;
  /** This node: the Lease holder identity. */
  readonly holder: string;
  readonly mirrors: readonly CacheMirror[];
  readonly log: Logger;
  readonly blobConcurrency?: number;
  /**
   * How long a warm keeps trying a cache that stopped answering (a restart of its pod), default
   * 60 s: blobs it stored before are hits when it is back, so the fill resumes where it was.
   */
  readonly unreachableRetryMs?: number;
  readonly leaseDurationSeconds?: number;
  readonly contentionJitterMs?: number;
  /** The warm slot's Lease name without its `0`: the root's by default, a leaf's (`cacheLeafWarmPrefix`). */
  readonly leasePrefix?: string;
  /** Which cache of the tree, for the log: `root`, `leaf zone-a`. */
  readonly cache?: string;
}

export class LeaseCacheWarmer implements CacheWarmer {
  private readonly lease: LeasePacer;
  private readonly registry: RegistryClient;
  private readonly caches: string;
  /** The fill under way's meter under a cap (one fill at a time: an agent's passes never overlap). */
  private meter: LinkMeter | undefined;

  constructor(client: KubeClient, private readonly options: LeaseCacheWarmerOptions) {
    this.caches = [...options.mirrors].map((m) => `${m.source}=${m.location}`).sort().join(',');
    this.lease = new LeasePacer(client, {
      namespace: options.namespace,
      slots: 1,
      holder: options.holder,
      log: options.log,
      prefix: options.leasePrefix ?? CACHE_WARM_PREFIX,
      label: CACHE_WARM_LABEL,
      what: 'cache warm Lease',
      ...(options.leaseDurationSeconds !== undefined ? { leaseDurationSeconds: options.leaseDurationSeconds } : {}),
      ...(options.contentionJitterMs !== undefined ? { contentionJitterMs: options.contentionJitterMs } : {}),
    });
    // Through the caches only (plain HTTP, as the drop-in says), never the source: a fill, not a pull.
    this.registry = new RegistryClient({
      mirrors: options.mirrors.map(({ source, location }) => ({ source, mirror: location })),
      insecureRegistries: options.mirrors.map(({ location }) => location.split('/')[0]!),
      pullSecrets: [],
      retry: { attempts: 3, baseDelayMs: 500, maxDelayMs: 5_000 },
      concurrency: 16,
      // The cache streams a blob while it fetches it over the slow link: idle this long is a stall.
      stallTimeoutMs: 120_000,
      connectTimeoutMs: 5_000,
      // Every read of a fill crosses the link on a miss (manifests and attachments too, not only blobs): all paced under a cap.
      linkMeter: { open: (expected, signal, bodyBytes) => this.meter?.open(expected, signal, bodyBytes) ?? Promise.resolve(UNMETERED) },
    });
  }

  async warm(images: readonly string[], arch: string, onWait: () => void, linkRate?: number): Promise<void> {
    const log = this.options.cache !== undefined ? this.options.log.child({ cache: this.options.cache }) : this.options.log;
    const wanted = new Map(cachedImages(images, this.options.mirrors).map((ref) => [warmKey(arch, ref), ref]));
    if (wanted.size === 0) return;
    const recorded = () => readRecord(this.lease.annotations()[CACHE_WARMED_ANNOTATION], this.caches);
    const missing = () => {
      const record = recorded();
      return [...wanted.keys()].filter((key) => !record.has(key));
    };
    try {
      const started = Date.now();
      const slot = await this.lease.acquireUnless(() => missing().length === 0, onWait);
      if (!slot) {
        log.info({ images: wanted.size, waitedMs: Date.now() - started }, 'cache warm: the cache holds these images already');
        return;
      }
      const todo = missing();
      const pacer = linkRate ? new StreamPacer(linkRate) : undefined;
      const result = await this.fillResuming(todo.map((key) => wanted.get(key)!), arch, () => slot.held(), onWait, pacer);
      log.info({ ...result, failures: result.failures.slice(0, 5), ms: Date.now() - started }, result.failures.length === 0 ? 'cache warmed' : 'cache warm incomplete; pulls fall back past the cache where it lacks a blob');
      // Recorded however it went: only the order of pulls depends on it.
      await slot.release({ [CACHE_WARMED_ANNOTATION]: writeRecord(recorded(), todo, this.caches) });
    } catch (error) {
      log.warn({ err: (error as Error).message }, 'cache warm skipped; nodes pull through the cache at once');
    }
  }

  /** `fill`, again while the cache does not answer, for up to `unreachableRetryMs`. */
  async fillResuming(refs: readonly ImageReference[], arch: string, held: () => boolean, onStep: () => void, pacer?: StreamPacer): Promise<WarmResult> {
    const deadline = Date.now() + (this.options.unreachableRetryMs ?? DEFAULT_UNREACHABLE_RETRY_MS);
    let bytes = 0;
    for (let passes = 1; ; passes++) {
      const result = await this.fill(refs, arch, held, onStep, pacer);
      bytes += result.bytes;
      if (!result.unreachable || !held() || Date.now() >= deadline) return { ...result, bytes, passes };
      this.options.log.warn({ err: result.unreachable, pass: passes }, 'cache warm: the cache stopped answering; trying again');
      await sleep(UNREACHABLE_PAUSE_MS);
      onStep();
    }
  }

  /**
   * Every blob of `refs` (the node's platform) read once per repository through the cache,
   * digest-verified; under a link cap every read (manifests too) no faster than it (the proxy
   * streams a miss from upstream as it is read, so TCP holds the link to the reader's pace).
   */
  async fill(refs: readonly ImageReference[], arch: string, held: () => boolean = () => true, onStep: () => void = () => undefined, pacer?: StreamPacer): Promise<WarmResult> {
    this.meter = pacer ? pacerMeter(pacer) : undefined;
    try {
      return await this.fillPaced(refs, arch, held, onStep);
    } finally {
      this.meter = undefined;
    }
  }

  private async fillPaced(refs: readonly ImageReference[], arch: string, held: () => boolean, onStep: () => void): Promise<WarmResult> {
    const failures: string[] = [];
    let down: string | undefined;
    const fail = (what: string, error: unknown) => {
      const message = (error as Error).message.split('\n')[0]!;
      if (unavailable(error)) down ??= message;
      failures.push(`${what}: ${message}`);
    };
    // Pipelined: an image's blobs are queued as soon as its manifest is read, so the link never
    // waits for the last manifest; each blob once per repository (the key), whichever image names it.
    const queued = new Set<string>();
    const reads = pLimit(this.options.blobConcurrency ?? DEFAULT_BLOB_CONCURRENCY);
    const blobReads: Array<Promise<void>> = [];
    // One digest is never read twice at once, even for two repositories: the proxy's in-flight
    // set is per digest, and a request for a digest in flight for another repository is streamed
    // from upstream without being stored for its own (every later pull of it there is a miss).
    const lastReadOf = new Map<string, Promise<void>>();
    const afterSameDigest = (digest: string, read: () => Promise<void>): Promise<void> => {
      const turn = (lastReadOf.get(digest) ?? Promise.resolve()).then(read);
      lastReadOf.set(digest, turn);
      return turn;
    };
    let bytes = 0;
    let read = 0;
    const readBlob = async (ref: ImageReference, blob: Descriptor) => {
      if (down || !held()) return;
      try {
        // The body is only hashed (blobStream verifies the digest) and dropped: the cache keeps it.
        const body = this.registry.blobStream(ref, blob);
        for await (const chunk of body) bytes += (chunk as Buffer).length;
        read++;
      } catch (error) {
        fail(`${formatReference({ registry: ref.registry, repository: ref.repository })}@${blob.digest}`, error);
      }
      onStep();
    };
    const manifests = pLimit(MANIFEST_CONCURRENCY);
    await Promise.all(
      refs.map((ref) =>
        manifests(async () => {
          if (down || !held()) return;
          try {
            const image = await this.registry.resolveImage(ref, arch);
            const queue = (blob: Descriptor) => {
              const key = `${ref.registry}/${ref.repository}@${blob.digest}`;
              if (queued.has(key)) return;
              queued.add(key);
              blobReads.push(afterSameDigest(blob.digest, () => reads(() => readBlob(ref, blob))));
            };
            [image.manifest.config, ...image.manifest.layers].forEach(queue);
            // CRI-O asks the registry it pulls from for the sigstore attachments of the list and of the
            // platform manifest (4.21+ ClusterImagePolicy): through the cache too, so it holds them.
            for (const digest of new Set([image.listDigest ?? image.digest, image.digest])) {
              const attachment = await fetchSigstoreAttachment(this.registry, ref, digest);
              if (attachment) [attachment.manifest.config, ...attachment.manifest.layers].forEach(queue);
            }
          } catch (error) {
            fail(formatReference(ref), error);
          }
        }),
      ),
    );
    await Promise.all(blobReads);
    if (down) failures.unshift(`the cache is not answering (${down}); the rest skipped`);
    return { images: refs.length, blobs: read, bytes, failures, passes: 1, ...(down ? { unreachable: down } : {}) };
  }

  async close(): Promise<void> {
    this.lease.stop();
    await this.registry.close().catch(() => undefined);
  }
}

/**
 * The cache tree's order: the root first (once per blob over the link, under its cap), then the
 * node's leaf from the root (the LAN: no link cap), then the node pulls from its leaf. The leaves
 * warm side by side, each after the root holds what it asks, so no leaf's miss reaches the link.
 */
export class TreeCacheWarmer implements CacheWarmer {
  constructor(
    private readonly root: CacheWarmer,
    /** The node's leaf's warmer now (its labels may change), or none: the node pulls from the root. */
    private readonly leaf: () => CacheWarmer | undefined,
    private readonly leaves: readonly CacheWarmer[],
  ) {}

  async warm(images: readonly string[], arch: string, onWait: () => void, linkRate?: number): Promise<void> {
    await this.root.warm(images, arch, onWait, linkRate);
    await this.leaf()?.warm(images, arch, onWait);
  }

  async close(): Promise<void> {
    await Promise.all([this.root, ...this.leaves].map((warmer) => warmer.close()));
  }
}
