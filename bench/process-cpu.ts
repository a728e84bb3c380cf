/** CPU seconds (user + system) one process has used, from /proc; with `children`, also those of the children it waited for. */
import { readFileSync } from 'node:fs';

const CLOCK_TICKS = 100;

export function processCpuSeconds(pid: string | number, options: { children?: boolean } = {}): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // After the command name (which may hold spaces), fields 14-17 of proc(5) are utime, stime, cutime, cstime.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]) + (options.children ? Number(fields[13]) + Number(fields[14]) : 0);
  return ticks / CLOCK_TICKS;
}
