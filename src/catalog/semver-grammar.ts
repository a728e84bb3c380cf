/**
 * The version grammars of OLM's inputs, read as the Go libraries OLM uses read them, over npm's
 * semver for comparing: blang/semver v4 (`ParseTolerant`, `ParseRange`: skipRange and
 * olm.package.required versionRange, where npm's grammar differs: no prerelease exclusion, `!=`,
 * one-character words dropped) and Masterminds/semver v3 (a ClusterExtension's version
 * constraint), translated to npm ranges.
 */
import semver from 'semver';

export type VersionTest = (version: semver.SemVer) => boolean;

/** blang's `Parse`: MAJOR.MINOR.PATCH in full, no `v` (npm's strict parse would take `v1.2.3`). */
export function parseStrict(text: string): semver.SemVer | null {
  return /^\d/.test(text) ? semver.parse(text) : null;
}

function dropLeadingZeros(part: string): string {
  if (part.length < 2) return part;
  const p = part.replace(/^0+/, '');
  return /^\d/.test(p) ? p : `0${p}`;
}

/** blang's `ParseTolerant` (bundle versions, OpenShift releases): trims, drops `v` and leading zeros, pads `4.16` to `4.16.0`. */
export function parseTolerant(text: string): semver.SemVer | null {
  const [major = '', minor, ...rest] = text.trim().replace(/^v/, '').split('.');
  const parts = [major, ...(minor === undefined ? [] : [minor]), ...(rest.length > 0 ? [rest.join('.')] : [])].map(dropLeadingZeros);
  if (parts.length < 3 && /[+-]/.test(parts.at(-1) ?? '')) return null;
  while (parts.length < 3) parts.push('0');
  return parseStrict(parts.join('.'));
}

const BLANG_COMPARATORS = new Map<string, (order: number) => boolean>([
  ['', (c) => c === 0], ['=', (c) => c === 0], ['==', (c) => c === 0], ['!', (c) => c !== 0], ['!=', (c) => c !== 0],
  ['>', (c) => c > 0], ['>=', (c) => c >= 0], ['<', (c) => c < 0], ['<=', (c) => c <= 0],
]);

/** blang's splitAndTrim: split at spaces not after `<`, `>` or `=`; it drops one-character words (sic). */
function blangWords(s: string): string[] {
  const words: string[] = [];
  let last = 0;
  let lastChar = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] === ' ' && !/[<>=]/.test(lastChar)) {
      if (last < i - 1) words.push(s.slice(last, i));
      last = i + 1;
    } else if (s[i] !== ' ') lastChar = s[i] ?? '';
  }
  if (last < s.length - 1) words.push(s.slice(last));
  return words.map((w) => w.replaceAll(' ', ''));
}

function splitComparator(word: string): { op: string; version: string } | undefined {
  const i = word.search(/\d/);
  return i < 0 ? undefined : { op: word.slice(0, i).trim(), version: word.slice(i) };
}

function bump(version: string, index: 0 | 1): string {
  const parts = version.split('.');
  const n = parts[index] ?? '';
  if (!/^[+-]?\d+$/.test(n)) return '';
  parts[index] = String(Number(n) + 1);
  return parts.join('.');
}

/** blang's expandWildcardVersion, quirks kept (`!=1.2.x` becomes `<1.2.0 >=1.3.0`, which nothing satisfies). */
function expandWildcards(group: readonly string[]): string[] | undefined {
  const out: string[] = [];
  for (const word of group) {
    if (!word.includes('x')) {
      out.push(word);
      continue;
    }
    const split = splitComparator(word);
    if (!split) return undefined;
    const segments = split.version.split('.');
    const wildcard = segments.at(-1) === 'x' && segments.length <= 3 ? segments.length : 0;
    let flat = split.version.replace('.x.x', '.x').replace('.x', '.0');
    if (flat.split('.').length === 2) flat += '.0';
    let op = '';
    let increment = false;
    switch (split.op) {
      case '>': op = '>='; increment = true; break;
      case '>=': op = '>='; break;
      case '<': op = '<'; break;
      case '<=': op = '<'; increment = true; break;
      case '': case '=': case '==': out.push(`>=${flat}`); op = '<'; increment = true; break;
      case '!=': case '!': out.push(`<${flat}`); op = '>='; increment = true; break;
    }
    out.push(op + (!increment ? flat : wildcard === 3 ? bump(flat, 1) : wildcard === 2 ? bump(flat, 0) : ''));
  }
  return out;
}

/**
 * blang/semver v4 `ParseRange` (skipRange, olm.package.required versionRange), ported rather than
 * handed to npm's range grammar, which reads the same text differently: npm leaves prereleases out
 * (blang's `<2.2.1` holds 2.2.1-rc.1), has no `!=`, `!` or `==`, takes `~`, `^` and commas, which
 * blang refuses, and reads `1.0.0 - 2.0.0` as a span where blang drops the `-` and holds nothing.
 * Undefined when blang would refuse the text.
 */
export function parseBlangRange(text: string): VersionTest | undefined {
  const words = blangWords(text);
  if (words.length === 0 || words[0] === '||' || words.at(-1) === '||') return undefined;
  const groups: string[][] = [[]];
  for (const w of words) {
    if (w === '||') groups.push([]);
    else groups.at(-1)?.push(w);
  }
  const alternatives: VersionTest[][] = [];
  for (const group of groups) {
    const expanded = group.length === 0 ? undefined : expandWildcards(group);
    if (!expanded) return undefined;
    const tests: VersionTest[] = [];
    for (const word of expanded) {
      const split = splitComparator(word);
      const holds = split && BLANG_COMPARATORS.get(split.op);
      const bound = split && parseStrict(split.version);
      if (!holds || !bound) return undefined;
      tests.push((v) => holds(semver.compare(v, bound)));
    }
    alternatives.push(tests);
  }
  return (v) => alternatives.some((all) => all.every((test) => test(v)));
}

const MM_VERSION = String.raw`v?[0-9xX*]+(?:\.[0-9xX*]+)?(?:\.[0-9xX*]+)?(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?`;
const MM_OP = String.raw`!=|>=|=>|<=|=<|~>|~|\^|>|<|=|`;
const MM_GROUP = new RegExp(String.raw`^\s*(?:${MM_OP})\s*${MM_VERSION}\s*(?:(?:\s+|,\s*)(?:${MM_OP})\s*${MM_VERSION}\s*)*$`);
const MM_CONSTRAINT = new RegExp(String.raw`(${MM_OP})\s*(${MM_VERSION})`, 'g');
const MM_HYPHEN = new RegExp(String.raw`\s*(${MM_VERSION})\s+-\s+(${MM_VERSION})\s*`, 'g');
const MM_TO_NPM: Readonly<Record<string, string>> = { '=>': '>=', '=<': '<=', '~>': '~', '=': '' };

/**
 * A ClusterExtension's spec.source.catalog.version (Masterminds: `>=1.0.0, <2.0.0`, `1.2.x`,
 * `~1.2`, `!=1.3.0`, `||`) as npm ranges: commas and Masterminds' operator spellings translated,
 * `!=` kept aside, and prereleases in an AND group only when one of its bounds has one (as Masterminds).
 */
export function mastermindsRange(text: string): VersionTest | undefined {
  const alternatives: VersionTest[] = [];
  for (const group of text.replace(MM_HYPHEN, '>= $1, <= $2 ').split('||')) {
    if (!MM_GROUP.test(group)) return undefined;
    const constraints = [...group.matchAll(MM_CONSTRAINT)].map(([, op = '', version = '']) => ({ op, version }));
    const options = { includePrerelease: constraints.some((c) => (c.version.split('+')[0] ?? '').includes('-')) };
    try {
      const within = new semver.Range(constraints.filter((c) => c.op !== '!=').map((c) => (MM_TO_NPM[c.op] ?? c.op) + c.version).join(' ') || '*', options);
      const excluded = constraints.filter((c) => c.op === '!=').map((c) => new semver.Range(c.version, options));
      alternatives.push((v) => within.test(v) && !excluded.some((r) => r.test(v)));
    } catch {
      return undefined;
    }
  }
  return (v) => alternatives.some((test) => test(v));
}
