/**
 * The slow link as `wait` sees it: a counter of bytes that crossed it (the agents' `link.bytes`,
 * or the cache's upstream bytes) sampled at each snapshot, turned into a measured rate over the
 * last 10 s, shown against the cap with the time the bytes still to go take at that rate.
 */
import type { LinkProgress } from './backend.js';

/** How far back the measured rate looks: two of the cap's 5 s windows. */
const RATE_WINDOW_MS = 10_000;

export interface LinkEvent {
  readonly type: 'link';
  readonly time: string;
  /** Where the bytes were counted: the nodes' pulls, or the cache's upstream fetches. */
  readonly source: 'nodes' | 'cache';
  readonly bytes: number;
  /** Measured over the last 10 s; absent until two samples 1 s apart. */
  readonly bytesPerSecond?: number;
  readonly capBytesPerSecond?: number;
  /** Compressed bytes the nodes still have to start over the link (their current passes). */
  readonly pendingBytes?: number;
  /** pendingBytes at the measured rate, or at the cap while nothing was measured yet. */
  readonly etaSeconds?: number;
}

export class LinkMeter {
  private samples: Array<{ at: number; bytes: number }> = [];
  private base: number | undefined;

  constructor(readonly source: LinkEvent['source']) {}

  /** A reading of the counter at `now`; a counter that went back (an agent restarted) starts the window over. */
  sample(link: Pick<LinkProgress, 'bytes'> & Partial<LinkProgress>, now: number): LinkEvent {
    const last = this.samples.at(-1);
    if (last && link.bytes < last.bytes) this.samples = [];
    this.base ??= link.bytes;
    this.samples.push({ at: now, bytes: link.bytes });
    // The last 10 s, and the sample before them: snapshots come as the nodes change, not on a beat.
    const inside = this.samples.findIndex((sample) => sample.at >= now - RATE_WINDOW_MS);
    this.samples = this.samples.slice(Math.max(0, inside - 1));
    const first = this.samples[0]!;
    const seconds = (now - first.at) / 1000;
    const rate = seconds >= 1 ? (link.bytes - first.bytes) / seconds : undefined;
    const pace = rate && rate > 0 ? rate : link.capBytesPerSecond;
    return {
      type: 'link',
      time: new Date(now).toISOString(),
      source: this.source,
      bytes: Math.max(0, link.bytes - (this.base ?? 0)),
      ...(rate !== undefined ? { bytesPerSecond: Math.round(rate) } : {}),
      ...(link.capBytesPerSecond ? { capBytesPerSecond: link.capBytesPerSecond } : {}),
      ...(link.pendingBytes !== undefined ? { pendingBytes: link.pendingBytes } : {}),
      ...(link.pendingBytes && pace ? { etaSeconds: Math.round(link.pendingBytes / pace) } : {}),
    };
  }
}
