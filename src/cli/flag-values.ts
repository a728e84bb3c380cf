/**
 * yargs `coerce` checks for flags that take numbers, sizes, rates and durations: a bad value is
 * one line naming the flag, the value and an example of the accepted form, found while parsing,
 * before any registry or cluster work starts. The grammar itself is src/units.ts.
 */
import { BadInputError } from '../errors.js';
import { MAX_TIMER_MS } from '../long-timer.js';
import { DURATION_EXAMPLE, formatBytes, MAX_DURATION_MS, parseDuration, parseRate, parseSize, RATE_EXAMPLE, SIZE_EXAMPLE, sizeAsQuantity, UnitError } from '../units.js';

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

/** The one value of a flag given once; the grammar's refusal with the flag's name in front. */
function parsedOnce<T>(flag: string, example: string, value: unknown, parse: (text: string) => T): T {
  if (Array.isArray(value)) throw new BadInputError(`--${flag} given more than once; give it once, ${example}`);
  try {
    return parse(String(value));
  } catch (error) {
    if (error instanceof UnitError) throw new BadInputError(`--${flag}: ${error.message}`);
    throw error;
  }
}

/**
 * Timeouts and intervals in seconds, in the forms every duration flag takes: `90s`, `30m`, `2h`,
 * `1h30m`, `250ms`, or a bare number of seconds; at most 576h (24 days), the longest a plain
 * timer holds.
 */
export function positiveSeconds(flag: string): (value: unknown) => number {
  const ms = positiveDuration(flag);
  return (value) => ms(value) / 1000;
}

/** The longest duration a flag held by a plain timer takes: 576h, whole days under setTimeout's bound. */
export const TIMER_DURATION_MAX_MS = Math.floor(MAX_TIMER_MS / 86_400_000) * 86_400_000;

/**
 * `90s`, `30m`, `2h` (a bare number is seconds) in milliseconds, more than zero and at most
 * `maxMs`: 576h unless the flag is held by a long timer (`long-timer.ts`), then a year.
 */
export function positiveDuration(flag: string, maxMs = TIMER_DURATION_MAX_MS): (value: unknown) => number {
  return (value) => {
    const ms = parsedOnce(flag, DURATION_EXAMPLE, value, parseDuration);
    if (!(ms > 0)) throw new BadInputError(`--${flag} must be longer than zero, ${DURATION_EXAMPLE}`);
    if (ms > maxMs) throw new BadInputError(`--${flag} ${JSON.stringify(String(value))} is longer than ${maxMs / 3_600_000}h, the longest it takes; use ${DURATION_EXAMPLE}`);
    return ms;
  };
}

/** A duration held by a long timer (`wait --timeout`, `--fail-after`): up to a year. */
export function positiveLongDuration(flag: string): (value: unknown) => number {
  return positiveDuration(flag, MAX_DURATION_MS);
}

/** A link rate in bytes per second: `20MiB/s`, `5MB/s`, `20Mi` (bytes); `40Mbit/s`, `40Mbps` (bits). */
export function linkRate(flag: string): (value: unknown) => number {
  return (value) => {
    const rate = parsedOnce(flag, RATE_EXAMPLE, value, (text) => parseRate(text));
    if (rate === undefined) throw new BadInputError(`--${flag}: ${JSON.stringify(String(value))} is not a rate; use ${RATE_EXAMPLE}`);
    if (!(rate > 0)) throw new BadInputError(`--${flag} must be more than zero, ${RATE_EXAMPLE}`);
    return rate;
  };
}

/** A size in bytes (`4Gi`, `4G`, `100GB`, plain bytes), at least `minBytes`. */
export function sizeAtLeast(flag: string, minBytes: number): (value: unknown) => number {
  return (value) => {
    const bytes = parsedOnce(flag, SIZE_EXAMPLE, value, parseSize);
    if (bytes < minBytes) throw new BadInputError(`--${flag} ${JSON.stringify(String(value))} is under ${formatBytes(minBytes)}, the least it takes; use ${SIZE_EXAMPLE}`);
    return bytes;
  };
}

/** A size for a Kubernetes field that takes a quantity (a PVC's storage): `100GB` → `100G`. */
export function sizeQuantity(flag: string): (value: unknown) => string {
  return (value) => parsedOnce(flag, SIZE_EXAMPLE, value, sizeAsQuantity);
}

/** `HOST:PORT` to listen on (`[::1]:0`, `0.0.0.0:5055`); port 0 lets the system pick. */
export function listenAddress(flag: string): (value: unknown) => { host: string; port: number } | undefined {
  return (value) => {
    if (value === undefined) return undefined;
    const text = String(value);
    const match = /^(?:\[([0-9a-fA-F:]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(text);
    const port = Number(match?.[3]);
    if (!match || port > 65535) throw new BadInputError(`--${flag} ${text}: expected HOST:PORT, e.g. 127.0.0.1:5055, 0.0.0.0:0 or [::1]:5055`);
    return { host: match[1] ?? match[2]!, port };
  };
}
