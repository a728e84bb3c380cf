/**
 * The transfers of `bundle create` in two lanes that share its connections. Light work
 * (manifest reads, small blobs) costs a request each: round trips and CPU, few bytes. Bulk work
 * (big blobs) costs link bytes and little else. Run one after the other, each leaves the link
 * idle part of the time (the manifests first, then stretches of small blobs); run side by side,
 * the big blobs keep the link full while the small ones go by.
 *
 * Slots are connections: a big blob read in Range parts takes one per part. While light work is
 * queued or running, bulk work holds at most `bulkSlots` of them, largest blob first (a blob
 * that would like more parts than are free gets what is free, at least one); the rest are light
 * work's, first come first served (manifest reads are queued first, and queue the blobs they
 * name). Once no light work is left, bulk work takes every slot.
 *
 * The first failure stops the rest: queued work is dropped, running work sees its signal
 * aborted, and drained() rethrows it once all running work settled.
 */
import { setMaxListeners } from 'node:events';

export type Lane = 'light' | 'bulk';

/** `width`: the connections the work may open (bulk: up to what it asked for; light: one). */
export type Work = (signal: AbortSignal, width: number) => Promise<void>;

interface Job {
  readonly bytes: number;
  /** Connections it would use. */
  readonly width: number;
  readonly work: Work;
}

export class TransferLanes {
  private readonly light: Job[] = [];
  /** Largest first. */
  private readonly bulk: Job[] = [];
  /** Connections in use per lane (a light job holds one). */
  private readonly inUse: Record<Lane, number> = { light: 0, bulk: 0 };
  private readonly abort = new AbortController();
  private failure: { error: unknown } | undefined;
  private idle: (() => void) | undefined;

  constructor(private readonly slots: number, private readonly bulkSlots: number) {
    if (slots < 1 || bulkSlots < 1) throw new RangeError('lanes need at least one slot each');
    // Every transfer in flight listens (its write pipeline): dozens at once are expected, not a leak.
    setMaxListeners(Infinity, this.abort.signal);
  }

  /**
   * Queue work; `bytes` orders the bulk lane, `width` is the connections a bulk job would like
   * (light work takes one). Work queued after a failure is dropped.
   */
  add(lane: Lane, bytes: number, work: Work, width = 1): void {
    if (this.abort.signal.aborted) return;
    const job = { bytes, width: lane === 'light' ? 1 : Math.max(1, width), work };
    if (lane === 'light') this.light.push(job);
    else this.bulk.splice(insertionPoint(this.bulk, bytes), 0, job);
    this.pump();
  }

  /** Every job queued so far, and every one they queued, done; or the first failure. */
  async drained(): Promise<void> {
    if (this.busy()) await new Promise<void>((resolve) => (this.idle = resolve));
    if (this.failure) throw this.failure.error;
  }

  private busy(): boolean {
    return this.inUse.light + this.inUse.bulk + this.light.length + this.bulk.length > 0;
  }

  /** Connections bulk work may hold now. */
  private bulkCap(): number {
    const lightLeft = this.light.length + this.inUse.light > 0;
    return lightLeft ? Math.min(this.bulkSlots, Math.max(this.slots - 1, 1)) : this.slots;
  }

  private pump(): void {
    for (;;) {
      const free = this.slots - this.inUse.light - this.inUse.bulk;
      const bulkFree = Math.min(free, this.bulkCap() - this.inUse.bulk);
      if (this.bulk.length > 0 && bulkFree > 0) {
        const job = this.bulk.shift()!;
        this.start('bulk', job, Math.min(job.width, bulkFree));
      } else if (this.light.length > 0 && free > 0) {
        this.start('light', this.light.shift()!, 1);
      } else {
        break;
      }
    }
    if (!this.busy()) {
      const done = this.idle;
      this.idle = undefined;
      done?.();
    }
  }

  private start(lane: Lane, job: Job, width: number): void {
    this.inUse[lane] += width;
    void job.work(this.abort.signal, width)
      .catch((error: unknown) => {
        if (this.failure) return;
        this.failure = { error };
        this.light.length = 0;
        this.bulk.length = 0;
        this.abort.abort();
      })
      .finally(() => {
        this.inUse[lane] -= width;
        this.pump();
      });
  }
}

/** Where a job of `bytes` goes in a largest-first list: after the jobs of its size or larger. */
function insertionPoint(jobs: readonly Job[], bytes: number): number {
  let low = 0;
  let high = jobs.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (jobs[mid]!.bytes >= bytes) low = mid + 1;
    else high = mid;
  }
  return low;
}
