/**
 * Bytes, durations and rates as every command prints and reads them: one formatter and one
 * parser each, so `--timeout 1h30m`, `--reserve 4Gi` and `--link-rate 40Mbit/s` are read alike
 * wherever they appear, and sizes print the same in every table and line.
 *
 * Sizes are Kubernetes quantities (`4Gi`, `4G`, `500Mi`, `1.5Gi`, `1e9`, plain bytes) or the
 * same prefixes with a B (`4GiB`, `100GB`, `512kB`): `G` is 10^9, `Gi` 2^30, as Kubernetes reads
 * them. Rates are bytes per second unless a lowercase `b` or `bit` says bits (`40Mbps`,
 * `40Mbit/s`, `40Mb/s`), as network gear writes them.
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

/** The longest duration any flag takes: a year. Longer is a typo, and timers hold it (see long-timer.ts). */
export const MAX_DURATION_MS = 8760 * 3_600_000;

export const DURATION_EXAMPLE = 'e.g. 90s, 30m, 1h30m, 720h';
export const SIZE_EXAMPLE = 'e.g. 4Gi, 4G, 500Mi, 100GB, 1.5GiB';
export const RATE_EXAMPLE = 'e.g. 20MiB/s, 5MB/s (bytes), 40Mbit/s, 40Mbps (bits)';

/** Why a text is not what a flag wants; the flag layer adds the flag's name. */
export class UnitError extends BadInputError {}

/** `90s`, `5m`, `1h30m`, `250ms`, or a bare number of seconds, in milliseconds; at most a year. */
export function parseDuration(text: string): number {
  const bad = (why: string) => new UnitError(`${JSON.stringify(text)} ${why}; use ${DURATION_EXAMPLE} (bare: seconds)`);
  const trimmed = text.trim();
  let total: number;
  if (/^\d+(\.\d+)?$/.test(trimmed)) {
    total = Number(trimmed) * 1000;
  } else {
    const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
    total = 0;
    const rest = trimmed.replace(/(\d+(?:\.\d+)?)(ms|s|m|h)/g, (_, n: string, unit: string) => {
      total += Number(n) * units[unit]!;
      return '';
    });
    if (rest || !trimmed) throw bad('is not a duration');
  }
  if (total > MAX_DURATION_MS) throw bad('is longer than a year (8760h), the longest a duration may be');
  return total;
}

/** Decimal (k, M, G: 10^3n) and binary (Ki, Mi, Gi: 2^10n) prefixes, as Kubernetes spells them. */
const PREFIXES: Record<string, number> = {
  '': 1, k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};
const NUMBER = String.raw`(\d+(?:\.\d+)?(?:[eE]\d+)?)`;

/**
 * A size in bytes: a Kubernetes quantity (`4Gi`, `4G`, `500Mi`, `1.5Gi`, `1e9`, plain bytes) or
 * its prefix with a B (`4GiB`, `100GB`, `512kB`, `100B`). Fractions of a byte round up, as
 * Kubernetes rounds them.
 */
export function parseSize(text: string): number {
  const m = new RegExp(String.raw`^${NUMBER}\s*([kKMGTPE]i?|)(B?)$`).exec(text.trim());
  const factor = m ? PREFIXES[m[2]!] : undefined;
  // `Ki` is Kubernetes', `K` alone is not: `4K`/`4KB` are read as kilo (1000), `4KiB` as 1024.
  const bytes = m && factor !== undefined ? Math.ceil(Number(m[1]) * factor) : NaN;
  if (!Number.isSafeInteger(bytes)) {
    // `500m`, `16gb`, `4Gb`: a unit in the wrong case, which Kubernetes reads otherwise or not at all.
    const hint = /^\s*[\d.]+\s*[kmgtpe]i?b?\s*$/i.test(text) ? ' (units are case-sensitive: m is milli in Kubernetes; write M, G or Mi, Gi)' : '';
    throw new UnitError(`${JSON.stringify(text)} is not a size${hint}; use ${SIZE_EXAMPLE}, or plain bytes`);
  }
  return bytes;
}

/** A size as a Kubernetes quantity, for a field that takes one (a PVC's storage): `100GB` → `100G`. */
export function sizeAsQuantity(text: string): string {
  parseSize(text);
  const m = new RegExp(String.raw`^${NUMBER}\s*([kKMGTPE]i?|)B?$`).exec(text.trim())!;
  return `${m[1]}${m[2] === 'K' ? 'k' : m[2]}`;
}

/**
 * A link rate in bytes per second. Bytes: `20MiB/s`, `5MB/s`, `5MBps`, `20Mi`, `20Mi/s`, `5M`,
 * bare bytes per second. Bits, written with a lowercase `b` or `bit`: `40Mbps`, `40Mbit/s`,
 * `40Mb/s`, `1Gbps` (a lowercase prefix is allowed there: `40mbps`). Undefined when it is none.
 */
export function parseRate(text: string): number | undefined {
  const t = text.trim();
  const bits = new RegExp(String.raw`^${NUMBER}\s*([kKmMgGtT]i?|)(bit|b)(/s|ps)?$`).exec(t);
  if (bits) {
    const factor = PREFIXES[kubernetesPrefix(bits[2]!)];
    return factor === undefined ? undefined : (Number(bits[1]) * factor) / 8;
  }
  const bytes = new RegExp(String.raw`^${NUMBER}\s*([kKMGTPE]i?|)(B?)(/s|ps)?$`).exec(t);
  // `ps` only after a B (`MBps`): `5Mps` says neither bits nor bytes.
  if (!bytes || (bytes[4] === 'ps' && bytes[3] !== 'B')) return undefined;
  const factor = PREFIXES[bytes[2]!];
  return factor === undefined ? undefined : Number(bytes[1]) * factor;
}

/** `m`/`mi` as `M`/`Mi` (rates in bits are often written `40mbps`); `K` alone as `k`. */
function kubernetesPrefix(p: string): string {
  if (!p) return '';
  const head = p[0]!.toUpperCase();
  return p.length === 1 && head === 'K' ? 'k' : head + p.slice(1);
}

/** Three significant figures at most, no trailing zeros: 5, 21, 168, 1.05. */
function figure(v: number): string {
  return String(Number(v.toPrecision(3)));
}

function decimal(v: number, unit: string): string {
  const prefixes = ['', 'k', 'M', 'G', 'T'];
  let u = 0;
  while (v >= 1000 && u < prefixes.length - 1) {
    v /= 1000;
    u++;
  }
  return `${figure(v)} ${prefixes[u]}${unit}`;
}

/** A rate in both units, as the cap's echo shows it: `5 MB/s (40 Mbit/s)`, `20 MiB/s = 21 MB/s (168 Mbit/s)`. */
export function formatRate(bytesPerSecond: number): string {
  const both = `${decimal(bytesPerSecond, 'B/s')} (${decimal(bytesPerSecond * 8, 'bit/s')})`;
  // A whole number of KiB, MiB, GiB/s reads better as given, beside the decimal figure.
  for (const [unit, size] of [['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]] as const) {
    if (bytesPerSecond >= size && Number.isInteger(bytesPerSecond / size) && bytesPerSecond % 1000 !== 0) return `${bytesPerSecond / size} ${unit}/s = ${both}`;
  }
  return both;
}
