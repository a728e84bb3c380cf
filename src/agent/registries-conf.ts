/**
 * The node's containers-registries.conf(5), as CRI-O reads it: `/etc/containers/registries.conf`
 * then every `*.conf` in `registries.conf.d` in name order, a later `[[registry]]` with the same
 * prefix replacing an earlier one. The agent needs it to fetch manifests from where CRI-O will
 * pull: the mirrors first, in order, then the source. Only what matters for digest pulls is
 * kept (prefix, location, insecure, blocked, mirrors and their pull-from-mirror).
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'smol-toml';
import { BadInputError } from '../errors.js';
import { formatReference, parseReference, type ImageReference } from '../registry/reference.js';

/**
 * The drop-in the agent writes for `--cache-mirror` (src/agent/cache-mirror.ts). It sorts last, so
 * CRI-O pulls through the cache; `loadRegistriesConf` leaves it out by default, so what the agent
 * reads itself (exact layer sizes: 4-byte Range reads, which a pull-through cache answers by
 * fetching the whole blob upstream) goes where the node would go without the cache.
 */
export const CACHE_DROP_IN_NAME = '99-prestage-cache.conf';

export interface RegistryMirror {
  readonly location: string;
  readonly insecure: boolean;
  /** `all` (default), `digest-only` or `tag-only`: which pulls may use this mirror. */
  readonly pullFromMirror: 'all' | 'digest-only' | 'tag-only';
}

export interface RegistryEntry {
  /** What references it applies to: `host[/path]`, or `*.domain` for subdomains. */
  readonly prefix: string;
  /** Where the source lives; empty for a wildcard prefix (no rewrite). */
  readonly location: string;
  readonly insecure: boolean;
  readonly blocked: boolean;
  readonly mirrors: readonly RegistryMirror[];
}

export interface RegistriesConf {
  readonly registries: readonly RegistryEntry[];
  /** The files read, in order: for messages. */
  readonly files: readonly string[];
}

/** Where to fetch one image from: a rewritten reference, and whether TLS may be skipped. */
export interface PullSource {
  readonly ref: ImageReference;
  readonly insecure: boolean;
  readonly mirror: boolean;
}

/** The entries of one file. Throws a one-line BadInputError naming the file. */
export function parseRegistriesConf(text: string, source: string): RegistryEntry[] {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (error) {
    const line = (error as { line?: number }).line;
    throw new BadInputError(`${source}${line ? ` line ${line}` : ''}: ${firstLine((error as Error).message)}`);
  }
  const fail = (why: string): never => {
    throw new BadInputError(`${source}: ${why}`);
  };
  const v2 = doc.registry;
  const v1 = doc.registries;
  if (v2 !== undefined && !Array.isArray(v2)) fail('"registry" must be an array of tables ([[registry]])');
  const entries: RegistryEntry[] = [];
  for (const [index, raw] of ((v2 as unknown[] | undefined) ?? []).entries()) {
    const table = asTable(raw) ?? fail(`[[registry]] #${index + 1} is not a table`);
    const location = cleanLocation(stringField(table, 'location', source) ?? '', source);
    const prefix = cleanLocation(stringField(table, 'prefix', source) ?? '', source) || location;
    if (!prefix) fail(`[[registry]] #${index + 1} has neither prefix nor location`);
    if (prefix.startsWith('*.') && location) fail(`[[registry]] ${prefix}: a wildcard prefix cannot have a location`);
    const mirrorsRaw = table.mirror ?? [];
    if (!Array.isArray(mirrorsRaw)) fail(`[[registry]] ${prefix}: "mirror" must be an array of tables ([[registry.mirror]])`);
    const mirrorByDigestOnly = booleanField(table, 'mirror-by-digest-only', source) ?? false;
    const mirrors = (mirrorsRaw as unknown[]).map((rawMirror): RegistryMirror => {
      const mirror = asTable(rawMirror) ?? fail(`[[registry]] ${prefix}: a mirror is not a table`);
      const mirrorLocation = cleanLocation(stringField(mirror, 'location', source) ?? '', source);
      if (!mirrorLocation) fail(`[[registry]] ${prefix}: a mirror has no location`);
      const pull = stringField(mirror, 'pull-from-mirror', source) ?? '';
      if (pull && pull !== 'all' && pull !== 'digest-only' && pull !== 'tag-only') fail(`[[registry]] ${prefix}: pull-from-mirror must be all, digest-only or tag-only, not "${pull}"`);
      if (pull && pull !== 'all' && mirrorByDigestOnly) fail(`[[registry]] ${prefix}: pull-from-mirror and mirror-by-digest-only cannot be combined`);
      return {
        location: mirrorLocation,
        insecure: booleanField(mirror, 'insecure', source) ?? false,
        pullFromMirror: mirrorByDigestOnly ? 'digest-only' : ((pull || 'all') as RegistryMirror['pullFromMirror']),
      };
    });
    entries.push({ prefix, location, insecure: booleanField(table, 'insecure', source) ?? false, blocked: booleanField(table, 'blocked', source) ?? false, mirrors });
  }
  // Version 1 (`[registries.insecure] registries = [...]`, `[registries.block]`): no mirrors.
  const v1Table = v1 === undefined ? undefined : (asTable(v1) ?? fail('"registries" must be a table'));
  if (v1Table) {
    const list = (key: string): string[] => {
      const value = asTable(v1Table[key])?.registries ?? [];
      if (!Array.isArray(value) || value.some((item) => typeof item !== 'string')) fail(`registries.${key}.registries must be an array of strings`);
      return (value as string[]).map((item) => cleanLocation(item, source));
    };
    const insecure = list('insecure');
    const blocked = list('block');
    if ((insecure.length > 0 || blocked.length > 0) && entries.length > 0) fail('mixes version 1 ([registries.*]) and version 2 ([[registry]]) tables');
    for (const location of new Set([...blocked, ...insecure])) {
      entries.push({ prefix: location, location, insecure: insecure.includes(location), blocked: blocked.includes(location), mirrors: [] });
    }
  }
  return entries;
}

/**
 * The main file then the drop-ins. A missing main file or directory means no entries (CRI-O
 * then pulls from the source as named); an unreadable or invalid file is an error. Drop-ins named
 * in `skip` (default: the agent's cache drop-in) are not read.
 */
export async function loadRegistriesConf(path: string, dropInDir: string, skip: readonly string[] = [CACHE_DROP_IN_NAME]): Promise<RegistriesConf> {
  const files: string[] = [];
  const byPrefix = new Map<string, RegistryEntry>();
  const read = async (file: string): Promise<void> => {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new BadInputError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
    files.push(file);
    for (const entry of parseRegistriesConf(text, file)) {
      // Map order is first insertion: a replaced entry keeps its place, which only matters for messages.
      byPrefix.set(entry.prefix, entry);
    }
  };
  await read(path);
  let names: string[] = [];
  try {
    names = (await readdir(dropInDir, { withFileTypes: true })).filter((entry) => entry.isFile() && entry.name.endsWith('.conf') && !skip.includes(entry.name)).map((entry) => entry.name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new BadInputError(`cannot list ${dropInDir}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  for (const name of names.sort()) await read(join(dropInDir, name));
  return { registries: [...byPrefix.values()], files };
}

/**
 * Where CRI-O would fetch a digest reference from, in order: the mirrors of the entry with the
 * longest matching prefix (except `tag-only` ones), then the source location. Throws when the
 * entry is blocked.
 */
export function pullSources(conf: RegistriesConf, ref: ImageReference): PullSource[] {
  const text = formatReference(ref);
  let best: { entry: RegistryEntry; matched: string } | undefined;
  for (const entry of conf.registries) {
    const matched = matchPrefix(text, ref, entry.prefix);
    if (matched !== undefined && (!best || matched.length > best.matched.length)) best = { entry, matched };
  }
  if (!best) return [{ ref, insecure: false, mirror: false }];
  const { entry, matched } = best;
  if (entry.blocked) throw new BadInputError(`registry ${entry.prefix} is blocked in ${conf.files.join(' or ') || 'registries.conf'}`);
  const rest = text.slice(matched.length);
  const at = (location: string): ImageReference => parseReference(`${location}${rest}`);
  const sources: PullSource[] = entry.mirrors.filter((mirror) => mirror.pullFromMirror !== 'tag-only').map((mirror) => ({ ref: at(mirror.location), insecure: mirror.insecure, mirror: true }));
  sources.push({ ref: entry.location ? at(entry.location) : ref, insecure: entry.insecure, mirror: false });
  return sources;
}

/** The part of `text` a prefix matches (on a path boundary), or undefined. */
function matchPrefix(text: string, ref: ImageReference, prefix: string): string | undefined {
  if (prefix.startsWith('*.')) {
    // `*.example.com` matches hosts under example.com; the match is the host.
    return ref.registry.endsWith(prefix.slice(1)) ? ref.registry : undefined;
  }
  if (text === prefix) return prefix;
  if (!text.startsWith(prefix)) return undefined;
  const next = text[prefix.length];
  return next === '/' || next === '@' || next === ':' ? prefix : undefined;
}

function cleanLocation(value: string, source: string): string {
  const trimmed = value.trim().replace(/\/+$/, '');
  if (/^https?:\/\//.test(trimmed)) throw new BadInputError(`${source}: location "${value}" must not have a URI scheme`);
  return trimmed;
}

function asTable(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

function stringField(table: Record<string, unknown>, key: string, source: string): string | undefined {
  const value = table[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new BadInputError(`${source}: "${key}" must be a string`);
  return value;
}

function booleanField(table: Record<string, unknown>, key: string, source: string): boolean | undefined {
  const value = table[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw new BadInputError(`${source}: "${key}" must be true or false`);
  return value;
}

function firstLine(text: string): string {
  return text.split('\n')[0]?.trim() ?? text;
}
