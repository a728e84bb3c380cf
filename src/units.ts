/**
 * Bytes, durations and rates as every command prints and reads them: one formatter and one
 * parser each, so `--timeout 1h30m`, `--max-archive-size 4G` and `--link-rate 20MiB/s` are
 * read alike wherever they appear, and sizes print the same in every table and line.
 */
import { BadInputError } from './errors.js';

/** Binary units, one decimal: 512 B, 1.5 KiB, 19.2 MiB. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
}

/** A duration in seconds as 45s, 4m37s, 1h02m. */
export function formatSeconds(seconds: number): string {
  const s = Math.round(seconds);
  return s >= 3600 ? `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m` : s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

/** `90s`, `5m`, `1h30m`, `250ms`, or a bare number of seconds, in milliseconds. */
export function parseDuration(text: string): number {
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  const rest = text.replace(/(\d+(?:\.\d+)?)(ms|s|m|h)/g, (_, n: string, unit: string) => {
    total += Number(n) * units[unit]!;
    return '';
  });
  if (rest || !text) throw new BadInputError(`bad duration ${JSON.stringify(text)}: use e.g. 90s, 5m, 1h30m`);
  return total;
}

/** A size with an optional K, M, G or T suffix (binary; `iB`/`B` may follow), at least 1 MiB: `4G`, `512MiB`. */
export function parseSize(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text);
  const bytes = m ? Math.floor(Number(m[1]) * 1024 ** 'bkmgt'.indexOf((m[2] || 'b').toLowerCase())) : NaN;
  if (!Number.isSafeInteger(bytes) || bytes < 1024 * 1024) {
    throw new BadInputError(`invalid size "${text}": expected a number with an optional K, M, G or T suffix, at least 1M (e.g. 4G)`);
  }
  return bytes;
}

const RATE_UNITS: Record<string, number> = {
  b: 1, kb: 1e3, mb: 1e6, gb: 1e9, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30,
  bit: 1 / 8, kbit: 1e3 / 8, mbit: 1e6 / 8, gbit: 1e9 / 8,
};

/** A link rate in bytes per second: `20MiB/s`, `100Mbit/s`, `5MB` (the `/s` may be left out), or bare bytes per second; undefined when it is none of these. */
export function parseRate(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*?)(?:\/s|ps)?$/i.exec(text.trim());
  const unit = m ? (m[2] === '' ? 'b' : m[2]!.toLowerCase()) : undefined;
  if (!m || unit === undefined || !(unit in RATE_UNITS)) return undefined;
  return Number(m[1]) * RATE_UNITS[unit]!;
}
