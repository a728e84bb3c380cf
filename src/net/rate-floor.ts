/**
 * The lowest rate a transfer may keep before it counts as stalled, beside the stall time (no
 * byte at all for that long): curl's `--speed-limit`/`--speed-time`. Without it, a server that
 * sends one byte a second is never given up on.
 *
 * The floor is 1 KiB/s over each window of the stall time (60 KiB a minute by default). The
 * product serves clusters on slow links: a 256 kbit/s satellite or cellular link shared by the
 * 32 connections a registry gets by default still gives each about 1 KiB/s, and a trickle an
 * attacker uses to hold a connection is orders of magnitude below it. A slower link can lower
 * --max-concurrency (each connection gets a larger share) or raise --stall-timeout.
 *
 * A window counts only while the reader wants bytes: a reader that holds the body back (its
 * buffer is full: the link-rate cap's paced reads, a slow consumer) is not the server's stall,
 * so the link-rate cap never trips the floor by itself.
 */
/** Bytes a second a transfer must keep over each window; see above for the figure. */
export const MIN_BYTES_PER_SECOND = 1024;

export class RateFloor {
  private windowStart: number;
  private bytes = 0;
  private heldBack = false;

  constructor(
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
    private readonly minBytesPerSecond = MIN_BYTES_PER_SECOND,
  ) {
    this.windowStart = now();
  }

  /** `bytes` arrived; `heldBack`: the reader's buffer is full (it does not want more now). */
  arrived(bytes: number, heldBack: boolean): void {
    this.bytes += bytes;
    if (heldBack) this.heldBack = true;
  }

  /**
   * At the end of a window (a timer every `windowMs`): whether the server was too slow over it.
   * A window in which the reader held the body back at any point is excused. Starts the next window.
   */
  tooSlow(heldBack: boolean): boolean {
    const elapsed = this.now() - this.windowStart;
    const slow = !this.heldBack && !heldBack && elapsed >= this.windowMs && this.bytes < (this.minBytesPerSecond * elapsed) / 1000;
    this.windowStart = this.now();
    this.bytes = 0;
    this.heldBack = false;
    return slow;
  }

  /** The bytes a window of `windowMs` must carry, for messages. */
  get floorBytes(): number {
    return Math.ceil((this.minBytesPerSecond * this.windowMs) / 1000);
  }
}

/** A stall or timeout, with undici's code for it (the retry policy, registry/retry.ts, reads it). */
export function timeoutError(code: 'UND_ERR_CONNECT_TIMEOUT' | 'UND_ERR_HEADERS_TIMEOUT' | 'UND_ERR_BODY_TIMEOUT', message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** A transfer below the floor, with the code of the stall it is. */
export function floorError(code: 'UND_ERR_HEADERS_TIMEOUT' | 'UND_ERR_BODY_TIMEOUT', stallMs: number): Error {
  return timeoutError(code, `Transfer below ${MIN_BYTES_PER_SECOND} bytes/s over ${stallMs} ms`);
}
