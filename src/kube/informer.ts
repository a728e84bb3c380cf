/**
 * A list-then-watch cache of one resource collection. Re-watches from the last
 * resourceVersion seen (events and bookmarks), re-lists when the server says 410 Gone
 * (the version was compacted away), and reconnects with a capped backoff while the API
 * server is unreachable (jittered). Never polls: between reconnects it only waits on the stream.
 */
import { KubeApiError, type KubeClient, type KubeList, type KubeObject, type WatchEvent } from './client.js';

export interface InformerEvents {
  /** The cache changed (after the initial list, on every event, after a re-list). */
  onChange(): void;
  /** A watch failed and will be retried; for logs. */
  onRetry?(error: Error, delayMs: number): void;
  /** Keep only what the reader needs: the cache holds every object of the collection. */
  slim?(object: KubeObject): KubeObject;
}

/** An object without its field managers (`metadata.managedFields`): a set of 1000 images carries 1000 keys there, which no reader of a cache needs. */
export function withoutFieldManagers<T extends KubeObject>({ metadata: { managedFields: _, ...metadata }, ...rest }: T): T {
  return { ...rest, metadata } as T;
}

/** How long the server keeps one watch open before we re-watch (it ends the stream itself). */
const WATCH_TIMEOUT_SECONDS = 300;
const BACKOFF_MS = { first: 200, max: 5_000 };

export class Informer<T extends KubeObject = KubeObject> {
  readonly items = new Map<string, T>();
  private resourceVersion = '';

  constructor(
    private readonly client: KubeClient,
    /** Collection path, e.g. `/api/v1/nodes`. */
    readonly path: string,
    private readonly events: InformerEvents,
  ) {}

  /** Lists once and resolves; keeps watching in the background until `signal` aborts. */
  async start(signal: AbortSignal): Promise<void> {
    await this.list();
    void this.run(signal);
  }

  private async list(): Promise<void> {
    const list = await this.client.get<KubeList<T>>(this.path);
    this.items.clear();
    for (const item of list.items) this.items.set(item.metadata.name, this.slim(item));
    this.resourceVersion = list.metadata.resourceVersion;
    this.events.onChange();
  }

  private async run(signal: AbortSignal): Promise<void> {
    let delay = BACKOFF_MS.first;
    while (!signal.aborted) {
      try {
        await this.client.watch<T>(this.path, { resourceVersion: this.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: WATCH_TIMEOUT_SECONDS }, (event) => this.apply(event), signal);
        delay = BACKOFF_MS.first;
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof KubeApiError && error.status === 410) {
          await this.relist(signal);
          continue;
        }
        // Jittered (half to all of the delay), as client-go's reflector: a thousand agents that
        // lost the API server together do not all come back in the same instant.
        const wait = delay / 2 + Math.random() * (delay / 2);
        this.events.onRetry?.(error as Error, wait);
        await sleep(wait, signal);
        delay = Math.min(delay * 2, BACKOFF_MS.max);
      }
    }
  }

  private async relist(signal: AbortSignal): Promise<void> {
    try {
      await this.list();
    } catch (error) {
      if (!signal.aborted) this.events.onRetry?.(error as Error, BACKOFF_MS.first);
      await sleep(BACKOFF_MS.first, signal);
    }
  }

  private slim(object: T): T {
    return this.events.slim ? (this.events.slim(object) as T) : object;
  }

  private apply(event: WatchEvent<T>): void {
    if (event.type === 'ERROR') {
      const status = event.object as unknown as { code?: number; reason?: string; message?: string };
      // 410 arrives as an event on an open stream; end this watch so run() re-lists.
      throw new KubeApiError(status.code ?? 500, status.reason ?? 'WatchError', status.message ?? 'watch error');
    }
    this.resourceVersion = event.object.metadata.resourceVersion ?? this.resourceVersion;
    if (event.type === 'BOOKMARK') return;
    if (event.type === 'DELETED') this.items.delete(event.object.metadata.name);
    else this.items.set(event.object.metadata.name, this.slim(event.object));
    this.events.onChange();
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}
