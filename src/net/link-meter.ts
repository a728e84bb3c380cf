/**
 * Reads of prestage's own over a capped link (the agents' size reads, `stage --link-rate`'s plan)
 * charged on the same ledger as the nodes' pulls, BEFORE their bytes cross: every request pays
 * what it is expected to bring back before it is sent (a bounded Range its length, a HEAD
 * nothing, anything else a manifest's worth), and a body longer than that pays the rest as it
 * arrives, its reader waiting for room before reading on.
 *
 * Payments draw on slices reserved on the ledger (one write to reserve, one to end: a write per
 * request would have every node contend on the one Lease and starve the pulls, measured). A
 * slice counts while any read that drew on it is open, then until a window after the last of
 * them closed, with the bytes that actually arrived: so the reads and the pulls together hold
 * the cap over any window, whenever the bytes cross.
 */

/** A charge on the ledger: counted until a window after `end` (or after its deadline, if it never ends). */
export interface LinkCharge {
  /** Its bytes stopped crossing now, `bytes` of them (default: what was charged). Never throws. */
  end(bytes?: number): Promise<void>;
}

/** Where transfers over the link are charged before they start (`agent/link-share.ts`). */
export interface LinkLedger {
  /**
   * Waits until `bytes` fit the cap's window, then charges them: the transfer may start. It is
   * counted until a window after its `end`, or after `openMs` from now if it does not end by
   * then (0: a transfer over at once, counted a window from now).
   */
  start(bytes: number, capBytesPerSecond: number, signal?: AbortSignal, openMs?: number): Promise<LinkCharge>;
}

/** One request's bytes, paid before they cross: what the transport reports as they arrive. */
export interface MeteredRead {
  /** `bytes` arrived; resolves once reading on keeps within what was reserved. */
  arrived(bytes: number, signal?: AbortSignal): Promise<void> | undefined;
  /** The body is over (read, destroyed or failed). */
  close(): void;
}

/** A read no meter counts: for a hook whose meter is not set (no cap, or no batch under way). */
export const UNMETERED: MeteredRead = { arrived: () => undefined, close: () => undefined };

/** What a capped reader pays through (the registry transport's hook). */
export interface LinkMeter {
  /**
   * The most one request may ask for at once, where the meter wants every byte paid before it
   * is asked for: a longer blob is read as Range parts of this length, each paid before it is
   * sent (`RegistryClient.blobStream`). Unset: one request per blob, its reader paced as it
   * arrives (`pacerMeter`).
   */
  readonly partBytes?: number;
  /**
   * Before a request is sent: pays `expected` bytes. `bodyBytes`, where the caller knows the
   * body's whole length (a blob's declared size), lets a meter keep `expected` paid ahead of
   * what arrives until the body's end, as `pacedRead` does.
   */
  open(expected: number, signal?: AbortSignal, bodyBytes?: number): Promise<MeteredRead>;
}

/** What a request without a bounded Range is expected to bring back: about a manifest's worth. */
export const EXPECTED_RESPONSE_BYTES = 2 * 1024;

/**
 * A response's status line and headers, which cross the link too: distribution's answer to a
 * blob Range is about 450 bytes of them (Content-Range, Docker-Content-Digest, Etag, Date...),
 * a manifest's a little less. Charged with every request the ledger meter pays for.
 */
export const RESPONSE_HEAD_BYTES = 512;

/** Under a ledger meter a blob is asked for in parts: half a second of the cap, 16 KiB to 320 KiB. */
export function partBytesFor(capBytesPerSecond: number): number {
  return Math.max(16 * 1024, Math.min(320 * 1024, Math.floor(capBytesPerSecond / 2)));
}

/** A capped read held because its staging window is shut: it did not start, and crossed nothing. */
export class LinkShutError extends Error {
  constructor(message = 'the staging window is shut: nothing crosses the link until it opens') {
    super(message);
    this.name = 'LinkShutError';
  }
}

/** What a request is expected to carry back: a HEAD nothing, a bounded Range its length, else a manifest's worth. */
export function expectedResponseBytes(method: string, headers: Readonly<Record<string, string>> | undefined): number {
  if (method === 'HEAD') return 0;
  const range = /^bytes=(\d+)-(\d+)$/.exec(headers?.range ?? headers?.Range ?? '');
  return range ? Number(range[2]) - Number(range[1]) + 1 : EXPECTED_RESPONSE_BYTES;
}

interface Slice {
  readonly charge: LinkCharge;
  readonly bytes: number;
  /** Paid from it (expected and arrived beyond). */
  paid: number;
  /** Arrived: what it ends with. */
  arrived: number;
  /** Reads that drew on it and are still open. */
  readers: number;
  /** No longer the one paid from. */
  retired: boolean;
  ended: boolean;
}

export interface LedgerMeterOptions {
  /** Bytes reserved at a time (default: a second of the cap, at least 16 KiB). */
  readonly sliceBytes?: number;
  /**
   * Asked before every request is paid for: may the link be used now? It throws (`LinkShutError`:
   * the agents' size reads stop at a window's close) or waits (the CLI's plan waits for the
   * opening); nothing is paid or sent until it returns.
   */
  readonly gate?: (signal?: AbortSignal) => Promise<void> | void;
  /** The longest a slice may stay open: past it, the ledger stops counting it (a reader that died). */
  readonly openMs?: number;
}

export class LedgerMeter implements LinkMeter {
  private current: Slice | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly ending = new Set<Promise<void>>();
  private readonly sliceBytes: number;
  private readonly openMs: number;
  private readonly gate: LedgerMeterOptions['gate'];
  readonly partBytes: number;

  constructor(private readonly ledger: LinkLedger, private readonly capBytesPerSecond: number, options: LedgerMeterOptions = {}) {
    this.sliceBytes = options.sliceBytes ?? Math.max(16 * 1024, Math.round(capBytesPerSecond));
    this.openMs = options.openMs ?? 60_000;
    this.gate = options.gate;
    this.partBytes = Math.min(partBytesFor(capBytesPerSecond), this.sliceBytes);
  }

  /** Pays the response's head and `expected` bytes of its body before the request is sent. */
  async open(expected: number, signal?: AbortSignal): Promise<MeteredRead> {
    await this.gate?.(signal);
    const slices = new Set<Slice>();
    // The head crosses with the first byte: counted as arrived at once, on the slice it is paid from.
    let paid = expected;
    let got = 0;
    let closed = false;
    await this.pay(expected + RESPONSE_HEAD_BYTES, slices, signal);
    const closeSlices = (): void => {
      for (const slice of slices) {
        slice.readers--;
        this.maybeEnd(slice);
      }
    };
    // Room may have taken a while: a window that shut meanwhile still holds the request back.
    try {
      await this.gate?.(signal);
    } catch (error) {
      closeSlices();
      throw error;
    }
    const opening = slices.values().next().value;
    if (opening) opening.arrived += RESPONSE_HEAD_BYTES;
    return {
      arrived: (bytes, readSignal) => {
        got += bytes;
        // Attributed to the slice it started on: that one stays open until the read closes.
        const first = slices.values().next().value;
        if (first) first.arrived += bytes;
        if (got <= paid) return undefined;
        const owed = got - paid;
        paid = got;
        return this.pay(owed, slices, readSignal ?? signal);
      },
      close: () => {
        if (closed) return;
        closed = true;
        closeSlices();
      },
    };
  }

  /** Ends the slice being paid from; resolves once every ended slice is written. Reads still open end theirs when they close. */
  async finish(): Promise<void> {
    await this.queue.catch(() => undefined);
    if (this.current) this.retire(this.current);
    this.current = undefined;
    await Promise.all(this.ending);
  }

  private pay(bytes: number, slices: Set<Slice>, signal?: AbortSignal): Promise<void> {
    const turn = this.queue.then(async () => {
      let slice = this.current;
      if (!slice || slice.bytes - slice.paid < bytes) {
        if (slice) this.retire(slice);
        const size = Math.max(this.sliceBytes, bytes);
        const charge = await this.ledger.start(size, this.capBytesPerSecond, signal, this.openMs);
        slice = { charge, bytes: size, paid: 0, arrived: 0, readers: 0, retired: false, ended: false };
        this.current = slice;
      }
      slice.paid += bytes;
      if (!slices.has(slice)) {
        slices.add(slice);
        slice.readers++;
      }
    });
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  private retire(slice: Slice): void {
    slice.retired = true;
    this.maybeEnd(slice);
  }

  private maybeEnd(slice: Slice): void {
    if (!slice.retired || slice.readers > 0 || slice.ended) return;
    slice.ended = true;
    const ending = slice.charge.end(slice.arrived).finally(() => this.ending.delete(ending));
    this.ending.add(ending);
  }
}
