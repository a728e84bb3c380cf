/**
 * yargs `coerce` checks for numeric flags: a bad value is one line naming the flag, found
 * while parsing, before any registry or cluster work starts.
 */
import { parseDuration } from '../cluster/wait.js';
import { BadInputError } from '../errors.js';

function numberOf(flag: string, value: unknown, wanted: string): number {
  if (Array.isArray(value)) throw new BadInputError(`--${flag} given more than once; give it once, as ${wanted}`);
  if (typeof value !== 'number' || Number.isNaN(value)) throw new BadInputError(`--${flag} is not a number; give ${wanted}`);
  return value;
}

/** Concurrency (at least 1), retries (at least 0). */
export function integerAtLeast(flag: string, min: number): (value: unknown) => number {
  const wanted = `an integer >= ${min}`;
  return (value) => {
    const n = numberOf(flag, value, wanted);
    if (!Number.isInteger(n) || n < min) throw new BadInputError(`--${flag} must be ${wanted}, got ${n}`);
    return n;
  };
}

/**
 * Timeouts and intervals in seconds, in the forms every duration flag takes: `90s`, `30m`, `2h`,
 * `1h30m`, `250ms`, or a bare number of seconds.
 */
export function positiveSeconds(flag: string): (value: unknown) => number {
  const ms = positiveDuration(flag);
  return (value) => ms(value) / 1000;
}

/** `90s`, `30m`, `2h` (a bare number is seconds) in milliseconds, more than zero. */
export function positiveDuration(flag: string): (value: unknown) => number {
  return (value) => {
    if (Array.isArray(value)) throw new BadInputError(`--${flag} given more than once; give it once, e.g. 90s, 30m, 2h`);
    let ms: number;
    try {
      ms = parseDuration(String(value));
    } catch (error) {
      throw new BadInputError(`--${flag}: ${(error as Error).message}`);
    }
    if (!(ms > 0)) throw new BadInputError(`--${flag} must be longer than zero, e.g. 90s, 30m, 2h`);
    return ms;
  };
}

const RATE_UNITS: Record<string, number> = {
  b: 1, kb: 1e3, mb: 1e6, gb: 1e9, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30,
  bit: 1 / 8, kbit: 1e3 / 8, mbit: 1e6 / 8, gbit: 1e9 / 8,
};

/** A link rate in bytes per second: `20MiB/s`, `100Mbit/s`, `5MB` (the `/s` may be left out), or bare bytes per second. */
export function linkRate(flag: string): (value: unknown) => number {
  const wanted = 'e.g. 20MiB/s, 100Mbit/s, 5MB/s';
  return (value) => {
    if (Array.isArray(value)) throw new BadInputError(`--${flag} given more than once; give it once, ${wanted}`);
    const m = /^(\d+(?:\.\d+)?)\s*([a-z]*?)(?:\/s|ps)?$/i.exec(String(value).trim());
    const unit = m ? (m[2] === '' ? 'b' : m[2]!.toLowerCase()) : undefined;
    if (!m || unit === undefined || !(unit in RATE_UNITS)) throw new BadInputError(`--${flag}: bad rate ${JSON.stringify(String(value))}: use ${wanted}`);
    const rate = Number(m[1]) * RATE_UNITS[unit]!;
    if (!(rate > 0)) throw new BadInputError(`--${flag} must be more than zero, ${wanted}`);
    return rate;
  };
}
