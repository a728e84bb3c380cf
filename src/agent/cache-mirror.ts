/**
 * `prestage agent --cache-mirror SOURCE=HOST[:PORT][/PREFIX]`: the node pulls SOURCE's images
 * through an in-cluster pull-through cache. The agent writes ONE registries.conf drop-in
 * (`registries.conf.d/99-prestage-cache.conf`) listing the cache as the first mirror of SOURCE,
 * digest pulls only (`pull-from-mirror = "digest-only"`: prestage pins digests), and reloads CRI-O
 * (SIGHUP re-reads registries.conf and its drop-ins in CRI-O 1.34: `Config.ReloadRegistries`).
 * containers/image tries a registry's mirrors in order, then its own location, so a cache that is
 * down or lacks an image costs one failed request per image, not the pull.
 *
 * Merge rules (containers-registries.conf(5), v2): of all files, the LAST `[[registry]]` with a
 * prefix replaces earlier ones whole, and an image takes the entry with the longest matching
 * prefix. So for each cached SOURCE the drop-in rewrites (1) the entry whose prefix is SOURCE
 * and (2) every entry whose prefix lies below SOURCE (an ImageDigestMirrorSet's
 * `quay.io/openshift-release-dev/ocp-v4.0-art-dev`, say), each keeping its location, insecure,
 * blocked and mirrors, with the cache put first (its path extended by the rest of the prefix).
 * Nothing else changes. Without `--cache-mirror` the file is removed and CRI-O reloaded.
 */
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../atomic-file.js';
import { BadInputError, ClusterError } from '../errors.js';
import { CACHE_DROP_IN_NAME, loadRegistriesConf, parseRegistriesConf, type RegistriesConf, type RegistryEntry, type RegistryMirror } from './registries-conf.js';

export { CACHE_DROP_IN_NAME };

export interface CacheMirror {
  /** What the cache stands in for: `quay.io` (a host, or host/path). */
  readonly source: string;
  /** Where the cache serves it: `10.0.0.5:5000`, `cache.example:5000/quay`. Plain HTTP. */
  readonly location: string;
  /**
   * The node's leaf of the cache tree (`10.0.0.7:5000`, a pull-through cache of `location`): asked
   * first, then the root, then what the node had. A leaf that is down costs a refused connection.
   */
  readonly leaf?: string;
}

const HOST_PORT_PATH = /^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:]+\])(?::\d{1,5})?(?:\/[a-z0-9._-]+)*$/i;

/** `quay.io=10.0.0.5:5000`. A one-line BadInputError naming the value and the form. */
export function parseCacheMirror(text: string): CacheMirror {
  const fail = (why: string): never => {
    throw new BadInputError(`--cache-mirror ${text}: ${why}; expected SOURCE=HOST[:PORT][/PREFIX], e.g. quay.io=10.0.0.5:5000`);
  };
  const [rawSource = '', rawLocation = '', ...rest] = String(text).split('=');
  const [source, location] = [rawSource.replace(/\/+$/, ''), rawLocation.replace(/\/+$/, '')];
  if (rest.length > 0 || !source || !location) fail('not SOURCE=HOST[:PORT][/PREFIX]');
  for (const [what, value] of [['source', source], ['cache', location]] as const) {
    if (/^[a-z]+:\/\//i.test(value)) fail(`the ${what} must not have a URI scheme`);
    if (!HOST_PORT_PATH.test(value)) fail(`the ${what} "${value}" is not HOST[:PORT][/PATH]`);
  }
  return { source, location };
}

/** Several flags: one per source. */
export function parseCacheMirrors(values: readonly string[]): CacheMirror[] {
  const mirrors = values.map(parseCacheMirror);
  const seen = new Set<string>();
  for (const mirror of mirrors) {
    if (seen.has(mirror.source)) throw new BadInputError(`--cache-mirror names ${mirror.source} twice; give one cache per source`);
    seen.add(mirror.source);
  }
  return mirrors;
}

/**
 * The entries the drop-in writes, from the node's configuration without it. Each of `bypass`
 * (repositories, `quay.io/org/repo`, the cache served a corrupt blob of) gets what the node did
 * for it before, the cache left out: an entry of its own, or the one the cache would have taken.
 * A repository, not an image: containers/image picks the entry by the repository's name.
 */
export function cacheEntries(mirrors: readonly CacheMirror[], base: RegistriesConf, bypass: readonly string[] = []): RegistryEntry[] {
  const entries: RegistryEntry[] = [];
  for (const { source, location, leaf } of [...mirrors].sort((a, b) => a.source.localeCompare(b.source))) {
    const mirror = (at: string, rest: string): RegistryMirror => ({ location: `${at}${rest}`, insecure: true, pullFromMirror: 'digest-only' });
    // The leaf serves the root's paths: its location is the leaf's host with the root's path.
    const leafLocation = leafOf(location, leaf);
    const caches = (rest: string) => [...(leafLocation !== undefined ? [mirror(leafLocation, rest)] : []), mirror(location, rest)];
    entries.push(withCachesFirst(entryFor(source, base), caches('')));
    // Longer prefixes win over ours for their images: they get the cache too.
    for (const entry of base.registries) {
      if (!entry.prefix.startsWith(`${source}/`)) continue;
      entries.push(withCachesFirst(entry, caches(entry.prefix.slice(source.length))));
    }
  }
  for (const repository of [...new Set(bypass)].sort()) {
    if (!mirrors.some(({ source }) => repository === source || repository.startsWith(`${source}/`))) continue;
    const past = entryFor(repository, base);
    const at = entries.findIndex((entry) => entry.prefix === repository);
    if (at >= 0) entries[at] = past;
    else entries.push(past);
  }
  return entries;
}

/**
 * What the node does for `source` now: its own entry, or the one of the longest prefix above it
 * (`quay.io` for `quay.io/openshift-release-dev`), moved down to `source` (location and mirrors
 * extended by the rest of the path), or the source itself.
 */
function entryFor(source: string, base: RegistriesConf): RegistryEntry {
  let covering: RegistryEntry | undefined;
  for (const entry of base.registries) {
    if (entry.prefix.startsWith('*.')) continue;
    if ((entry.prefix === source || source.startsWith(`${entry.prefix}/`)) && (!covering || entry.prefix.length > covering.prefix.length)) covering = entry;
  }
  if (!covering) return { prefix: source, location: source, insecure: false, blocked: false, mirrors: [] };
  const rest = source.slice(covering.prefix.length);
  return {
    ...covering,
    prefix: source,
    location: covering.location ? `${covering.location}${rest}` : source,
    mirrors: covering.mirrors.map((mirror) => ({ ...mirror, location: `${mirror.location}${rest}` })),
  };
}

function withCachesFirst(entry: RegistryEntry, caches: readonly RegistryMirror[]): RegistryEntry {
  return { ...entry, mirrors: [...caches, ...entry.mirrors.filter((mirror) => !caches.some((cache) => cache.location === mirror.location))] };
}

/** A leaf's location for a root at `root` (`10.0.0.5:5000/quay`): the leaf's host and the root's path. */
export function leafOf(root: string, leaf: string | undefined): string | undefined {
  if (leaf === undefined) return undefined;
  const slash = root.indexOf('/');
  return slash < 0 ? leaf : `${leaf}${root.slice(slash)}`;
}

/** The drop-in's text: equal inputs, equal bytes. */
export function renderCacheDropIn(mirrors: readonly CacheMirror[], base: RegistriesConf, bypass: readonly string[] = []): string {
  const toml = (value: string) => JSON.stringify(value);
  const lines = [
    '# Written by the prestage node agent (--cache-mirror, or --link-relay under a cap): digest pulls go through the in-cluster cache or the agent\'s link relay first,',
    '# then the mirrors and the registry each entry had before (carried over: a [[registry]] here replaces',
    '# an earlier file\'s entry with the same prefix). Removed when the agent runs without --cache-mirror (the relay\'s: when it stops).',
    '# A repository of its own without the cache is being pulled past it: the cache served it a corrupt blob.',
    '',
  ];
  for (const entry of cacheEntries(mirrors, base, bypass)) {
    lines.push('[[registry]]', `prefix = ${toml(entry.prefix)}`, `location = ${toml(entry.location)}`);
    if (entry.insecure) lines.push('insecure = true');
    if (entry.blocked) lines.push('blocked = true');
    lines.push('');
    for (const mirror of entry.mirrors) {
      lines.push('[[registry.mirror]]', `location = ${toml(mirror.location)}`);
      if (mirror.insecure) lines.push('insecure = true');
      if (mirror.pullFromMirror !== 'all') lines.push(`pull-from-mirror = ${toml(mirror.pullFromMirror)}`);
      lines.push('');
    }
  }
  return lines.join('\n');
}

export interface CacheDropInOptions {
  /** The node's registries.conf. */
  readonly registriesConf: string;
  /** Its drop-in directory, where the cache drop-in is written. */
  readonly registriesConfDir: string;
  readonly mirrors: readonly CacheMirror[];
  /** Repositories pulled past the cache for now (it served a corrupt blob of theirs). */
  readonly bypass?: readonly string[];
  /** Re-read CRI-O's configuration (SIGHUP). */
  readonly reload: () => Promise<void>;
}

export type CacheDropInChange = 'written' | 'removed' | 'unchanged';

/**
 * Brings the drop-in to what `mirrors` asks for (none: no file) and reloads CRI-O when it changed.
 * Written to a dot-named temp file beside the directory (same filesystem, not scanned), fsynced,
 * renamed in. A reload that fails puts the previous file back.
 */
export async function syncCacheDropIn(options: CacheDropInOptions): Promise<{ change: CacheDropInChange; path: string }> {
  const { registriesConf, registriesConfDir, mirrors, reload } = options;
  const path = join(registriesConfDir, CACHE_DROP_IN_NAME);
  const previous = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return null;
    throw new ClusterError(`cannot read ${path}: ${error.code ?? error.message}`);
  });
  let wanted: string | null = null;
  if (mirrors.length > 0) {
    const base = await loadRegistriesConf(registriesConf, registriesConfDir);
    await refuseLaterOverrides(registriesConfDir, mirrors);
    wanted = renderCacheDropIn(mirrors, base, options.bypass);
    // What CRI-O would refuse must not reach it: the agent's own parser checks the same rules.
    parseRegistriesConf(wanted, path);
  }
  if (wanted === previous) return { change: 'unchanged', path };
  const install = async (content: string | null) => {
    if (content === null) await rm(path, { force: true });
    else {
      await mkdir(registriesConfDir, { recursive: true });
      // Staged beside it under a dot name ending .tmp: containers/image reads only *.conf, and the
      // DaemonSet mounts this directory alone (a rename across mounts fails).
      await writeFileAtomic(path, content, registriesConfDir);
    }
  };
  await install(wanted);
  try {
    await reload();
  } catch (error) {
    await install(previous);
    await reload().catch(() => undefined);
    throw new ClusterError(`CRI-O reload after writing ${path} failed, previous file restored: ${(error as Error).message.split('\n')[0]}`, { cause: error });
  }
  return { change: wanted === null ? 'removed' : 'written', path };
}

/** A drop-in sorting after ours with a cached prefix would replace our entry: say so rather than be silently ignored. */
async function refuseLaterOverrides(dir: string, mirrors: readonly CacheMirror[]): Promise<void> {
  const names = (await readdir(dir).catch(() => [] as string[])).filter((name) => name.endsWith('.conf') && name > CACHE_DROP_IN_NAME).sort();
  for (const name of names) {
    const file = join(dir, name);
    const entries = parseRegistriesConf(await readFile(file, 'utf8').catch(() => ''), file);
    const clash = entries.find((entry) => mirrors.some((mirror) => entry.prefix === mirror.source || entry.prefix.startsWith(`${mirror.source}/`)));
    if (clash) throw new ClusterError(`${file} sorts after ${CACHE_DROP_IN_NAME} and sets [[registry]] ${clash.prefix}, so CRI-O would not use the cache for it; rename that file to sort before ${CACHE_DROP_IN_NAME}`);
  }
}
