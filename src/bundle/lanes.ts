/**
 * The transfers of `bundle create` in two lanes that share its slots. Light work (manifest
 * reads, small blobs) costs a request each: round trips and CPU, few bytes. Bulk work (big
 * blobs) costs link bytes and little else. Run one after the other, each leaves the link idle
 * part of the time (the manifests first, then stretches of small blobs); run side by side, the
 * big blobs keep the link full while the small ones go by. So while light work is queued or
 * running, bulk work holds at most `bulkSlots` slots, largest blob first; the rest are light
 * work's, first come first served (manifest reads are queued first, and queue the blobs they
 * name). Once no light work is left, bulk work takes every slot.
 *
 * The first failure stops the rest: queued work is dropped, running work sees its signal
 * aborted, and drained() rethrows it once all running work settled.
 */
import { setMaxListeners } from 'node:events';

export type Lane = 'light' | 'bulk';

export type Work = (signal: AbortSignal) => Promise<void>;

interface Job {
  readonly bytes: number;
  readonly work: Work;
}

export class TransferLanes {
  private readonly light: Job[] = [];
  /** Largest first. */
  private readonly bulk: Job[] = [];
  private readonly running: Record<Lane, number> = { light: 0, bulk: 0 };
  private readonly abort = new AbortController();
  private failure: { error: unknown } | undefined;
  private idle: (() => void) | undefined;

  constructor(private readonly slots: number, private readonly bulkSlots: number) {
    if (slots < 1 || bulkSlots < 1) throw new RangeError('lanes need at least one slot each');
    // Every transfer in flight listens (its write pipeline): dozens at once are expected, not a leak.
    setMaxListeners(Infinity, this.abort.signal);
  }

  /** Queue work; `bytes` orders the bulk lane. Work queued after a failure is dropped. */
  add(lane: Lane, bytes: number, work: Work): void {
    if (this.abort.signal.aborted) return;
    if (lane === 'light') this.light.push({ bytes, work });
    else this.bulk.splice(insertionPoint(this.bulk, bytes), 0, { bytes, work });
    this.pump();
  }

  /** Every job queued so far, and every one they queued, done; or the first failure. */
  async drained(): Promise<void> {
    if (this.busy()) await new Promise<void>((resolve) => (this.idle = resolve));
    if (this.failure) throw this.failure.error;
  }

  private busy(): boolean {
    return this.running.light + this.running.bulk + this.light.length + this.bulk.length > 0;
  }

  private bulkCap(): number {
    const lightLeft = this.light.length + this.running.light > 0;
    return lightLeft ? Math.min(this.bulkSlots, Math.max(this.slots - 1, 1)) : this.slots;
  }

  private pump(): void {
    while (this.running.light + this.running.bulk < this.slots) {
      const lane: Lane | undefined = this.bulk.length > 0 && this.running.bulk < this.bulkCap() ? 'bulk'
        : this.light.length > 0 ? 'light'
        : undefined;
      if (!lane) break;
      this.start(lane, (lane === 'bulk' ? this.bulk : this.light).shift()!);
    }
    if (!this.busy()) {
      const done = this.idle;
      this.idle = undefined;
      done?.();
    }
  }

  private start(lane: Lane, job: Job): void {
    this.running[lane]++;
    void job.work(this.abort.signal)
      .catch((error: unknown) => {
        if (this.failure) return;
        this.failure = { error };
        this.light.length = 0;
        this.bulk.length = 0;
        this.abort.abort();
      })
      .finally(() => {
        this.running[lane]--;
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
