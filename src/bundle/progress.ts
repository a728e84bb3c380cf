import { formatBytes } from '../units.js';
/**
 * Transfer progress on stderr. On a terminal: one line rewritten in place (bytes, images,
 * rate, ETA). Elsewhere (CI logs, files): a line per image completed, nothing rewritten.
 */

export interface ProgressOptions {
  /** What a completed image line says: "bundled", "pushed". */
  readonly verb: string;
  readonly totalBytes: number;
  readonly totalImages: number;
  /** Images already complete before this run (counted, not listed). */
  readonly doneImages?: number;
  /** Rewrite one line in place; default: whether `out` is a TTY. */
  readonly tty?: boolean;
}

const REDRAW_MS = 200;

export class TransferProgress {
  private bytes = 0;
  private totalBytes: number;
  private images: number;
  private readonly started = performance.now();
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly tty: boolean;

  constructor(private readonly out: NodeJS.WritableStream, private readonly opts: ProgressOptions) {
    this.images = opts.doneImages ?? 0;
    this.totalBytes = opts.totalBytes;
    this.tty = opts.tty ?? (out as { isTTY?: boolean }).isTTY === true;
    if (this.tty) {
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
    if (!this.tty) this.out.write(`${this.opts.verb} ${this.images}/${this.opts.totalImages} ${pullSpec} (${formatBytes(bytes)})\n`);
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
    this.out.write(`\r\x1b[K${formatBytes(this.bytes)} of ${formatBytes(this.totalBytes)}, ${this.images}/${this.opts.totalImages} images, ${formatBytes(rate)}/s${eta}`);
  }
}

export function formatDuration(seconds: number): string {
  const s = Math.ceil(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
