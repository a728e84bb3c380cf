/**
 * One full garbage collection once the agent's passes go quiet, so that an idle agent gives back
 * the heap pages its last pass filled.
 *
 * Why V8 does not do it alone: its memory reducer, which collects and releases pages once
 * allocation slows, stops after three collections and arms again only when the committed heap
 * has grown by 10 MB since. The agent's whole heap is 10-20 MB, so after its first quiet spell the
 * reducer never runs again, and each pass's objects that outlived two scavenges (the DaemonSet's
 * 1 MiB semi-space) keep their old-space pages after they die: 6-7 MB at 1000 images, measured
 * with `--trace-gc` (docs/benchmarks.md). A collection costs a few milliseconds of a 10 MB heap,
 * once a pass (a resync a minute at idle).
 *
 * `gc` is there only under `--expose-gc` (the DaemonSet's NODE_OPTIONS); without it, nothing runs.
 */

/** V8's `gc()` under `--expose-gc`. */
type Collect = () => void;

export interface QuietCollectorOptions {
  /** How long the passes stay quiet before the collection, so that a pass's queued follow-up goes first. */
  readonly afterMs: number;
  /** Default: the global `gc`, when node runs with `--expose-gc`. */
  readonly collect?: Collect;
}

export class QuietCollector {
  private timer: NodeJS.Timeout | undefined;
  private readonly collect: Collect | undefined;

  constructor(private readonly options: QuietCollectorOptions) {
    this.collect = options.collect ?? (globalThis as { gc?: Collect }).gc;
  }

  /** A pass starts: a collection waiting for quiet waits again. */
  busy(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** No pass runs or is queued: collect once after `afterMs` unless another starts. */
  quiet(): void {
    const collect = this.collect;
    if (collect === undefined) return;
    this.busy();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      collect();
    }, this.options.afterMs);
    // Never what keeps the process up.
    this.timer.unref();
  }
}
