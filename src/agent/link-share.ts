/**
 * The cluster's slow link, shared by every node's pulls under one cap (`--link-rate`, or a
 * set's `prestage.dev/link-rate`) for pulls that cross it (not served by the in-cluster cache):
 *
 * - a CRI pull cannot be slowed once started (PullImage is one unary call; CRI-O reports no
 *   bytes and has no per-pull rate), so the unit is the image: before a pull starts, its new
 *   compressed bytes are charged and it waits until the last 5 s of charges leave room for
 *   them (`net/link-rate.ts` WindowLedger): no 5 s holds more than the cap's worth;
 * - the charges of all nodes are one ledger, on Lease `prestage-link` in the agent's namespace
 *   (written with optimistic concurrency, its entries stamped with the writer's clock): one
 *   node left pulling has the whole cap, instead of a fixed share while the link idles;
 * - under a cap a node pulls one image at a time (`pull-executor.ts`): CRI-O fetches a layer once
 *   per pull in flight and commits one image at a time, so concurrent pulls would carry shared
 *   layers more than once and let bytes cross later than they were charged. Each layer is
 *   charged to the first image that needs it.
 */
import type { Logger } from 'pino';
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
import { endCharge, LINK_WINDOW_MS, readLedger, SYSTEM_CLOCK, WindowLedger, type Clock, type LedgerEntry } from '../net/link-rate.js';
import { RESPONSE_HEAD_BYTES, type LinkCharge, type LinkLedger } from '../net/link-meter.js';
import { hasLayers, type SizeResult } from './image-sizes.js';

export { LINK_LEASE } from '../api/names.js';
import { LINK_LEASE } from '../api/names.js';
import { LINK_LEDGER_ANNOTATION } from '../api/names.js';
export { LINK_LEDGER_ANNOTATION };
/** Entries kept on the Lease: about 25 bytes each, far inside an object's 256 KiB of annotations. */
const MAX_ENTRIES = 2_000;

/** The requests a CRI-O pull makes besides its layers: the manifests (a list and its image, each read twice) and the config. */
const PULL_MANIFEST_REQUESTS = 5;

/**
 * Bytes each image's pull moves over the link, in pull order: its config and manifests, and the
 * compressed sizes of its layers that are neither on the node nor charged to an earlier image of
 * the round. Where the layers are unknown, `fallback` (the image's share of its set's
 * compressed bytes), else 0.
 */
export function linkCharges(
  images: readonly string[],
  present: ReadonlySet<string>,
  sizes: ReadonlyMap<string, SizeResult>,
  fallback: (image: string) => number | undefined,
): Map<string, number> {
  const counted = new Set<string>();
  for (const [image, result] of sizes) if (present.has(image) && hasLayers(result)) for (const layer of result.layers) counted.add(layer.digest);
  const charges = new Map<string, number>();
  for (const image of images) {
    const result = sizes.get(image);
    if (!hasLayers(result) || result.layers.some((layer) => layer.linkBytes === undefined)) {
      charges.set(image, fallback(image) ?? 0);
      continue;
    }
    // Every answer's head crosses too: the manifests' (a list's and its image's, each asked twice), the config's, each layer's.
    let bytes = (result.overheadBytes ?? 0) + PULL_MANIFEST_REQUESTS * RESPONSE_HEAD_BYTES;
    for (const layer of result.layers) {
      if (counted.has(layer.digest)) continue;
      counted.add(layer.digest);
      bytes += layer.linkBytes! + RESPONSE_HEAD_BYTES;
    }
    charges.set(image, bytes);
  }
  return charges;
}

export type { LinkCharge, LinkLedger } from '../net/link-meter.js';

let charges = 0;
/** Names a charge so its end can find it: this process and a counter. */
function chargeId(): string {
  return `${process.pid.toString(36)}.${Math.random().toString(36).slice(2, 6)}.${(charges++).toString(36)}`;
}

/** One process's ledger (tests, and an agent with nothing to share it with). */
export class MemoryLinkLedger implements LinkLedger {
  private entries: LedgerEntry[] = [];
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly clock: Clock = SYSTEM_CLOCK) {}

  start(bytes: number, capBytesPerSecond: number, signal?: AbortSignal, openMs = 0): Promise<LinkCharge> {
    const id = openMs > 0 ? chargeId() : undefined;
    const turn = this.queue.then(async () => {
      const ledger = windowLedger(capBytesPerSecond, this.entries, this.clock);
      await ledger.start(bytes, signal, openMs, id);
      this.entries = ledger.recent();
    });
    this.queue = turn.catch(() => undefined);
    return turn.then(() => ({
      end: async (used?: number) => {
        if (id === undefined) return;
        this.entries = endCharge(this.entries, id, this.clock.now(), used);
      },
    }));
  }
}

export interface LeaseLinkLedgerOptions {
  readonly namespace: string;
  /** This node: written into the Lease's holder, for people reading it. */
  readonly holder: string;
  readonly log: Logger;
  readonly clock?: Clock;
}

interface Lease extends KubeObject {
  spec?: { holderIdentity?: string; renewTime?: string };
}

/** The cluster-wide ledger on Lease `prestage-link`: read, wait for room, write with its resourceVersion; a conflict reads again. */
export class LeaseLinkLedger implements LinkLedger {
  private readonly path: string;
  private readonly clock: Clock;
  /** One start at a time from this node: its own starts never conflict with each other. */
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly client: KubeClient, private readonly options: LeaseLinkLedgerOptions) {
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(options.namespace)}/leases`;
    this.clock = options.clock ?? SYSTEM_CLOCK;
  }

  start(bytes: number, capBytesPerSecond: number, signal?: AbortSignal, openMs = 0): Promise<LinkCharge> {
    const id = openMs > 0 ? chargeId() : undefined;
    const turn = this.queue.then(() => this.charge(bytes, capBytesPerSecond, signal, openMs, id));
    this.queue = turn.catch(() => undefined);
    return turn.then(() => ({ end: (used?: number) => (id === undefined ? Promise.resolve() : this.end(id, used)) }));
  }

  private async charge(bytes: number, cap: number, signal: AbortSignal | undefined, openMs: number, id: string | undefined): Promise<void> {
    for (let conflicts = 0; ; ) {
      signal?.throwIfAborted();
      const lease = await this.client.find<Lease>(`${this.path}/${LINK_LEASE}`);
      const ledger = windowLedger(cap, readLedger(lease?.metadata.annotations?.[LINK_LEDGER_ANNOTATION]), this.clock);
      const wait = ledger.waitFor(bytes);
      if (wait > 0) {
        // Others may charge meanwhile: look again after the wait (at most a second: a node that stops frees its room sooner).
        await this.clock.sleep(Math.min(wait, 1_000), signal);
        continue;
      }
      const now = this.clock.now();
      const entry: LedgerEntry = id === undefined ? [now, bytes] : [now, bytes, now + openMs, id];
      if (await this.write(lease, [...ledger.recent(), entry])) return;
      if (++conflicts % 20 === 0) this.options.log.warn({ conflicts }, 'link ledger: many conflicting writes; retrying');
      await this.clock.sleep(Math.random() * 50, signal);
    }
  }

  /** Writes the charge's end: it counts a window from now. A failure leaves it counted until its deadline (more than needed, never less). */
  private async end(id: string, used: number | undefined): Promise<void> {
    // Not behind this node's starts: one waiting for room may be waiting for this very end.
    try {
      for (let attempt = 0; attempt < 20; attempt++) {
        const lease = await this.client.find<Lease>(`${this.path}/${LINK_LEASE}`);
        const entries = readLedger(lease?.metadata.annotations?.[LINK_LEDGER_ANNOTATION]);
        if (!lease || !entries.some((entry) => entry[3] === id)) return;
        if (await this.write(lease, endCharge(entries, id, this.clock.now(), used))) return;
        await this.clock.sleep(Math.random() * 50);
      }
      this.options.log.warn({ id }, 'link ledger: could not write the end of a charge (conflicts); it counts until its deadline');
    } catch (error) {
      this.options.log.warn({ id, err: (error as Error).message }, 'link ledger: could not write the end of a charge; it counts until its deadline');
    }
  }

  /** Writes `entries` with the resourceVersion read; false on a conflict (another node wrote first). */
  private async write(lease: Lease | undefined, entries: readonly LedgerEntry[]): Promise<boolean> {
    const annotations = { ...lease?.metadata.annotations, [LINK_LEDGER_ANNOTATION]: JSON.stringify(entries.slice(-MAX_ENTRIES)) };
    const spec = { holderIdentity: this.options.holder, renewTime: new Date(this.clock.now()).toISOString().replace(/Z$/, '000Z') };
    try {
      if (lease) await this.client.request('PUT', `${this.path}/${LINK_LEASE}`, { body: { ...lease, metadata: { ...lease.metadata, annotations }, spec: { ...lease.spec, ...spec } } });
      else await this.client.request('POST', this.path, { body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: LINK_LEASE, namespace: this.options.namespace, annotations }, spec } });
      return true;
    } catch (error) {
      // Another node charged first (409), or created it first: read again and recount.
      if (error instanceof KubeApiError && (error.status === 409 || error.status === 422)) return false;
      throw error;
    }
  }
}

function windowLedger(capBytesPerSecond: number, entries: readonly LedgerEntry[], clock: Clock): WindowLedger {
  const ledger = new WindowLedger((capBytesPerSecond * LINK_WINDOW_MS) / 1000, LINK_WINDOW_MS, clock);
  // Entries are stamped by each writer's clock. One a little ahead of ours counts from now; one
  // more than a window ahead is a clock gone wrong (or set by hand) and is dropped: kept, it would
  // fill the ledger until our clock caught up with it, hours maybe, and no node would pull.
  const now = clock.now();
  ledger.absorb(entries.filter(([at]) => at <= now + LINK_WINDOW_MS).map(([at, ...rest]) => [Math.min(at, now), ...rest] as const));
  return ledger;
}

