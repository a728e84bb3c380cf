import { formatBytes } from '../units.js';
import { columnsOf, fitLine } from '../terminal-line.js';
/**
 * Transfer progress on stderr. `live`: one line rewritten in place (bytes, images, rate, ETA),
 * cut to the terminal's width. `lines` (CI logs, files): a line per image completed, nothing
 * rewritten. `none`: nothing; the caller's summary says what was done.
 */

export type ProgressMode = 'live' | 'lines' | 'none';

export interface ProgressOptions {
  /** What a completed image line says: "bundled", "pushed". */
  readonly verb: string;
  readonly totalBytes: number;
  readonly totalImages: number;
  /** Images already complete before this run (counted, not listed). */
  readonly doneImages?: number;
  /** Rewrite one line in place; default: whether `out` is a TTY. */
  readonly tty?: boolean;
  /** Overrides `tty`: what to write (the CLI decides from the terminal, TERM, --progress and --quiet). */
  readonly mode?: ProgressMode;
}

const REDRAW_MS = 200;

export class TransferProgress {
  private bytes = 0;
  private totalBytes: number;
  private images: number;
  private readonly started = performance.now();
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly mode: ProgressMode;

  constructor(private readonly out: NodeJS.WritableStream, private readonly opts: ProgressOptions) {
    this.images = opts.doneImages ?? 0;
    this.totalBytes = opts.totalBytes;
    this.mode = opts.mode ?? ((opts.tty ?? (out as { isTTY?: boolean }).isTTY === true) ? 'live' : 'lines');
    if (this.mode === 'live') {
      this.timer = setInterval(() => this.redraw(), REDRAW_MS);
      this.timer.unref();
    }
  }

  addBytes(n: number): void {
    this.bytes += n;
  }

  /** More bytes to transfer than first counted (a transfer that learns its work as it goes). */
  addTotal(n: number): void {
    this.totalBytes += n;
  }

  /** An image found complete from an earlier run: counted, not listed. */
  imageKept(): void {
    this.images++;
  }

  imageDone(pullSpec: string, bytes: number): void {
    this.images++;
    if (this.mode === 'lines') this.out.write(`${this.opts.verb} ${this.images}/${this.opts.totalImages} ${pullSpec} (${formatBytes(bytes)})\n`);
  }

  /** Clears the live line; the caller prints its summary next. */
  finish(): void {
    if (!this.timer) return;
    clearInterval(this.timer);
    this.out.write('\r\x1b[K');
  }

  /** Seconds since the transfer started. */
  elapsedSeconds(): number {
    return (performance.now() - this.started) / 1000;
  }

  private redraw(): void {
    const seconds = this.elapsedSeconds();
    const rate = seconds > 0 ? this.bytes / seconds : 0;
    const left = this.totalBytes - this.bytes;
    const eta = rate > 0 && left > 0 ? ` ETA ${formatDuration(left / rate)}` : '';
    const line = `${formatBytes(this.bytes)} of ${formatBytes(this.totalBytes)}, ${this.images}/${this.opts.totalImages} images, ${formatBytes(rate)}/s${eta}`;
    this.out.write(`\r\x1b[K${fitLine(line, columnsOf(this.out))}`);
  }
}

export function formatDuration(seconds: number): string {
  const s = Math.ceil(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
