/**
 * The upgrade walk: every bundle OLM installs, one after another, to take an installed operator
 * to the newest it will reach, so staging pulls each one's images and not only the head's; and the
 * installed CSVs whose olm.maxOpenShiftVersion makes OLM hold back a cluster's minor upgrade.
 *
 * Mirrors operator-lifecycle-manager@992bb097 (pkg/controller/registry/resolver/resolver.go
 * getSubscriptionVariables and sortChannel, cache/predicates.go, source_registry.go;
 * pkg/controller/operators/openshift/helpers.go), operator-controller@df2c201d
 * (internal/operator-controller/resolve/catalog.go, catalogmetadata/filter/successors.go,
 * catalogmetadata/compare/compare.go); the version grammars are in semver-grammar.ts.
 */
import semver from 'semver';
import { BadInputError } from '../errors.js';
import { replacesChain } from './channel-graph.js';
import type { CatalogBundle, CatalogChannel, ChannelEntry, Deprecation } from './declcfg.js';
import { mastermindsRange, parseBlangRange, parseStrict, parseTolerant, type VersionTest } from './semver-grammar.js';

export interface InstalledBundle {
  readonly name: string;
  /** The CSV's spec.version (v0) or the ClusterExtension's status.install.bundle.version (v1). */
  readonly version: string;
}

/** `selfCertified`: an OLM v1 step with upgradeConstraintPolicy SelfCertified and no catalog edge. */
export type UpgradeVia = 'replaces' | 'skips' | 'skipRange' | 'selfCertified';

export interface UpgradeStep {
  readonly bundle: CatalogBundle;
  /** The bundle it upgrades from. */
  readonly from: string;
  readonly via: UpgradeVia;
}

export interface UpgradeWalk {
  readonly steps: UpgradeStep[];
  /** Why the walk stops short of where the channel leads (OLM will not upgrade further), when it does. */
  readonly stranded?: string;
  /** Catalog content OLM ignores (a skipRange it cannot parse, a bundle version that is not semver). */
  readonly warnings: string[];
}

function edge(entry: ChannelEntry, from: string, version: semver.SemVer | null, skipRange: VersionTest | undefined): UpgradeVia | undefined {
  if (entry.replaces === from) return 'replaces';
  if (entry.skips.includes(from)) return 'skips';
  return skipRange && version && skipRange(version) ? 'skipRange' : undefined;
}

/** OLM v0 takes the first candidate in channel order: the one closest to the head. */
function firstSuccessor(order: readonly ChannelEntry[], from: string, version: semver.SemVer | null, ranges: ReadonlyMap<ChannelEntry, VersionTest>): { e: ChannelEntry; via: UpgradeVia } | undefined {
  for (const e of order) {
    const via = e.name === from ? undefined : edge(e, from, version, ranges.get(e));
    if (via) return { e, via };
  }
  return undefined;
}

function skipRanges(entries: readonly ChannelEntry[], where: string, warnings: string[]): Map<ChannelEntry, VersionTest> {
  const out = new Map<ChannelEntry, VersionTest>();
  for (const e of entries) {
    if (e.skipRange === undefined) continue;
    const test = parseBlangRange(e.skipRange);
    if (test) out.set(e, test);
    else warnings.push(`${where}: bundle ${e.name} has skipRange "${e.skipRange}", which blang/semver cannot parse; OLM ignores it and so does the upgrade walk`);
  }
  return out;
}

function catalogBundle(bundles: ReadonlyMap<string, CatalogBundle>, name: string, where: string): CatalogBundle {
  const bundle = bundles.get(name);
  if (!bundle) throw new BadInputError(`${where} lists bundle ${name}, which the catalog does not have (opm validate refuses it): fix the catalog`);
  return bundle;
}

/**
 * OLM v0 (a Subscription): each resolution replaces the installed CSV with the first entry, along
 * the replaces chain from the head with skipped entries left out, that replaces or skips it or whose
 * skipRange holds its version; then resolves again from there, until the head.
 */
export function upgradeWalkV0(channel: CatalogChannel, bundles: ReadonlyMap<string, CatalogBundle>, installed: InstalledBundle, catalogName: string): UpgradeWalk {
  const where = `catalog ${catalogName}: package ${channel.package} channel ${channel.name}`;
  const skipped = new Set(channel.entries.flatMap((e) => e.skips));
  const order = replacesChain(channel, catalogName).filter((e) => !skipped.has(e.name));
  const head = order[0]?.name;
  const warnings: string[] = [];
  const ranges = skipRanges(order, where, warnings);
  const steps: UpgradeStep[] = [];
  const seen = new Set([installed.name]);
  let from = installed.name;
  let version = parseTolerant(installed.version);
  if (!version) throw new BadInputError(`installed bundle ${installed.name} of package ${channel.package} has version "${installed.version}", which is not semver: give the CSV's spec.version`);
  // Every hop lands on a bundle not yet installed (seen), so the walk is at most the channel's entry count.
  while (from !== head) {
    const hop = firstSuccessor(order, from, version, ranges);
    if (!hop) {
      const place = channel.entries.some((e) => e.name === from) ? `is not the head (${head})` : 'is not in it';
      return { steps, warnings, stranded: `${where}: ${from} (${version?.version ?? 'no semver version'}) ${place}, and no entry of it replaces or skips it or has a skipRange holding its version: OLM v0 does not upgrade it` };
    }
    if (seen.has(hop.e.name)) {
      return { steps, warnings, stranded: `${where}: the upgrade from ${from} leads back to ${hop.e.name}, already installed on the way: OLM v0 would cycle between them` };
    }
    const bundle = catalogBundle(bundles, hop.e.name, where);
    steps.push({ bundle, from, via: hop.via });
    seen.add(bundle.name);
    from = bundle.name;
    version = parseTolerant(bundle.version);
    if (!version) warnings.push(`${where}: bundle ${bundle.name} has version "${bundle.version}", which is not semver; no skipRange can hold it`);
  }
  return { steps, warnings };
}

export type UpgradeConstraintPolicy = 'CatalogProvided' | 'SelfCertified';

/** What a ClusterExtension's spec.source.catalog selects of one catalog's package. */
export interface ExtensionSource {
  readonly packageName: string;
  /** The channels it names, or every channel of the package when it names none. */
  readonly channels: readonly CatalogChannel[];
  readonly bundles: ReadonlyMap<string, CatalogBundle>;
  /** spec.source.catalog.version, a Masterminds constraint. */
  readonly versionRange?: string;
  /** CatalogProvided when unset. */
  readonly upgradeConstraintPolicy?: UpgradeConstraintPolicy;
  /** The catalog's deprecations: OLM v1 prefers a bundle that is not deprecated to a higher one that is. */
  readonly deprecations?: readonly Deprecation[];
}

/** A version and its release: registry+v1 bundles carry a release in build metadata (`1.0.0+2`). */
interface VersionRelease {
  readonly version: semver.SemVer;
  readonly release: string;
}

function versionRelease(text: string): VersionRelease | undefined {
  const version = parseStrict(text);
  if (!version) return undefined;
  const build = version.build.join('.');
  const isRelease = build !== '' && build.length <= 20 && version.build.every((id) => !/^0\d+$/.test(id));
  return { version, release: isRelease ? build : '' };
}

function compareVersionRelease(a: VersionRelease, b: VersionRelease): number {
  const byVersion = semver.compare(a.version, b.version);
  if (byVersion !== 0 || a.release === b.release) return byVersion;
  if (a.release === '' || b.release === '') return a.release === '' ? -1 : 1;
  return semver.compare(`0.0.0-${a.release}`, `0.0.0-${b.release}`);
}

/** operator-controller's NoDependencyValidation: the property type that makes OLM v1 refuse a bundle. */
function refusedProperty(bundle: CatalogBundle): string | undefined {
  if (bundle.requiresPackages.length > 0) return 'olm.package.required';
  if (bundle.requiresApis.length > 0) return 'olm.gvk.required';
  return bundle.constraints[0];
}

/**
 * OLM v1 (a ClusterExtension): each resolution takes, among the bundles of the channels in the
 * version range, the successors of the installed one (an entry that replaces or skips it or whose
 * skipRange holds its version, in any of the channels) and itself, the highest one not deprecated
 * first; SelfCertified drops the successor filter. Repeated until the installed one is the highest.
 */
export function upgradeWalkV1(source: ExtensionSource, installed: InstalledBundle, catalogName: string): UpgradeWalk {
  const where = `catalog ${catalogName}: package ${source.packageName}`;
  const inRange = source.versionRange ? mastermindsRange(source.versionRange) : () => true;
  if (!inRange) throw new BadInputError(`ClusterExtension version "${source.versionRange}" for package ${source.packageName} is not a semver constraint (">=1.0.0, <2.0.0", "1.2.x"): fix spec.source.catalog.version`);
  const warnings: string[] = [];
  const entries = source.channels.flatMap((c) => c.entries);
  const ranges = skipRanges(entries, where, warnings);
  const deprecated = new Set((source.deprecations ?? []).filter((d) => d.schema === 'olm.bundle' && d.package === source.packageName).map((d) => d.name));
  const candidates: Array<{ bundle: CatalogBundle; vr: VersionRelease }> = [];
  for (const name of new Set(entries.map((e) => e.name))) {
    const bundle = catalogBundle(source.bundles, name, where);
    const vr = versionRelease(bundle.version);
    if (!vr) warnings.push(`${where}: bundle ${name} has version "${bundle.version}", which is not semver; OLM v1 never resolves to it`);
    else if (inRange(vr.version)) candidates.push({ bundle, vr });
  }
  candidates.sort((a, b) => Number(deprecated.has(a.bundle.name)) - Number(deprecated.has(b.bundle.name)) || compareVersionRelease(b.vr, a.vr));
  const installedVr = versionRelease(installed.version);
  if (!installedVr) throw new BadInputError(`installed bundle ${installed.name} of package ${source.packageName} has version "${installed.version}", which is not semver: give the ClusterExtension's installed bundle version`);
  const steps: UpgradeStep[] = [];
  const seen = new Set([installed.name]);
  let from = { name: installed.name, vr: installedVr };
  // Every step lands on a bundle not yet installed (seen), so the walk is at most the candidate count.
  for (;;) {
    const { name, vr } = from;
    const edgeTo = (b: CatalogBundle) => entries.filter((e) => e.name === b.name).map((e) => edge(e, name, vr.version, ranges.get(e))).find((via) => via);
    const best = source.upgradeConstraintPolicy === 'SelfCertified' ? candidates[0] : candidates.find((c) => compareVersionRelease(c.vr, vr) === 0 || edgeTo(c.bundle));
    if (!best) return { steps, warnings, stranded: `${where}: no bundle in the channels and version range succeeds ${name} (${vr.version.raw}): OLM v1 reports "no bundles found" and does not upgrade it` };
    if (compareVersionRelease(best.vr, vr) === 0) return { steps, warnings };
    if (seen.has(best.bundle.name)) return { steps, warnings, stranded: `${where}: the upgrade from ${name} leads back to ${best.bundle.name}, already installed on the way: OLM v1 would cycle between them` };
    const refused = refusedProperty(best.bundle);
    if (refused) return { steps, warnings, stranded: `${where}: bundle "${best.bundle.name}" has a dependency declared via property "${refused}" which is currently not supported: OLM v1 refuses it and does not upgrade ${name}` };
    steps.push({ bundle: best.bundle, from: name, via: edgeTo(best.bundle) ?? 'selfCertified' });
    seen.add(best.bundle.name);
    from = { name: best.bundle.name, vr: best.vr };
  }
}

interface Minor {
  readonly major: number;
  readonly minor: number;
}

/** OpenShift 4.23 and 5.0 are one release (OLM's normalizeOCPVersion). */
function normalized({ major, minor }: Minor): Minor {
  return major === 4 && minor === 23 ? { major: 5, minor: 0 } : { major, minor };
}

function compareMinor(a: Minor, b: Minor): number {
  return a.major - b.major || a.minor - b.minor;
}

/** OLM's reading of olm.maxOpenShiftVersion: quotes trimmed, blang ParseTolerant, then X.Y only ("4.16", "4.16.0"; not "4.16.1"). */
function maxOpenShiftVersion(value: string): Minor | { readonly error: string } {
  const text = value.replace(/^"+|"+$/g, '');
  if (text === '') return { error: 'value cannot be "" (an empty string)' };
  const version = parseTolerant(text);
  if (!version) return { error: `failed to parse "${text}" as semver` };
  if (version.patch !== 0 || version.prerelease.length > 0) return { error: `property olm.maxOpenShiftVersion must specify only <major>.<minor> version, got invalid value ${version.version}` };
  return { major: version.major, minor: version.minor };
}

function release(text: string, which: string): semver.SemVer {
  const version = parseTolerant(text);
  if (!version) throw new BadInputError(`the ${which} OpenShift release "${text}" is not a version: give it as 4.18.3`);
  return version;
}

/** Whether the bundle's olm.maxOpenShiftVersion allows it on the target release; an unreadable value does not (OLM blocks on it). */
export function openShiftAllows(bundle: CatalogBundle, targetRelease: string): boolean {
  if (bundle.maxOpenShiftVersion === undefined) return true;
  const max = maxOpenShiftVersion(bundle.maxOpenShiftVersion);
  return !('error' in max) && compareMinor(normalized(max), normalized(release(targetRelease, 'target'))) >= 0;
}

/** An installed, not copied, ClusterServiceVersion. */
export interface InstalledCsv {
  readonly namespace: string;
  readonly name: string;
  /** Its olm.maxOpenShiftVersion property (from the operatorframework.io/properties annotation), when it has one. */
  readonly maxOpenShiftVersion?: string;
}

/** ClusterOperator operator-lifecycle-manager's Upgradeable=False, when it holds back the update. */
export interface UpgradeBlock {
  readonly reason: 'IncompatibleOperatorsInstalled';
  /** In the message's order: invalid values first. */
  readonly csvs: readonly InstalledCsv[];
  readonly message: string;
}

/**
 * The CSVs that make OLM report Upgradeable=False (a max below the current minor + 1, or a value
 * it cannot read), when that holds back the update from current to target: the CVO's
 * ClusterVersionUpgradeable precondition blocks a minor or major update, never a z-stream.
 */
export function upgradeBlockers(installed: readonly InstalledCsv[], currentRelease: string, targetRelease: string): UpgradeBlock | undefined {
  const current = release(currentRelease, 'current');
  const target = release(targetRelease, 'target');
  if (semver.lte(target, current) || (target.major === current.major && target.minor === current.minor)) return undefined;
  const now = normalized(current);
  const nextMinor = { major: now.major, minor: now.minor + 1 };
  const invalid: Array<{ csv: InstalledCsv; line: string }> = [];
  const low: Array<{ csv: InstalledCsv; line: string }> = [];
  // The API lists CSVs in no promised order; namespace/name keeps the message stable.
  const key = (csv: InstalledCsv) => `${csv.namespace}/${csv.name}`;
  const sorted = [...installed].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  for (const csv of sorted) {
    if (csv.maxOpenShiftVersion === undefined) continue;
    const max = maxOpenShiftVersion(csv.maxOpenShiftVersion);
    if ('error' in max) invalid.push({ csv, line: `- ${csv.namespace}/${csv.name} has invalid olm.maxOpenShiftVersion properties: ${max.error}` });
    else if (compareMinor(normalized(max), nextMinor) < 0) low.push({ csv, line: `- maximum supported OCP version for ${csv.namespace}/${csv.name} is ${max.major}.${max.minor}` });
  }
  const blocking = [...invalid, ...low];
  if (blocking.length === 0) return undefined;
  // OLM's text at 992bb097, hard-coded whatever the current release (helpers.go skews.String).
  const message = `ClusterServiceVersions blocking minor version upgrades to 4.23 or major version upgrades to 5.0:\n${blocking.map((b) => b.line).join('\n')}`;
  return { reason: 'IncompatibleOperatorsInstalled', csvs: blocking.map((b) => b.csv), message };
}
