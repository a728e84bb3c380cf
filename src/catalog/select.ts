/**
 * Applies a selection to a catalog the way oc-mirror v2 filters one (sherine-k/catalog-filter's
 * mirror-config filter, v0.0.5): the head of each channel by default, every bundle with `full`,
 * or a version range walked along each channel's replaces chain. The result is the filtered
 * catalog and, for each kept bundle, why: what `plan` shows and what staging pulls.
 */
import semver, { type SemVer } from 'semver';
import { BadInputError } from '../errors.js';
import { channelHead, replacesChain } from './channel-graph.js';
import { bundlesByPackage } from './declcfg.js';
import type { CatalogBundle, CatalogChannel, CatalogPackage, DeclarativeConfig, Deprecation } from './declcfg.js';
import type { CatalogSelection, ChannelSelection, PackageSelection } from './selection.js';

export interface Selected {
  /** The filtered catalog: packages (defaultChannel possibly replaced), channels with only kept entries, kept bundles. */
  readonly config: DeclarativeConfig;
  /** Why each kept bundle is kept, keyed by bundle name: "head of channel stable", "full: every bundle", ... */
  readonly why: ReadonlyMap<string, string>;
}

/** A minVersion or maxVersion as oc-mirror reads it (Masterminds semver, loose): `4.16` is allowed. */
interface Bound {
  readonly text: string;
  readonly version: SemVer;
  /** How many of major.minor.patch were written: a partial max (`<=4.16`) takes in every 4.16.z. */
  readonly parts: 1 | 2 | 3;
}

interface VersionRange {
  readonly min?: Bound;
  readonly max?: Bound;
  /** As oc-mirror hands it to catalog-filter: `>=1.2.0 <=1.4.0`. */
  readonly text: string;
}

const BOUND = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/;

/** The bound `text` is, or undefined when oc-mirror would refuse it as not semantic versioning. */
export function parseVersionBound(text: string): Bound | undefined {
  const m = BOUND.exec(text);
  if (!m) return undefined;
  const [, major, minor, patch, pre = '', build = ''] = m;
  const version = semver.parse(`${major}.${minor ?? 0}.${patch ?? 0}${pre}${build}`);
  if (!version) return undefined;
  return { text: text.replace(/^v/, ''), version, parts: patch !== undefined ? 3 : minor !== undefined ? 2 : 1 };
}

/**
 * Masterminds' check: a prerelease version matches only when a bound carries a prerelease too, so
 * `minVersion: 4.16.0` leaves out `4.16.0-202410011135`; a partial max covers its whole minor or major.
 */
function inRange(range: VersionRange, v: SemVer): boolean {
  const { min, max } = range;
  if (v.prerelease.length > 0 && !min?.version.prerelease.length && !max?.version.prerelease.length) return false;
  if (min && semver.compare(v, min.version) < 0) return false;
  if (!max) return true;
  if (max.parts === 3) return semver.compare(v, max.version) <= 0;
  return v.major < max.version.major || (v.major === max.version.major && (max.parts === 1 || v.minor <= max.version.minor));
}

/** What a package or channel selection asks: its range, if it names one. */
function rangeOf(sel: PackageSelection | ChannelSelection, where: string): VersionRange | undefined {
  const bound = (field: 'minVersion' | 'maxVersion'): Bound | undefined => {
    const text = sel[field];
    if (text === undefined || text === '') return undefined;
    const b = parseVersionBound(text);
    if (!b) throw new BadInputError(`${where}: ${field} "${text}" is not a semantic version; write it like 1.2.3`);
    return b;
  };
  const min = bound('minVersion');
  const max = bound('maxVersion');
  if (!min && !max) return undefined;
  const text = [min && `>=${min.text}`, max && `<=${max.text}`].filter(Boolean).join(' ');
  return { min, max, text };
}

/** Why each bundle of one channel is kept (a range may keep skipped bundles that are not entries of it). */
type Kept = Map<string, string>;

/** Versions of one package's bundles, read when a range needs them. */
type VersionOf = (bundleName: string) => SemVer | undefined;

/**
 * catalog-filter's `filterByVersionRange`: count, up the replaces chain, the in-range bundles each
 * entry brings in (itself and what it skips, each counted once, lowest first). The new head is the
 * lowest entry that still reaches all of them; the walk stops at the first entry that brings in
 * none. Entries between that are out of range are kept so the range stays one upgrade graph.
 */
function keepRange(channel: CatalogChannel, catalog: string, range: VersionRange, versionOf: VersionOf, warnings: string[]): Kept {
  const entries = replacesChain(channel, catalog);
  const chain: { readonly name: string; readonly skips: readonly string[] }[] = [...entries];
  // The chain stops at a bundle outside the channel; catalog-filter's walk takes that one in too.
  const beyond = entries.at(-1)?.replaces;
  if (beyond) chain.push({ name: beyond, skips: [] });
  const matches = (name: string): boolean => {
    const v = versionOf(name);
    return v !== undefined && inRange(range, v);
  };
  const counts: number[] = [];
  const seen = new Set<string>();
  for (let i = chain.length - 1; i >= 0; i--) {
    let count = counts[i + 1] ?? 0;
    for (const name of [chain[i]!.name, ...chain[i]!.skips]) {
      if (!seen.has(name) && matches(name)) {
        seen.add(name);
        count++;
      }
    }
    counts[i] = count;
  }
  // Counts only fall going down the chain: the head is the last entry with the top count, the tail the first with none.
  const head = counts.lastIndexOf(counts[0] ?? 0);
  const tail = counts.includes(0) ? counts.indexOf(0) : chain.length;
  const kept: Kept = new Map();
  const versionText = (name: string): string => versionOf(name)?.raw ?? name;
  for (let i = head; i < tail; i++) {
    const { name, skips } = chain[i]!;
    const skipped = skips.filter(matches);
    for (const s of skipped) kept.set(s, `in range ${range.text}, skipped by ${name} in channel ${channel.name}`);
    if (matches(name)) {
      const outside = i === entries.length ? `, replaced by ${entries.at(-1)?.name ?? ''} (not an entry)` : '';
      kept.set(name, `in range ${range.text} of channel ${channel.name}${outside}`);
      continue;
    }
    // The highest in-range version it leads up from, and the nearest kept entry above it in range (else the new head).
    const below = [...skipped, ...chain.slice(i + 1, tail).flatMap((e) => [e.name, ...e.skips])].filter(matches);
    const lower = below.map((b) => versionOf(b)!).sort(semver.rcompare)[0]?.raw ?? '';
    const upper = chain.slice(head, i).reverse().find((e) => matches(e.name))?.name ?? (i > head ? chain[head]!.name : undefined);
    const link = upper === undefined ? `skips ${lower}` : `bridges ${lower} to ${versionText(upper)}`;
    kept.set(name, upper === undefined ? `heads the range in channel ${channel.name}: it ${link} (out of range)` : `${link} in channel ${channel.name} (out of range)`);
    warnings.push(`catalog ${catalog}: package ${channel.package} channel ${channel.name}: keeping ${name} (version ${versionText(name)}) outside the range ${range.text}: it ${link}, so the range stays one upgrade graph (as oc-mirror does)`);
  }
  return kept;
}

/** min equal to max: exactly that version (oc-mirror's fix for OCPBUGS-61497), ignoring build metadata. */
function keepExact(channel: CatalogChannel, version: SemVer, versionOf: VersionOf): Kept {
  const kept: Kept = new Map();
  for (const e of channel.entries) {
    const v = versionOf(e.name);
    if (v && semver.eq(v, version)) kept.set(e.name, `exactly version ${version.raw} in channel ${channel.name}`);
  }
  return kept;
}

function keepChannel(channel: CatalogChannel, catalog: string, full: boolean, range: VersionRange | undefined, versionOf: VersionOf, warnings: string[]): Kept {
  if (full) return new Map(channel.entries.map((e) => [e.name, `full: every bundle of channel ${channel.name}`]));
  if (!range) return new Map([[channelHead(channel, catalog).name, `head of channel ${channel.name}`]]);
  const { min, max } = range;
  if (min && max && min.text === max.text) return keepExact(channel, min.version, versionOf);
  return keepRange(channel, catalog, range, versionOf, warnings);
}

/** One package's versions, parsed loosely; a version that is not semver is the catalog's fault. */
function versionsOf(pkg: string, bundles: ReadonlyMap<string, CatalogBundle> | undefined, catalog: string): VersionOf {
  const parsed = new Map<string, SemVer>();
  return (name) => {
    const bundle = bundles?.get(name);
    if (!bundle) return undefined;
    let v = parsed.get(name);
    if (!v) {
      v = semver.parse(bundle.version, { loose: true }) ?? undefined;
      if (!v) throw new BadInputError(`catalog ${catalog}: bundle ${name} of package ${pkg} has version "${bundle.version}", not a semantic version (opm validate refuses it); fix the catalog or select the package without a range`);
      parsed.set(name, v);
    }
    return v;
  };
}

/** The channels a package selection names (every channel of the package when it names none). */
function listedChannels(sel: PackageSelection, channels: readonly CatalogChannel[], where: string): [CatalogChannel, ChannelSelection | undefined][] {
  if (sel.channels.length === 0) return channels.map((c) => [c, undefined]);
  const seen = new Set<string>();
  return sel.channels.map((cs) => {
    if (seen.has(cs.name)) throw new BadInputError(`${where}: channel ${cs.name} is listed twice; list it once`);
    seen.add(cs.name);
    const channel = channels.find((c) => c.name === cs.name);
    if (!channel) throw new BadInputError(`${where}: no channel ${cs.name} (its channels: ${channels.map((c) => c.name).join(', ')}); fix the channel name`);
    return [channel, cs];
  });
}

/** The filtered package: its default channel is the one asked for, or its own, and must be kept. */
function filteredPackage(pkg: CatalogPackage, sel: PackageSelection, kept: readonly string[], emptied: readonly string[], where: string): CatalogPackage {
  const keptList = kept.join(', ');
  if (sel.defaultChannel) {
    if (!kept.includes(sel.defaultChannel)) throw new BadInputError(`${where}: defaultChannel ${sel.defaultChannel} is not among the kept channels (${keptList}); pick one of them`);
    return { ...pkg, defaultChannel: sel.defaultChannel };
  }
  const own = pkg.defaultChannel;
  if (own && !kept.includes(own)) {
    const cause = emptied.includes(own) ? `the range leaves its default channel ${own} empty` : `its default channel ${own} is not selected`;
    throw new BadInputError(`${where}: ${cause}; set defaultChannel to one of the kept channels (${keptList}), as oc-mirror requires`);
  }
  return pkg;
}

/** One package of the filtered catalog: its package object, kept channels and kept bundles. */
interface PackagePick {
  readonly pkg: CatalogPackage;
  readonly channels: CatalogChannel[];
  readonly bundles: CatalogBundle[];
}

function selectPackage(sel: PackageSelection, pkg: CatalogPackage, pkgChannels: readonly CatalogChannel[], byName: ReadonlyMap<string, CatalogBundle> | undefined, selection: CatalogSelection, why: Map<string, string>, warnings: string[]): PackagePick {
  const catalog = selection.catalog;
  const where = `catalog ${catalog}: package ${pkg.name}`;
  const packageRange = rangeOf(sel, where);
  const versionOf = versionsOf(pkg.name, byName, catalog);
  const channels: CatalogChannel[] = [];
  const emptied: string[] = [];
  const names = new Set<string>();
  for (const [channel, cs] of listedChannels(sel, pkgChannels, where)) {
    const channelRange = cs && rangeOf(cs, `${where} channel ${cs.name}`);
    if (channelRange && packageRange) throw new BadInputError(`${where}: a package minVersion/maxVersion and channel ${channel.name}'s are exclusive (oc-mirror refuses them together); put the range on the package or on its channels`);
    const range = channelRange ?? packageRange;
    if (range && selection.full) throw new BadInputError(`${where}: full: true cannot be mixed with minVersion/maxVersion (oc-mirror refuses them together); drop full or the range`);
    const keep = keepChannel(channel, catalog, selection.full, range, versionOf, warnings);
    const entries = channel.entries.filter((e) => keep.has(e.name));
    if (entries.length === 0) {
      emptied.push(channel.name);
      warnings.push(`${where} channel ${channel.name}: ${range ? `no bundle in range ${range.text}` : 'no entries'}; leaving the channel out`);
      continue;
    }
    const missing = entries.find((e) => !byName?.has(e.name));
    if (missing) throw new BadInputError(`${where} channel ${channel.name}: entry ${missing.name} has no olm.bundle in the catalog (opm validate refuses it); fix the catalog`);
    for (const [name, reason] of keep) {
      const prior = why.get(name);
      why.set(name, prior === undefined ? reason : `${prior}; ${reason}`);
      names.add(name);
    }
    channels.push({ ...channel, entries });
  }
  const kept = channels.map((c) => c.name);
  if (kept.length === 0 && emptied.length === 0) throw new BadInputError(`${where} has no channels (opm validate refuses it); fix the catalog`);
  if (kept.length === 0) throw new BadInputError(`${where}: no bundle of channel(s) ${emptied.join(', ')} is in the range; widen minVersion/maxVersion`);
  // catalog-filter checks the default channel only for listed packages; with none listed every channel keeps its head.
  const filtered = selection.packages.length > 0 ? filteredPackage(pkg, sel, kept, emptied, where) : pkg;
  return { pkg: filtered, channels, bundles: [...(byName?.values() ?? [])].filter((b) => names.has(b.name)) };
}

export function selectFromCatalog(config: DeclarativeConfig, selection: CatalogSelection, warnings: string[]): Selected {
  const catalog = selection.catalog;
  if (selection.full && selection.packages.length === 0) {
    // oc-mirror mirrors such a catalog unfiltered.
    return { config, why: new Map(config.bundles.map((b) => [b.name, 'full: every bundle'])) };
  }
  const packagesByName = new Map(config.packages.map((p) => [p.name, p]));
  const channelsByPackage = new Map<string, CatalogChannel[]>();
  for (const c of config.channels) {
    const list = channelsByPackage.get(c.package);
    if (list) list.push(c);
    else channelsByPackage.set(c.package, [c]);
  }
  const bundles = bundlesByPackage(config);
  const wanted: readonly PackageSelection[] = selection.packages.length > 0 ? selection.packages : config.packages.map((p) => ({ name: p.name, channels: [] }));
  const why = new Map<string, string>();
  const picks = new Map<string, PackagePick>();
  for (const sel of wanted) {
    if (picks.has(sel.name)) throw new BadInputError(`catalog ${catalog}: package ${sel.name} is listed twice; list it once, with all its channels`);
    const pkg = packagesByName.get(sel.name);
    if (!pkg) throw new BadInputError(`catalog ${catalog} has no package ${sel.name}; check the name (oc-mirror list operators --catalog ${catalog} lists them)`);
    picks.set(sel.name, selectPackage(sel, pkg, channelsByPackage.get(pkg.name) ?? [], bundles.get(pkg.name), selection, why, warnings));
  }
  const all = [...picks.values()];
  const kept = (d: Deprecation): boolean => {
    const pick = picks.get(d.package);
    if (d.schema === 'olm.package') return pick !== undefined;
    const list: readonly { name: string }[] = (d.schema === 'olm.channel' ? pick?.channels : pick?.bundles) ?? [];
    return list.some((x) => x.name === d.name);
  };
  return {
    config: { packages: all.map((p) => p.pkg), channels: all.flatMap((p) => p.channels), bundles: all.flatMap((p) => p.bundles), deprecations: config.deprecations.filter(kept) },
    why,
  };
}
