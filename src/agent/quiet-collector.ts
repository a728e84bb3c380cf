/**
 * One full garbage collection once the agent's passes go quiet, so that an idle agent gives back
 * the heap pages its last pass filled.
 *
 * Why V8 does not do it alone: its memory reducer, which collects and releases pages once
 * allocation slows, stops after three collections and arms again only when the committed heap
 * has grown by 10 MB since, or the old generation expands. A staging expands it and spends the
 * three while pulls still allocate; once it ends, a heap of 10-20 MB re-arms nothing, and the
 * pass's objects that outlived two scavenges (the DaemonSet's 1 MiB semi-space) keep their
 * old-space pages after they die: 5 MiB at 1000 images (bench:agent, docs/benchmarks.md).
 *
 * The collection moves every movable object (V8's `--compact-on-every-full-gc`, set for it alone):
 * a plain one leaves each page that still holds a few live objects, and gave back 2 MiB where
 * this gives back 5. It takes 15-22 ms of a 10 MB heap, once a pass (a resync a minute at idle).
 *
 * `gc` is there only under `--expose-gc` (the DaemonSet's NODE_OPTIONS); without it, nothing runs.
 */
import { setFlagsFromString } from 'node:v8';

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
    const gc = (globalThis as { gc?: Collect }).gc;
    this.collect = options.collect ?? (gc && (() => compactingCollection(gc)));
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

/** One full collection that evacuates every page it can, so that none stays for a few live objects. */
export function compactingCollection(gc: Collect, setFlags: (flags: string) => void = setFlagsFromString): void {
  // V8 reads the flag as each full collection picks the pages to evacuate; the passes' own collections keep the default.
  setFlags('--compact-on-every-full-gc');
  try {
    gc();
  } finally {
    setFlags('--no-compact-on-every-full-gc');
  }
}
