/**
 * yargs `coerce` checks for numeric flags: a bad value is one line naming the flag, found
 * while parsing, before any registry or cluster work starts.
 */
import { BadInputError } from '../errors.js';
import { parseDuration, parseRate } from '../units.js';

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

/** A link rate in bytes per second: `20MiB/s`, `100Mbit/s`, `5MB` (the `/s` may be left out), or bare bytes per second. */
export function linkRate(flag: string): (value: unknown) => number {
  const wanted = 'e.g. 20MiB/s, 100Mbit/s, 5MB/s';
  return (value) => {
    if (Array.isArray(value)) throw new BadInputError(`--${flag} given more than once; give it once, ${wanted}`);
    const rate = parseRate(String(value));
    if (rate === undefined) throw new BadInputError(`--${flag}: bad rate ${JSON.stringify(String(value))}: use ${wanted}`);
    if (!(rate > 0)) throw new BadInputError(`--${flag} must be more than zero, ${wanted}`);
    return rate;
  };
}
