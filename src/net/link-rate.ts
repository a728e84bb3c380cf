/**
 * A cap on the bytes that cross a slow link, in two forms for the two kinds of traffic:
 *
 * - `StreamPacer` with `pacedRead`: bytes prestage reads itself (a bundle's blobs, the cache
 *   warm). A read pays for its first window before it asks, then for each chunk as it arrives,
 *   the reader sleeping off its debt before reading on, so TCP's window holds the sender back.
 *   What all reads hold paid ahead of their bytes is bounded to a tenth of a window's: bytes
 *   paid before they cross may cross late, on top of the cap (`StreamPacer.open`).
 * - `WindowLedger`: transfers prestage starts but cannot slow once started (a CRI pull is one
 *   unary call; CRI-O reports no progress and has no per-pull rate). Each start is charged its
 *   whole size up front and waits until the charges still counted leave room for it. A charge
 *   counts until a window after its transfer ENDED (`until`; while it runs, until its deadline),
 *   not a window after it started: a transfer's bytes may cross any time between its start and
 *   its end, so any window that sees bytes of two transfers overlaps both, and the later one
 *   was started with the earlier one counted. Counting from the start only let a slow pull's
 *   tail and a fast pull after it share a window (1.37x the cap, measured). A transfer larger
 *   than a window's worth goes alone and holds the ledger for as long as it takes at the rate,
 *   so the long-run rate holds for big images too.
 *
 * Both take the clock and the sleep as parameters, so tests run them without waiting.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { LinkMeter } from './link-meter.js';

export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const SYSTEM_CLOCK: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) => delay(ms, undefined, signal ? { signal } : undefined),
};

/** The window a cap is averaged over: what "at most R" means for pulls started whole. */
export const LINK_WINDOW_MS = 5_000;

export class StreamPacer {
  /** When the bytes paid so far are paid off at the rate (ms since epoch). */
  private paidUntil = 0;
  /** Bytes paid before they crossed (`open`, or `pay`'s `ahead`) that have not arrived yet. */
  private ahead = 0;
  /** Reads waiting for room among the bytes paid ahead, in turn. */
  private readonly opening: Array<{ bytes: number; admit: () => void }> = [];
  /** What may be paid ahead at once: a tenth of what a window may carry, or one read's first window. */
  readonly aheadBytes: number;

  constructor(
    readonly bytesPerSecond: number,
    private readonly clock: Clock = SYSTEM_CLOCK,
  ) {
    if (!(bytesPerSecond > 0)) throw new RangeError('a link rate must be more than zero');
    this.aheadBytes = Math.max(PREPAID_BYTES, (bytesPerSecond * LINK_WINDOW_MS * AHEAD_SHARE) / 1000);
  }

  /** Pays for `bytes` just read; resolves once reading on keeps the rate. Readers sharing one pacer share the rate. `ahead` of them have not crossed yet. */
  async pay(bytes: number, signal?: AbortSignal, ahead = 0): Promise<void> {
    const now = this.clock.now();
    this.paidUntil = Math.max(this.paidUntil, now) + (bytes / this.bytesPerSecond) * 1000;
    this.ahead += ahead;
    const wait = this.paidUntil - now;
    if (wait > 0) await this.clock.sleep(wait, signal);
  }

  /**
   * Opens a read: pays `bytes` before they are asked for (its first window, a small blob
   * whole), once the bytes paid ahead leave room for them (a read alone always has room). They
   * count as ahead until `landed` says they arrived, or will not.
   *
   * Why the room: a byte paid ahead got its time on the link when it was paid; if it crosses
   * later (the link slow a while, the response held in a queue), it crosses on top of what is
   * paid then. What all reads hold paid ahead is what a window can carry beyond the cap: with
   * no room kept, eight reads of 320 KiB each behind a link slowed to 0.3 of a 2 MiB/s cap for
   * 3 s, then recovered, carried 1.12-1.25x the cap over the next 5 s (measured; with the room,
   * 1.02-1.06, bench:bundle). Room for a twentieth of a window held the cap too, but kept the
   * link 15 % less busy: small blobs, each paid ahead until it arrives, wait for room a round trip.
   */
  async open(bytes: number, signal?: AbortSignal): Promise<void> {
    if (this.opening.length === 0 && this.hasRoomFor(bytes)) this.ahead += bytes;
    else {
      signal?.throwIfAborted();
      // Admitted in turn; admitWaiting counts it ahead.
      await new Promise<void>((resolve, reject) => {
        const abort = (): void => {
          this.opening.splice(this.opening.indexOf(waiter), 1);
          reject(signal!.reason as Error);
          this.admitWaiting();
        };
        const waiter = {
          bytes,
          admit: () => {
            signal?.removeEventListener('abort', abort);
            resolve();
          },
        };
        this.opening.push(waiter);
        signal?.addEventListener('abort', abort, { once: true });
      });
    }
    try {
      await this.pay(bytes, signal);
    } catch (error) {
      this.landed(bytes);
      throw error;
    }
  }

  /** Bytes paid ahead that have not arrived yet. */
  get paidAhead(): number {
    return this.ahead;
  }

  /** `bytes` paid ahead arrived (or will not come: the read ended short). */
  landed(bytes: number): void {
    if (bytes <= 0) return;
    this.ahead = Math.max(0, this.ahead - bytes);
    this.admitWaiting();
  }

  /** A read alone always has room. */
  private hasRoomFor(bytes: number): boolean {
    return this.ahead === 0 || this.ahead + bytes <= this.aheadBytes;
  }

  private admitWaiting(): void {
    for (let next = this.opening[0]; next && this.hasRoomFor(next.bytes); next = this.opening[0]) {
      this.opening.shift();
      // Counted at once, so the next in turn sees it.
      this.ahead += next.bytes;
      next.admit();
    }
  }
}

/** The share of a window's bytes that reads may hold paid ahead: at most what a window carries beyond the cap. */
export const AHEAD_SHARE = 0.1;

/**
 * What a read has across the link before its reader could pace it: the connection's first TCP
 * window, the buffers between the socket and the reader (a chunk of up to 64 KiB in each: some
 * 224 KiB behind a 64 KiB window, measured), and the chunk that reading the first one lets
 * across. A pace that paid for each chunk only as it arrived would pay for these late: with many
 * reads starting at once, their windows alone overshoot the rate. (A connection whose window
 * grew larger than this still gets ahead of its pay by the difference.)
 */
export const PREPAID_BYTES = 320 * 1024;

/**
 * `source` (lazy: it asks for nothing until first read) through `pacer`, paid ahead of what it
 * brings: the first PREPAID_BYTES (all of `bytes`, if fewer) before it is asked for, then each
 * chunk as it arrives, the reader sleeping off the debt before it reads on (which lets the next
 * chunk's worth across), until `bytes` are paid: the last chunks crossed with the first window.
 * The same reckoning as a blob through `pacerMeter`, for a reader that holds the chunks itself.
 */
export async function* pacedRead<T extends { length: number }>(source: AsyncIterable<T>, bytes: number, pacer: StreamPacer, signal?: AbortSignal): AsyncGenerator<T> {
  const read = await pacerMeter(pacer).open(Math.min(bytes, PREPAID_BYTES), signal, bytes);
  try {
    for await (const chunk of source) {
      await read.arrived(chunk.length);
      yield chunk;
    }
  } finally {
    read.close();
  }
}

/**
 * `pacer` as the registry transport's meter (`LinkMeter`), for a reader whose every request
 * crosses the link (the cache warm: manifests, attachments and blobs; `pacedRead`): each request
 * pays what it is expected to bring before it is sent. A body whose length is known (a blob)
 * then pays each chunk as it arrives, so the first window stays paid ahead of what is read (the
 * bytes in the socket's buffers crossed already), until its whole length is paid. A body of
 * unknown length pays only what arrives beyond what it expected.
 */
export function pacerMeter(pacer: StreamPacer): LinkMeter {
  return {
    async open(expected, signal, bodyBytes) {
      await pacer.open(expected, signal);
      let paid = expected;
      let got = 0;
      let closed = false;
      return {
        arrived: (bytes, readSignal) => {
          pacer.landed(Math.min(bytes, paid - got));
          got += bytes;
          // Known length: paid runs `expected` ahead of `got`, up to the length; unknown (or a body
          // longer than it said, which its reader refuses): up to `got`.
          const due = bodyBytes === undefined ? got : Math.max(got, Math.min(bodyBytes, got + expected));
          if (due <= paid) return undefined;
          const owed = due - paid;
          // Of what it pays now, what is beyond the bytes that came.
          const ahead = Math.min(owed, due - got);
          paid = due;
          return pacer.pay(owed, readSignal ?? signal, ahead);
        },
        close: () => {
          if (!closed) pacer.landed(paid - got);
          closed = true;
        },
      };
    },
  };
}

/**
 * One charge: when it started (ms since epoch), its bytes, and `until`: when its bytes stopped
 * crossing, or while it runs, the latest they may (its deadline); absent, the same as `at` (a
 * transfer over at once). `id` names it, so its end can be written.
 */
export type LedgerEntry = readonly [at: number, bytes: number, until?: number, id?: string];

/** A ledger's entries from its Lease annotation (JSON); an entry of another shape, or text that is not JSON, is left out. */
export function readLedger(text: string | undefined): LedgerEntry[] {
  if (!text) return [];
  try {
    const parsed: unknown = JSON.parse(text);
    if (!Array.isArray(parsed)) return [];
    // [at, bytes] (a charge over at once, as agents before 0.x wrote them) or [at, bytes, until, id].
    return parsed.filter(
      (entry): entry is LedgerEntry =>
        Array.isArray(entry) && typeof entry[0] === 'number' && typeof entry[1] === 'number' && (entry.length === 2 || (entry.length === 4 && typeof entry[2] === 'number' && typeof entry[3] === 'string')),
    );
  } catch {
    return [];
  }
}

/** `entries` with the charge `id` over at `now`, having moved `bytes` (default: what it was charged): it counts a window from now. */
export function endCharge(entries: readonly LedgerEntry[], id: string, now: number, bytes?: number): LedgerEntry[] {
  return entries.map((entry) => (entry[3] === id ? ([entry[0], bytes ?? entry[1], now, id] as const) : entry));
}

export class WindowLedger {
  private entries: LedgerEntry[] = [];

  constructor(
    readonly bytesPerWindow: number,
    readonly windowMs: number = LINK_WINDOW_MS,
    private readonly clock: Clock = SYSTEM_CLOCK,
  ) {
    if (!(bytesPerWindow > 0)) throw new RangeError('a link rate must be more than zero');
  }

  /** Charges still counted (another node's, read from the shared record, included). */
  recent(): LedgerEntry[] {
    const now = this.clock.now();
    this.entries = this.entries.filter((entry) => this.leavesAt(entry) > now);
    return [...this.entries];
  }

  /** Takes over charges made elsewhere. */
  absorb(entries: readonly LedgerEntry[]): void {
    this.entries.push(...entries.filter(([at, bytes, until]) => Number.isFinite(at) && bytes > 0 && (until === undefined || Number.isFinite(until))));
    this.entries.sort((a, b) => a[0] - b[0]);
  }

  /** How long until `bytes` may start: 0 when the window has room now. */
  waitFor(bytes: number): number {
    const now = this.clock.now();
    const entries = this.recent().sort((a, b) => this.leavesAt(a) - this.leavesAt(b));
    // Too big for any window: it goes once the ledger is empty.
    const room = Math.min(bytes, this.bytesPerWindow);
    let used = entries.reduce((total, [, charged]) => total + charged, 0);
    if (used + room <= this.bytesPerWindow) return 0;
    // Charges leave as their windows (or an oversized one's own time at the rate) pass.
    for (const entry of entries) {
      used -= entry[1];
      if (used + room <= this.bytesPerWindow) return Math.max(0, this.leavesAt(entry) - now + 1);
    }
    return 0;
  }

  /**
   * Waits for room, then charges `bytes` as started now, open for at most `openMs` (0: over at
   * once); `end` closes it. Callers sharing a ledger are served in turn.
   */
  async start(bytes: number, signal?: AbortSignal, openMs = 0, id?: string): Promise<void> {
    const turn = this.queue.then(async () => {
      signal?.throwIfAborted();
      for (let wait = this.waitFor(bytes); wait > 0; wait = this.waitFor(bytes)) await this.clock.sleep(wait, signal);
      const now = this.clock.now();
      this.entries.push(openMs > 0 || id !== undefined ? [now, bytes, now + openMs, id] : [now, bytes]);
    });
    this.queue = turn.catch(() => undefined);
    await turn;
  }

  /** A charge counts for a window after its bytes stopped crossing, or for as long as it takes at the rate when that is longer. */
  private leavesAt([at, bytes, until]: LedgerEntry): number {
    return Math.max((until ?? at) + this.windowMs, at + (bytes / this.bytesPerWindow) * this.windowMs);
  }

  private queue: Promise<void> = Promise.resolve();
}
