/**
 * Exact sizes of images for the node agent's disk check: each digest pullspec's layers with
 * their uncompressed sizes, read the way CRI-O will pull them (the node's registries.conf
 * mirrors in order, then the source; the node's pull secret) with the plan's measuring code
 * (verified manifests, the node's platform out of manifest lists, gzip ISIZE from a 4-byte
 * tail read per layer). Results are cached by manifest digest, and layer sizes by layer digest
 * (both name immutable content), so a node sizing 100+ images, or new sets that share base
 * layers with earlier ones, reads each trailer once.
 *
 * Lookups must never hold the agent up for long: short timeouts, two attempts, a bounded
 * number at once, a budget per batch, and a host that did not answer is skipped for a while.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import { LedgerMeter, LinkShutError, UNMETERED, type LinkMeter } from '../net/link-meter.js';
import { measureImage, type LayerSize, type LayerSizeCache } from '../plan/sizes.js';
import { RegistryClient } from '../registry/client.js';
import type { PullSecret } from '../registry/credentials.js';
import { formatReference, parseReference } from '../registry/reference.js';
import { loadRegistriesConf, pullSources, type RegistriesConf } from './registries-conf.js';
import { oneLine } from './one-line.js';

export interface SizedLayer {
  readonly digest: string;
  /** Uncompressed bytes: exact from the gzip trailer, or 2x compressed where it cannot be read. */
  readonly diskBytes: number;
  /** Compressed bytes: what pulling it moves over the link. */
  readonly linkBytes?: number;
  readonly exact: boolean;
}

export interface ImageLayers {
  readonly layers: readonly SizedLayer[];
  /** Where they were read: the mirror or source reference. */
  readonly from: string;
  /** What a pull reads besides layers: its config blob and manifest (and the manifest this size read took). */
  readonly overheadBytes?: number;
}

/** The layers, or why they could not be found (one line). */
export type SizeResult = ImageLayers | { readonly error: string };

export function hasLayers(result: SizeResult | undefined): result is ImageLayers {
  return result !== undefined && 'layers' in result;
}

export interface SizeLookupOptions {
  /** The node's architecture (`kubernetes.io/arch`): the manifest-list entry CRI-O will pull. */
  readonly arch: string;
  /** The node's pull secret, as CRI-O would use it for each endpoint. */
  readonly pullSecrets: readonly PullSecret[];
  /** Under a link cap: where this batch's reads pay before they cross (the cluster's ledger); finished with the batch. */
  readonly meter?: LedgerMeter;
}

export interface ImageSizeSource {
  /** A result for every image asked for; never throws. */
  layers(images: readonly string[], options: SizeLookupOptions): Promise<Map<string, SizeResult>>;
  close(): Promise<void>;
}

export interface RegistryImageSizesOptions {
  /** `/etc/containers/registries.conf`; a missing file means no mirrors. */
  readonly registriesConf: string;
  /** `/etc/containers/registries.conf.d`. */
  readonly registriesConfDir: string;
  readonly log: Logger;
  /** Per request: connect, headers and idle body. */
  readonly requestTimeoutMs?: number;
  /** Attempts per request, the first included. */
  readonly attempts?: number;
  /** Images looked up at once. */
  readonly concurrency?: number;
  /** Longest a batch may take; images not answered by then count as unknown (and keep loading into the cache). */
  readonly budgetMs?: number;
  /** How long a host that could not be reached is skipped. */
  readonly unreachableBackoffMs?: number;
}

const DEFAULTS = { requestTimeoutMs: 10_000, attempts: 2, concurrency: 16, budgetMs: 60_000, unreachableBackoffMs: 60_000 };
/** Requests at once per registry: an image's manifests and its layers' trailers overlap others'. */
const REQUESTS_PER_REGISTRY = 32;
/** Bounds the caches: an entry is a few hundred bytes (a layer size, tens); a node holds far fewer images. */
const MAX_CACHED = 10_000;
const MAX_CACHED_LAYERS = 50_000;
/** Network-level failures: the host, not the image, is the problem. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH', 'ECONNRESET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_SOCKET']);

interface Clients {
  readonly fingerprint: string;
  readonly secure: RegistryClient;
  /** For `insecure = true` endpoints: no certificate checks, plain HTTP allowed (as CRI-O). */
  readonly insecure: RegistryClient;
}

export class RegistryImageSizes implements ImageSizeSource {
  private readonly options: Required<Omit<RegistryImageSizesOptions, 'log'>> & { log: Logger };
  private readonly cache = new Map<string, ImageLayers>();
  /** Exact layer sizes by digest, across batches. */
  private readonly layerCache = new Map<string, LayerSize>();
  private readonly inflight = new Map<string, Promise<SizeResult>>();
  private readonly unreachableUntil = new Map<string, number>();
  private readonly limit;
  private clients: Clients | undefined;
  private closed = false;
  /** The batch's meter (one batch at a time: the agent's passes never overlap). */
  private meter: LedgerMeter | undefined;
  /** What the clients pay through: the meter of the batch under way, if any. */
  private readonly linkMeter: LinkMeter = batchMeter(() => this.meter);

  constructor(options: RegistryImageSizesOptions) {
    this.options = { ...DEFAULTS, ...options };
    this.limit = pLimit(this.options.concurrency);
  }

  async layers(images: readonly string[], { arch, pullSecrets, meter }: SizeLookupOptions): Promise<Map<string, SizeResult>> {
    this.meter = meter;
    try {
      return await this.lookupAll(images, arch, pullSecrets);
    } finally {
      // Reads past the budget keep their slices until they close; the rest of the batch is ended now.
      this.meter = undefined;
      await meter?.finish();
    }
  }

  private async lookupAll(images: readonly string[], arch: string, pullSecrets: readonly PullSecret[]): Promise<Map<string, SizeResult>> {
    const unique = [...new Set(images)];
    const results = new Map<string, SizeResult>();
    let conf: RegistriesConf;
    try {
      // Re-read each time: the MCO rewrites it when mirror sets change, and it is small.
      conf = await loadRegistriesConf(this.options.registriesConf, this.options.registriesConfDir);
    } catch (error) {
      for (const image of unique) results.set(image, { error: (error as Error).message });
      return results;
    }
    const clients = this.clientsFor(pullSecrets);
    // Layers shared by images of this batch, or sized exactly in an earlier one, are read once.
    const layerSizes = this.layerSizesForBatch();
    const pending = unique.map(async (image) => results.set(image, await this.lookup(image, arch, conf, clients, layerSizes)));
    let timer: NodeJS.Timeout | undefined;
    const budget = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.options.budgetMs);
      timer.unref();
    });
    await Promise.race([Promise.all(pending), budget]);
    clearTimeout(timer);
    for (const image of unique) if (!results.has(image)) results.set(image, { error: `no answer from the registry within ${Math.round(this.options.budgetMs / 1000)} s` });
    return results;
  }

  async close(): Promise<void> {
    this.closed = true;
    const clients = this.clients;
    this.clients = undefined;
    if (!clients) return;
    // Closing waits for requests in flight, which may be a lookup past its budget: do not hold a stopping agent for it.
    const closing = Promise.all([clients.secure.close(), clients.insecure.close()]).catch(() => undefined);
    await Promise.race([closing, sleep(1_000, undefined, { ref: false })]);
  }

  /** Never rejects: an image whose sizes cannot be found gets the reasons, one per endpoint tried. */
  private lookup(image: string, arch: string, conf: RegistriesConf, clients: Clients, layerSizes: LayerSizeCache): Promise<SizeResult> {
    let ref;
    try {
      ref = parseReference(image);
    } catch (error) {
      return Promise.resolve({ error: (error as Error).message });
    }
    if (!ref.digest) return Promise.resolve({ error: `${image} is not a digest pullspec` });
    const key = `${ref.digest} ${arch}`;
    const cached = this.cache.get(key);
    if (cached) return Promise.resolve(cached);
    const running = this.inflight.get(key);
    if (running) return running;
    const digestRef = ref;
    const lookup = this.limit(async (): Promise<SizeResult> => {
      let sources;
      try {
        sources = pullSources(conf, digestRef);
      } catch (error) {
        return { error: (error as Error).message };
      }
      const failures: string[] = [];
      for (const source of sources) {
        const where = formatReference({ registry: source.ref.registry, repository: source.ref.repository });
        if ((this.unreachableUntil.get(source.ref.registry) ?? 0) > Date.now()) {
          failures.push(`${where}: skipped, unreachable moments ago`);
          continue;
        }
        if (this.closed) return { error: 'the agent is stopping' };
        const started = Date.now();
        const warnings: string[] = [];
        try {
          const measured = await measureImage(source.insecure ? clients.insecure : clients.secure, source.ref, arch, warnings, layerSizes);
          const result: ImageLayers = {
            layers: measured.layers.map((layer) => ({ digest: layer.digest, diskBytes: layer.diskBytes, linkBytes: layer.compressedBytes, exact: layer.method !== 'estimate-2x' })),
            from: formatReference(source.ref),
            overheadBytes: measured.config.size + 2 * (measured.manifestBytes ?? 0),
          };
          this.remember(key, result);
          this.options.log.debug({ image, from: result.from, layers: result.layers.length, ms: Date.now() - started, warnings }, 'image sizes read');
          return result;
        } catch (error) {
          // A window that shut: no other source is asked either (each would cross the link).
          if (error instanceof LinkShutError) return { error: error.message };
          if (isUnreachable(error)) this.unreachableUntil.set(source.ref.registry, Date.now() + this.options.unreachableBackoffMs);
          failures.push(`${source.mirror ? 'mirror ' : ''}${where}: ${oneLine((error as Error).message, 500)}`);
        }
      }
      return { error: failures.join('; ') };
    });
    const settled = lookup.catch((error: unknown) => ({ error: oneLine((error as Error).message, 500) })).finally(() => this.inflight.delete(key));
    this.inflight.set(key, settled);
    return settled;
  }

  /**
   * This batch's reads in flight, over the exact sizes of earlier batches. Estimates are not
   * kept past the batch: they say a registry failed a Range read, which another may not.
   */
  private layerSizesForBatch(): LayerSizeCache {
    const batch = new Map<string, Promise<LayerSize>>();
    const known = this.layerCache;
    return {
      get: (digest) => {
        const reading = batch.get(digest);
        if (reading) return reading;
        const size = known.get(digest);
        return size ? Promise.resolve(size) : undefined;
      },
      set: (digest, reading) => {
        batch.set(digest, reading);
        reading.then((size) => {
          if (size.method === 'estimate-2x') return;
          if (known.size >= MAX_CACHED_LAYERS) {
            const oldest = known.keys().next().value;
            if (oldest !== undefined) known.delete(oldest);
          }
          known.set(digest, size);
        }, () => undefined);
      },
      delete: (digest) => batch.delete(digest),
    };
  }

  private remember(key: string, result: ImageLayers): void {
    if (this.cache.size >= MAX_CACHED) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.set(key, result);
  }

  /** Clients keep auth tokens per credential: new ones when the pull secret changes. */
  private clientsFor(pullSecrets: readonly PullSecret[]): Clients {
    const fingerprint = createHash('sha256')
      .update(JSON.stringify(pullSecrets.map((secret) => [...secret.entries])))
      .digest('hex');
    if (this.clients?.fingerprint === fingerprint) return this.clients;
    const previous = this.clients;
    const { requestTimeoutMs, attempts } = this.options;
    const common = {
      mirrors: [],
      pullSecrets,
      retry: { attempts, baseDelayMs: 250, maxDelayMs: 1_000 },
      concurrency: REQUESTS_PER_REGISTRY,
      stallTimeoutMs: requestTimeoutMs,
      connectTimeoutMs: requestTimeoutMs,
      linkMeter: this.linkMeter,
    };
    this.clients = { fingerprint, secure: new RegistryClient({ ...common, insecureRegistries: [] }), insecure: new RegistryClient({ ...common, insecureRegistries: 'all' }) };
    // Lookups still using the old clients fail and are retried on the next pass.
    if (previous) void Promise.all([previous.secure.close(), previous.insecure.close()]).catch(() => undefined);
    return this.clients;
  }
}

export function isUnreachable(error: unknown): boolean {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code && UNREACHABLE.has(code)) return true;
  }
  return false;
}

/** The meter of whichever batch is under way, or none: what the long-lived clients pay through. */
function batchMeter(current: () => LedgerMeter | undefined): LinkMeter {
  return {
    open: (expected, signal) => current()?.open(expected, signal) ?? Promise.resolve(UNMETERED),
    get partBytes() {
      return current()?.partBytes;
    },
  };
}
