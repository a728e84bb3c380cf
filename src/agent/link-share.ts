/**
 * A node's share of the cluster-wide link cap (`--link-rate`, or a set's `prestage.dev/link-rate`)
 * for pulls that cross the link (not served by the in-cluster cache):
 *
 * - at most K nodes pull at once (the pull-slot Leases), so each slot's share is cap / K;
 * - a CRI pull cannot be slowed once started (PullImage is one unary call; CRI-O reports no
 *   bytes and has no per-pull rate), so the unit is the image: before a pull starts, its new
 *   compressed bytes are charged against the slot's ledger and the pull waits until the last
 *   5 s of charges leave room for it (`net/link-rate.ts` WindowLedger). The K shares add up to
 *   the cap over any 5 s;
 * - the ledger travels with the slot: a node releasing a slot writes its recent charges onto the
 *   Lease (`prestage.dev/link-ledger`), and the next holder starts from them, so a hand-off
 *   does not give the slot a fresh window.
 */
import { LINK_WINDOW_MS, WindowLedger, type Clock, type LedgerEntry, SYSTEM_CLOCK } from '../net/link-rate.js';
import { hasLayers, type SizeResult } from './image-sizes.js';

export const LINK_LEDGER_ANNOTATION = 'prestage.dev/link-ledger';
/** Slots a cap is shared over when the agent was given no `--max-pulling-nodes`. */
export const DEFAULT_LINK_SLOTS = 3;

/**
 * Bytes each image's pull moves over the link, in pull order: the compressed sizes of its
 * layers that are neither on the node nor charged to an earlier image of the round. Where the
 * layers are unknown, `fallback` (the image's share of its set's compressed bytes), else 0.
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
    let bytes = 0;
    for (const layer of result.layers) {
      if (counted.has(layer.digest)) continue;
      counted.add(layer.digest);
      bytes += layer.linkBytes!;
    }
    charges.set(image, bytes);
  }
  return charges;
}

/** The ledger of one pull slot's share: `cap / slots` averaged over 5 s. */
export class LinkShare {
  readonly ledger: WindowLedger;

  constructor(readonly capBytesPerSecond: number, readonly slots: number, clock: Clock = SYSTEM_CLOCK, handedOver?: string) {
    this.ledger = new WindowLedger(((capBytesPerSecond / Math.max(slots, 1)) * LINK_WINDOW_MS) / 1000, LINK_WINDOW_MS, clock);
    if (handedOver) this.ledger.absorb(readLedger(handedOver));
  }

  /** Waits until `bytes` fit the share, then charges them: the pull may start. */
  async start(bytes: number, signal?: AbortSignal): Promise<void> {
    if (bytes > 0) await this.ledger.start(bytes, signal);
  }

  /** What the next holder of the slot starts from. */
  handOver(): Record<string, string> {
    return { [LINK_LEDGER_ANNOTATION]: JSON.stringify(this.ledger.recent()) };
  }
}

function readLedger(text: string): LedgerEntry[] {
  try {
    const parsed: unknown = JSON.parse(text);
    if (!Array.isArray(parsed)) return [];
    return parsed.filter((entry): entry is [number, number] => Array.isArray(entry) && entry.length === 2 && entry.every((n) => typeof n === 'number'));
  } catch {
    return [];
  }
}
