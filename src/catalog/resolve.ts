/**
 * Dependency resolution: the bundles OLM v0 installs beside the selected ones to satisfy their
 * olm.package.required and olm.gvk.required properties, so staging pulls their images too (oc-mirror
 * leaves them out).
 *
 * Mirrors operator-lifecycle-manager@992bb097 pkg/controller/registry/resolver: resolver.go
 * (getBundleVariables, sortBundles, sortChannel, addInvariants, newPackageRequiredPredicate) and
 * cache/cache.go (FindPreferred, sortableSnapshots). OLM hands each requirement's candidates, in
 * preference order, to a SAT solver that takes the first that fits; this takes them greedily in the
 * same order, without the solver's backtracking.
 */
import { BadInputError } from '../errors.js';
import { replacesChain } from './channel-graph.js';
import { bundlesByPackage } from './declcfg.js';
import type { CatalogBundle, CatalogChannel, ChannelEntry, DeclarativeConfig, GroupVersionKind } from './declcfg.js';
import { parseBlangRange, parseTolerant } from './semver-grammar.js';

export interface CatalogIndex {
  readonly name: string;
  readonly config: DeclarativeConfig;
  /** As a CatalogSource's spec.priority: the higher is preferred. */
  readonly priority: number;
}

export interface SelectedBundleRef {
  readonly catalog: string;
  readonly bundle: CatalogBundle;
}

export interface AddedBundle {
  readonly catalog: string;
  readonly bundle: CatalogBundle;
  /** The bundle whose requirement it satisfies. */
  readonly requiredBy: string;
  /** `package etcd >=0.9.0` or `API etcd.database.coreos.com/v1beta2 EtcdCluster`. */
  readonly requirement: string;
}

export interface Resolution {
  readonly added: AddedBundle[];
}

/** More than this many added bundles is a hostile or broken catalog, not a real operator's dependencies. */
export const MAX_ADDED_BUNDLES = 10_000;

interface Requirement {
  readonly text: string;
  /** A package requirement names its package; an API requirement, its GVK key. */
  readonly packageName?: string;
  readonly api?: string;
  readonly satisfiedBy: (bundle: CatalogBundle) => boolean;
}

interface CatalogView {
  readonly name: string;
  readonly priority: number;
  readonly bundles: Map<string, Map<string, CatalogBundle>>;
  readonly channels: Map<string, CatalogChannel[]>;
  readonly defaultChannel: Map<string, string | undefined>;
  /** The packages providing each API. */
  readonly providers: Map<string, Set<string>>;
  /** Each channel's entries in OLM's order, built when first asked. */
  readonly orders: Map<CatalogChannel, ChannelEntry[]>;
}

function apiKey(gvk: GroupVersionKind): string {
  return `${gvk.group}/${gvk.version} ${gvk.kind}`;
}

function viewOf(catalog: CatalogIndex): CatalogView {
  const channels = new Map<string, CatalogChannel[]>();
  for (const ch of catalog.config.channels) channels.set(ch.package, [...(channels.get(ch.package) ?? []), ch]);
  const providers = new Map<string, Set<string>>();
  for (const b of catalog.config.bundles) {
    for (const gvk of b.provides) providers.set(apiKey(gvk), (providers.get(apiKey(gvk)) ?? new Set()).add(b.package));
  }
  const defaultChannel = new Map(catalog.config.packages.map((p) => [p.name, p.defaultChannel]));
  return { name: catalog.name, priority: catalog.priority, bundles: bundlesByPackage(catalog.config), channels, defaultChannel, providers, orders: new Map() };
}

/** OLM's sortChannel: the replaces chain from the head, without the entries another entry skips (they are never candidates). */
function channelOrder(view: CatalogView, channel: CatalogChannel): ChannelEntry[] {
  let order = view.orders.get(channel);
  if (!order) {
    const skipped = new Set(channel.entries.flatMap((e) => e.skips));
    order = replacesChain(channel, view.name).filter((e) => !skipped.has(e.name));
    view.orders.set(channel, order);
  }
  return order;
}

function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * A requirement's candidates, best first: the requiring bundle's catalog, then the others by
 * priority and name (FindPreferred; OLM's next key, the namespace, is not known here); in a
 * catalog the packages' default channels first, then by package and channel name (sortBundles);
 * in a channel from the head down. Only channels holding a match are ordered, as in OLM.
 */
function* candidates(requirement: Requirement, from: CatalogView, ranked: readonly CatalogView[]): Generator<{ view: CatalogView; bundle: CatalogBundle }> {
  for (const view of [from, ...ranked.filter((v) => v !== from)]) {
    const packages = requirement.packageName !== undefined ? [requirement.packageName] : [...(view.providers.get(requirement.api ?? '') ?? [])];
    const matches = (ch: CatalogChannel, name: string) => {
      const bundle = view.bundles.get(ch.package)?.get(name);
      return bundle && requirement.satisfiedBy(bundle) ? bundle : undefined;
    };
    const channels = packages.flatMap((p) => view.channels.get(p) ?? []).filter((ch) => ch.entries.some((e) => matches(ch, e.name)));
    const isDefault = (ch: CatalogChannel) => view.defaultChannel.get(ch.package) === ch.name;
    channels.sort((a, b) => Number(isDefault(b)) - Number(isDefault(a)) || byName(a.package, b.package) || byName(a.name, b.name));
    for (const ch of channels) {
      for (const e of channelOrder(view, ch)) {
        const bundle = matches(ch, e.name);
        if (bundle) yield { view, bundle };
      }
    }
  }
}

function requirementsOf(bundle: CatalogBundle, catalog: string): Requirement[] {
  const out: Requirement[] = [];
  for (const { packageName, versionRange } of bundle.requiresPackages) {
    const inRange = parseBlangRange(versionRange);
    if (!inRange) {
      throw new BadInputError(`catalog ${catalog}: bundle ${bundle.name} (package ${bundle.package}) requires package ${packageName} with versionRange "${versionRange}", which blang/semver (OLM's parser) cannot read, so OLM fails to resolve it: fix the catalog`);
    }
    const satisfiedBy = (b: CatalogBundle) => {
      const version = b.package === packageName ? parseTolerant(b.version) : null;
      return version !== null && inRange(version);
    };
    out.push({ text: `package ${packageName} ${versionRange}`, packageName, satisfiedBy });
  }
  for (const gvk of bundle.requiresApis) {
    const key = apiKey(gvk);
    out.push({ text: `API ${key}`, api: key, satisfiedBy: (b) => b.provides.some((p) => apiKey(p) === key) });
  }
  return out;
}

/**
 * The bundles to add so every selected bundle's requirements hold, transitively. A requirement a
 * chosen bundle (selected or added) already meets adds nothing. As OLM's invariants have it, no
 * two chosen bundles share a package or a provided API, so a candidate that would is passed over.
 */
export function resolveDependencies(selected: readonly SelectedBundleRef[], catalogs: readonly CatalogIndex[], warnings: string[]): Resolution {
  const views = new Map<string, CatalogView>();
  for (const c of catalogs) {
    if (views.has(c.name)) throw new BadInputError(`catalog ${c.name} is given twice to dependency resolution: list each catalog once`);
    views.set(c.name, viewOf(c));
  }
  const ranked = [...views.values()].sort((a, b) => b.priority - a.priority || byName(a.name, b.name));
  const ofPackage = new Map<string, CatalogBundle[]>();
  const apiOwner = new Map<string, string>();
  const queue: Array<{ view: CatalogView; bundle: CatalogBundle }> = [];
  const choose = (view: CatalogView, bundle: CatalogBundle) => {
    ofPackage.set(bundle.package, [...(ofPackage.get(bundle.package) ?? []), bundle]);
    for (const gvk of bundle.provides) if (!apiOwner.has(apiKey(gvk))) apiOwner.set(apiKey(gvk), bundle.name);
    queue.push({ view, bundle });
  };
  const conflict = (bundle: CatalogBundle): string | undefined => {
    const owner = ofPackage.get(bundle.package)?.[0];
    if (owner) return `${bundle.name} would be a second bundle of package ${bundle.package} beside ${owner.name}`;
    const api = bundle.provides.map(apiKey).find((key) => apiOwner.has(key));
    return api === undefined ? undefined : `${bundle.name} would provide API ${api} beside ${apiOwner.get(api)}`;
  };
  for (const ref of selected) {
    const view = views.get(ref.catalog);
    if (!view) throw new BadInputError(`bundle ${ref.bundle.name} is selected from catalog ${ref.catalog}, which is not among the catalogs given to dependency resolution (${[...views.keys()].join(', ')})`);
    choose(view, ref.bundle);
  }
  const added: AddedBundle[] = [];
  // Each added bundle is of a package not chosen before, so a dependency cycle ends; the cap bounds the rest.
  for (let i = 0; i < queue.length; i++) {
    const { view, bundle } = queue[i] as { view: CatalogView; bundle: CatalogBundle };
    if (bundle.constraints.length > 0) {
      warnings.push(`catalog ${view.name}: bundle ${bundle.name} declares ${bundle.constraints.join(', ')}, which prestage does not resolve: bundles that OLM installs for them are not staged`);
    }
    for (const requirement of requirementsOf(bundle, view.name)) {
      const met = requirement.packageName !== undefined ? ofPackage.get(requirement.packageName)?.some(requirement.satisfiedBy) : apiOwner.has(requirement.api ?? '');
      if (met) continue;
      let pick: { view: CatalogView; bundle: CatalogBundle } | undefined;
      let passedOver: string | undefined;
      for (const candidate of candidates(requirement, view, ranked)) {
        const clash = conflict(candidate.bundle);
        if (!clash) {
          pick = candidate;
          break;
        }
        passedOver ??= clash;
      }
      if (!pick) {
        const why = passedOver ? ` without a conflict (${passedOver})` : '';
        throw new BadInputError(`catalog ${view.name}: bundle ${bundle.name} requires ${requirement.text}, and no bundle of the catalogs (${ranked.map((v) => v.name).join(', ')}) satisfies it${why}: add the catalog that provides it, or leave ${bundle.package} out`);
      }
      if (added.length >= MAX_ADDED_BUNDLES) {
        throw new BadInputError(`dependency resolution would add more than ${MAX_ADDED_BUNDLES} bundles (at ${bundle.name} requiring ${requirement.text}): the catalogs' dependencies run away; select fewer packages or fix the catalog`);
      }
      if (passedOver) warnings.push(`catalog ${view.name}: bundle ${bundle.name} requires ${requirement.text}: chose ${pick.bundle.name} from catalog ${pick.view.name}, passing over a better candidate (${passedOver})`);
      added.push({ catalog: pick.view.name, bundle: pick.bundle, requiredBy: bundle.name, requirement: requirement.text });
      choose(pick.view, pick.bundle);
    }
  }
  return { added };
}
