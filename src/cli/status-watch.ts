/**
 * `status -w`: the node × set table kept current, as `kubectl get -w` keeps a list. On a terminal
 * the table is redrawn in place when it changes, under one progress bar per set; piped, the table
 * is printed once and then only the rows that changed, one line each, so a log keeps every change
 * and nothing else. The cluster is read every `intervalMs` (the backends' snapshot, the same reads
 * `status` makes); the watch ends when `signal` aborts, or when `done` says so (`--release` once
 * READY).
 */
import type { ProgressSnapshot, SetProgress } from '../cluster/backend.js';
import { formatBytes } from '../units.js';
import { renderStatusTable, statusLayout, statusRows, type StatusLayout } from './status-table.js';

export interface WatchStatusOptions {
  readonly read: () => Promise<ProgressSnapshot>;
  readonly out: { write(text: string): unknown };
  readonly tty: boolean;
  /** Terminal width, for the bars. */
  readonly columns?: number;
  readonly intervalMs: number;
  readonly signal: AbortSignal;
  /** Injected in tests. */
  readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Ends the watch after the snapshot it returns true for has been shown. */
  readonly done?: (snapshot: ProgressSnapshot) => boolean;
}

const CLEAR = '\x1b[H\x1b[2J';

/** Resolves with the last snapshot shown. */
export async function watchStatus(opts: WatchStatusOptions): Promise<ProgressSnapshot | undefined> {
  let shown: ProgressSnapshot | undefined;
  let lastDrawn = '';
  const rowsSeen = new Map<string, string>();
  let layout: StatusLayout | undefined;
  while (!opts.signal.aborted) {
    const snapshot = await opts.read();
    if (opts.tty) {
      const frame = `${renderStatusTable(snapshot)}\n${snapshot.sets.map((set) => progressBar(set, opts.columns ?? 80)).join('\n')}\n`;
      if (frame !== lastDrawn) opts.out.write(`${CLEAR}${frame}`);
      lastDrawn = frame;
    } else if (!layout) {
      // The table once there is a row to show (a release's sets may not be applied yet), its columns those rows fill.
      const rows = statusRows(snapshot);
      if (rows.length > 0) {
        opts.out.write(renderStatusTable(snapshot));
        layout = statusLayout(snapshot);
        for (const row of statusRows(snapshot, layout)) rowsSeen.set(row.key, row.line);
      }
    } else {
      for (const row of statusRows(snapshot, layout)) {
        if (rowsSeen.get(row.key) === row.line) continue;
        rowsSeen.set(row.key, row.line);
        opts.out.write(`${row.line}\n`);
      }
    }
    shown = snapshot;
    if (opts.done?.(snapshot)) break;
    await opts.sleep(opts.intervalMs, opts.signal).catch(() => undefined);
  }
  return shown;
}

/** `prestage-4.16.3-worker  [########------------]  1/2 nodes  12.0 MiB/30.0 MiB` */
export function progressBar(set: SetProgress, columns: number): string {
  const nodes = set.nodes.length;
  const done = set.nodes.filter((n) => n.phase === 'done').length;
  const bytes = set.nodes.reduce((sum, n) => sum + (n.bytes ?? 0), 0);
  const pulled = set.nodes.reduce((sum, n) => sum + Math.min(n.pulledBytes ?? 0, n.bytes ?? 0), 0);
  const images = set.nodes.reduce((sum, n) => sum + (n.imagesTotal ?? 0), 0);
  const imagesDone = set.nodes.reduce((sum, n) => sum + (n.imagesDone ?? 0), 0);
  // Bytes where the backend reports them (the agent), else images, else nodes (MCO).
  const fraction = nodes === 0 ? 0 : done === nodes ? 1 : bytes > 0 ? pulled / bytes : images > 0 ? imagesDone / images : done / nodes;
  const tail = `  ${done}/${nodes} nodes${bytes > 0 ? `  ${formatBytes(pulled)}/${formatBytes(bytes)}` : images > 0 ? `  ${imagesDone}/${images} images` : ''}`;
  const width = Math.max(10, Math.min(40, columns - set.name.length - tail.length - 6));
  const filled = Math.round(fraction * width);
  return `${set.name}  [${'#'.repeat(filled)}${'-'.repeat(width - filled)}]${tail}`;
}
