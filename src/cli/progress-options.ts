/**
 * `--progress` and `--quiet` of `bundle create` and `bundle push`, as `plan`'s `--progress`: a
 * live line on a terminal; off one (CI, a file, TERM=dumb) only the summary, unless asked.
 */
import type { Argv } from 'yargs';
import type { ProgressMode } from '../bundle/progress.js';
import { isLiveTerminal } from '../terminal-line.js';

export interface ProgressFlags {
  progress?: boolean;
  quiet?: boolean;
}

export function withProgressOptions<T>(y: Argv<T>): Argv<T & ProgressFlags> {
  return y
    .option('progress', { type: 'boolean', describe: 'Progress on stderr: a live line on a terminal, else a line per image [default: on a terminal (not TERM=dumb)]' })
    .option('quiet', { alias: 'q', type: 'boolean', describe: 'No progress, only the summary and errors' }) as unknown as Argv<T & ProgressFlags>;
}

export function progressModeFrom(flags: ProgressFlags, stderr: NodeJS.WritableStream, term: string | undefined = process.env.TERM): ProgressMode {
  if (flags.quiet || flags.progress === false) return 'none';
  const live = isLiveTerminal(stderr, term);
  if (flags.progress) return live ? 'live' : 'lines';
  return live ? 'live' : 'none';
}
