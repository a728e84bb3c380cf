/**
 * `plan`'s progress on stderr: on a terminal one line rewritten in place (`reading release
 * ... 12.3 MiB, 4 s` then `sizing 123/190 images, 5 s`), cleared before anything else is
 * printed; elsewhere silent unless `--progress`, then a plain line every few seconds. A
 * timer redraws it, so a slow link still shows the bytes and seconds moving.
 */
import type { PlanProgress } from '../plan/build.js';
import type { ReadCounters } from '../registry/client.js';
import { columnsOf, fitLine, isLiveTerminal } from '../terminal-line.js';

const TERMINAL_REDRAW_MS = 200;
const LOG_EVERY_MS = 5_000;

export interface ProgressLine {
  update(progress: PlanProgress): void;
  /** Clears the line; nothing more is drawn. */
  stop(): void;
}

export function planProgress(stderr: NodeJS.WritableStream, asked: boolean | undefined, counters: ReadCounters): ProgressLine {
  const terminal = isLiveTerminal(stderr);
  if (!(asked ?? terminal)) return { update: () => undefined, stop: () => undefined };
  const started = Date.now();
  let current: PlanProgress | undefined;
  let drawn = '';
  const text = (): string => {
    const seconds = `${Math.round((Date.now() - started) / 1000)} s`;
    if (!current) return '';
    if (current.phase === 'release') return `reading release ${current.release} ... ${mib(counters.bodyBytes)}, ${seconds}`;
    return `sizing ${current.done}/${current.total} images, ${counters.requests} requests, ${seconds}`;
  };
  const draw = (): void => {
    const line = text();
    if (!line || line === drawn) return;
    drawn = line;
    stderr.write(terminal ? `\r\x1b[K${fitLine(line, columnsOf(stderr))}` : `${line}\n`);
  };
  const timer = setInterval(draw, terminal ? TERMINAL_REDRAW_MS : LOG_EVERY_MS);
  timer.unref();
  return {
    update(progress) {
      const phaseChanged = current?.phase !== progress.phase;
      current = progress;
      if (phaseChanged) draw();
    },
    stop() {
      clearInterval(timer);
      if (terminal && drawn) stderr.write('\r\x1b[K');
      current = undefined;
    },
  };
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
