/**
 * Pacing across nodes: at most K nodes pull at once (MCO lets every node pull together and
 * saturates the registry or the uplink). A node pulls only while it holds one of K Leases
 * `prestage-pull-slot-<i>` in the agent's namespace.
 *
 * As client-go's leader election does: a Lease held by another node is judged expired from the
 * time THIS process last saw it change, never from the holder's renewTime (another node's clock);
 * the holder renews every third of the duration, retries failed renewals with jitter, and stops
 * counting the slot as its own once it could not renew for two thirds of the duration. Waiting
 * nodes watch the Leases (one watch each) instead of polling them, and try a slot that frees up
 * only after a random delay and a fresh look, so K slots do not draw 1000 writes at once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { Informer } from '../kube/informer.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';

export interface PullSlot {
  /** False once the slot was released or lost (renewals failed, another node took it): start no new pull. */
  held(): boolean;
  /** Frees the slot; `annotations` are written onto the Lease in the same update (the cache warmer's record). */
  release(annotations?: Readonly<Record<string, string>>): Promise<void>;
}

export interface PullPacer {
  /** Resolves with a slot once this node may pull. */
  acquire(): Promise<PullSlot>;
}

export interface LeasePacerOptions {
  readonly namespace: string;
  /** K: how many nodes may pull at once. */
  readonly slots: number;
  /** This node's name: the Lease holder identity. */
  readonly holder: string;
  readonly leaseDurationSeconds?: number;
  /**
   * Longest random delay before trying a slot seen free; default 5 s. The first of N waiting
   * nodes tries after about this / N, and the others see its write before their turn: the wider
   * the window, the fewer conflicting writes per hand-off (a pull takes minutes; a second is cheap).
   */
  readonly contentionJitterMs?: number;
  /** This node's clock, for the times it writes into Leases (tests skew it). */
  readonly now?: () => number;
  readonly log: Logger;
  /** The Leases' names are this and the slot's index; default `prestage-pull-slot-`. */
  readonly prefix?: string;
  /** The label that marks (and selects) them; default `prestage.dev/pull-slot`. */
  readonly label?: string;
  /** What the slots are for, in log lines; default `pull slot`. */
  readonly what?: string;
}

export { PULL_SLOT_PREFIX } from '../api/names.js';
import { PULL_SLOT_PREFIX } from '../api/names.js';
const DEFAULT_CONTENTION_JITTER_MS = 5_000;
/** On every pull-slot Lease: the watch selects them by it. */
export const PULL_SLOT_LABEL = 'prestage.dev/pull-slot';

interface Lease extends KubeObject {
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

export class LeasePacer implements PullPacer {
  private readonly informer: Informer<Lease>;
  private readonly collection: string;
  private readonly durationMs: number;
  /** Per Lease: its resourceVersion and the LOCAL time it was first seen at it. */
  private readonly observed = new Map<string, { resourceVersion: string; at: number }>();
  private readonly stopping = new AbortController();
  private started: Promise<void> | undefined;
  private changed: { promise: Promise<void>; resolve: () => void } = deferred();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly prefix: string;
  private readonly label: string;
  private readonly what: string;

  constructor(private readonly client: KubeClient, private readonly options: LeasePacerOptions) {
    this.durationMs = (options.leaseDurationSeconds ?? 60) * 1000;
    this.prefix = options.prefix ?? PULL_SLOT_PREFIX;
    this.label = options.label ?? PULL_SLOT_LABEL;
    this.what = options.what ?? 'pull slot';
    this.collection = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(options.namespace)}/leases`;
    this.informer = new Informer<Lease>(client, `${this.collection}?labelSelector=${encodeURIComponent(this.label)}`, {
      onChange: () => this.onLeases(),
      onRetry: (error, delayMs) => options.log.warn({ err: error.message, delayMs }, `${this.what} watch failed; retrying`),
    });
  }

  async acquire(): Promise<PullSlot> {
    return (await this.acquireUnless(() => false))!;
  }

  /**
   * A slot, or undefined as soon as `done()` says none is needed any more: checked before each
   * try and at every change of the Leases (the holder's record written on release, say).
   * `onWait` is called at each of those changes while this node waits.
   */
  async acquireUnless(done: () => boolean, onWait?: () => void): Promise<PullSlot | undefined> {
    this.started ??= this.informer.start(this.stopping.signal).catch((error: unknown) => {
      this.started = undefined;
      throw error;
    });
    await this.started;
    for (let waited = false; ; waited = true) {
      if (done()) return undefined;
      if (waited) onWait?.();
      const offset = Math.floor(Math.random() * this.options.slots);
      for (let index = 0; index < this.options.slots; index++) {
        const name = `${this.prefix}${(offset + index) % this.options.slots}`;
        if (!this.free(name)) continue;
        // Every waiting node saw the same event: a random delay and a fresh look let the first
        // winner's write reach the others before they try too.
        await sleep(Math.random() * (this.options.contentionJitterMs ?? DEFAULT_CONTENTION_JITTER_MS));
        if (done()) return undefined;
        if (!this.free(name)) continue;
        const sentAt = Date.now();
        const lease = await this.take(name).catch((error: Error) => {
          this.options.log.warn({ slot: name, err: error.message }, `cannot take a ${this.what}`);
          return undefined;
        });
        if (lease) {
          if (waited) this.options.log.info({ slot: name }, `got a ${this.what}`);
          return this.hold(lease, sentAt);
        }
      }
      await this.nextChangeOrExpiry();
    }
  }

  /** A slot Lease's annotations as last seen (its holder's record). */
  annotations(index = 0): Readonly<Record<string, string>> {
    return this.informer.items.get(`${this.prefix}${index}`)?.metadata.annotations ?? {};
  }

  /** Stops watching and renewing WITHOUT releasing: what a node that dies leaves behind. */
  stop(): void {
    this.stopping.abort();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  private onLeases(): void {
    const now = Date.now();
    for (const [name, lease] of this.informer.items) {
      const resourceVersion = lease.metadata.resourceVersion ?? '';
      if (this.observed.get(name)?.resourceVersion !== resourceVersion) this.observed.set(name, { resourceVersion, at: now });
    }
    const { resolve } = this.changed;
    this.changed = deferred();
    resolve();
  }

  /** Missing, unheld, ours, or unchanged for its whole duration as seen from here. */
  private free(name: string): boolean {
    const lease = this.informer.items.get(name);
    const holder = lease?.spec?.holderIdentity;
    if (!lease || !holder || holder === this.options.holder) return true;
    return Date.now() >= this.expiresAt(name, lease);
  }

  private expiresAt(name: string, lease: Lease): number {
    return (this.observed.get(name)?.at ?? Date.now()) + (lease.spec?.leaseDurationSeconds ?? this.durationMs / 1000) * 1000;
  }

  /** The next watch event, or the moment the first held Lease expires by our clock. */
  private async nextChangeOrExpiry(): Promise<void> {
    const expiries = [...this.informer.items].filter(([, lease]) => lease.spec?.holderIdentity).map(([name, lease]) => this.expiresAt(name, lease));
    // Re-checked at least once a lease duration, however quiet the watch.
    const wait = Math.max(0, Math.min(Date.now() + this.durationMs, ...expiries) - Date.now()) + 10;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.changed.promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, wait)))]);
    clearTimeout(timer);
  }

  /** Optimistic create or update: undefined when another node got there first (409). */
  private async take(name: string): Promise<Lease | undefined> {
    const current = this.informer.items.get(name);
    const now = this.microTime();
    const spec = { holderIdentity: this.options.holder, leaseDurationSeconds: this.durationMs / 1000, acquireTime: now, renewTime: now, leaseTransitions: (current?.spec?.leaseTransitions ?? 0) + (current ? 1 : 0) };
    try {
      if (!current) {
        return await this.client.request<Lease>('POST', this.collection, { body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace: this.options.namespace, labels: { [this.label]: '' } }, spec } });
      }
      return await this.client.request<Lease>('PUT', `${this.collection}/${name}`, { body: { ...current, spec } });
    } catch (error) {
      if (error instanceof KubeApiError && (error.status === 409 || error.status === 422)) return undefined;
      throw error;
    }
  }

  /**
   * `sentAt`: when the write that took it was SENT. The renew deadline counts from a write's
   * send time, never its reply: a node watching the Lease saw the write no earlier than it was
   * sent and waits a whole duration from then, so this node stops calling the slot its own first,
   * however late a reply comes back (client-go's renew deadline, for the same reason).
   */
  private hold(lease: Lease, sentAt: number): PullSlot {
    const { log, holder } = this.options;
    const name = lease.metadata.name;
    const deadlineMs = (this.durationMs * 2) / 3;
    let current = lease;
    let lastRenewed = sentAt;
    let state: 'held' | 'lost' | 'released' = 'held';
    let timer: NodeJS.Timeout | undefined;
    const schedule = (ms: number) => {
      timer = setTimeout(() => {
        this.timers.delete(timer as NodeJS.Timeout);
        void renew();
      }, ms);
      this.timers.add(timer);
    };
    const lose = (why: string) => {
      state = 'lost';
      log.warn({ slot: name, why }, `${this.what} lost: no new work under it until one is held again`);
    };
    // Never rejects: a failed renewal is retried with jitter until the renew deadline passes.
    const renew = async () => {
      let renewed = false;
      try {
        const now = this.microTime();
        const sent = Date.now();
        current = await this.client.request<Lease>('PUT', `${this.collection}/${name}`, { body: { ...current, spec: { ...current.spec, holderIdentity: holder, renewTime: now } } });
        lastRenewed = sent;
        renewed = true;
      } catch (error) {
        if (error instanceof KubeApiError && error.status === 409) {
          // Changed under us: ours still (re-read and renew at once), or taken.
          const latest = await this.client.find<Lease>(`${this.collection}/${name}`).catch(() => undefined);
          if (latest && latest.spec?.holderIdentity !== holder) return lose(`taken by ${latest.spec?.holderIdentity ?? 'nobody'}`);
          if (latest) current = latest;
        } else {
          log.warn({ slot: name, err: (error as Error).message }, `${this.what} renewal failed; retrying`);
        }
      }
      if (state !== 'held') return;
      if (Date.now() - lastRenewed > deadlineMs) return lose(`not renewed for ${Math.round((Date.now() - lastRenewed) / 1000)} s`);
      schedule(renewed ? this.untilRenewal(lastRenewed) : 500 + Math.random() * 1_000);
    };
    schedule(this.untilRenewal(lastRenewed));
    return {
      // Past the deadline it is not ours, even while a late renewal is still on its way.
      held: () => state === 'held' && Date.now() - lastRenewed <= deadlineMs,
      release: async (annotations) => {
        const wasHeld = state === 'held';
        state = 'released';
        if (timer) {
          clearTimeout(timer);
          this.timers.delete(timer);
        }
        if (!wasHeld) return;
        // Clear the holder so a waiting node takes the slot at once; on failure it expires.
        const { holderIdentity: _, ...spec } = current.spec ?? {};
        const metadata = annotations ? { ...current.metadata, annotations: { ...current.metadata.annotations, ...annotations } } : current.metadata;
        await this.client.request('PUT', `${this.collection}/${name}`, { body: { ...current, metadata, spec } }).catch((error: Error) => log.warn({ slot: name, err: error.message }, `cannot release the ${this.what}; it expires`));
      },
    };
  }

  /** Renewals go every third of the duration, counted from the last one's send time. */
  private untilRenewal(lastRenewed: number): number {
    return Math.max(0, lastRenewed + this.durationMs / 3 - Date.now());
  }

  /** MicroTime wants microseconds, from this node's clock. */
  private microTime(): string {
    return new Date((this.options.now ?? Date.now)()).toISOString().replace(/Z$/, '000Z');
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}
