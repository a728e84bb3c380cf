/**
 * The operators of a live cluster through its upgrade (pure): every bundle OLM will pull for each
 * installed operator, why, and where; and the installed operators that hold the update back.
 * - OLM v0, a Subscription: the catalog image of its CatalogSource (spec.image; one without, a
 *   configmap or a grpc address, is said and skipped), its channel (none: the package's default
 *   channel, which OLM's resolver tries first), and the walk from status.installedCSV at the CSV's
 *   spec.version (catalog/upgrade.ts): OLM installs each bundle on it in turn, unpacking its bundle
 *   image and running its deployments, so each one is staged. A Manual Subscription, or any in
 *   its namespace (OLM makes the namespace's one InstallPlan Manual), walks as each InstallPlan is
 *   approved: staged, with a note.
 * - OLM v1, a ClusterExtension: the ClusterCatalog of highest priority among those its selector
 *   admits that serves the package, then upgradeWalkV1 from status.install.bundle. operator-controller
 *   and catalogd pull bundle and catalog images in their own processes (containers/image), so only
 *   the bundles' deployment images and operands go to nodes.
 * - Where: the current CSV's Pods (OLM sets OPERATOR_CONDITION_NAME=<CSV> on every container of the
 *   deployments it creates) say where its deployments run now; the Subscription's spec.config is
 *   applied to the CSV's deployments (nodeSelector replaced, tolerations added), as OLM does.
 * - maxOpenShiftVersion: the not-copied CSVs that make OLM report Upgradeable=False for the target
 *   (upgradeBlockers), each with the first bundle on its walk whose maximum allows the target.
 * Follows operator-lifecycle-manager@992bb097: registry/resolver/resolver.go, catalog/operator.go
 * (approval), install/deployment.go (the env), olm/overrides/ (spec.config), operators/openshift/helpers.go.
 */
import { bundlesByPackage, type Catalog, type CatalogBundle } from '../catalog/declcfg.js';
import { channelHead } from '../catalog/channel-graph.js';
import { parseTolerant } from '../catalog/semver-grammar.js';
import { openShiftAllows, upgradeBlockers, upgradeWalkV0, upgradeWalkV1, type UpgradeStep, type UpgradeWalk } from '../catalog/upgrade.js';
import { resolveDependencies } from '../catalog/resolve.js';
import { BadInputError, ClusterError } from '../errors.js';
import type { LiveCatalogSource, LiveCsv, LiveExtension, LiveOperators, LiveSubscription } from './live-olm.js';
import type { ChosenBundle, ChosenOperators, Placement, PodOverrides } from './operators.js';
import type { PlannedOperatorBlock, SetRole } from './types.js';

/** Catalog images a plan reads for a live cluster's operators, at most. */
export const MAX_LIVE_CATALOGS = 32;

const key = (namespace: string, name: string) => `${namespace}/${name}`;

/** The catalog images the operators' upgrades come from, once each, sorted. */
export function liveCatalogImages(ops: LiveOperators): string[] {
  const sources = new Map(ops.catalogSources.map((s) => [key(s.namespace, s.name), s]));
  const clusterCatalogs = new Map(ops.clusterCatalogs.map((c) => [c.name, c]));
  const images = new Set<string>();
  for (const sub of ops.subscriptions) {
    const image = sources.get(key(sub.sourceNamespace, sub.source))?.image;
    if (image) images.add(image);
  }
  for (const ext of ops.extensions.filter((e) => e.installed)) for (const name of ext.catalogs) if (clusterCatalogs.has(name)) images.add(clusterCatalogs.get(name)!.image);
  if (images.size > MAX_LIVE_CATALOGS) throw new ClusterError(`the cluster's Subscriptions and ClusterExtensions name ${images.size} catalog images, over the ${MAX_LIVE_CATALOGS} a plan reads: plan with --no-cluster and name the catalogs with --catalog`);
  return [...images].sort();
}

export interface LiveOperatorsInput {
  readonly operators: LiveOperators;
  /** The catalogs read, by the image reference the cluster names (one that could not be read is absent). */
  readonly catalogs: ReadonlyMap<string, Catalog>;
  readonly nodes: ReadonlyArray<{ readonly name: string; readonly role: SetRole }>;
  /** Bound Pods; `csv` from their containers' OPERATOR_CONDITION_NAME. */
  readonly pods: ReadonlyArray<{ readonly workload: string; readonly node: string; readonly csv?: string }>;
  readonly currentRelease: string;
  readonly targetRelease: string;
}

export interface LiveOperatorsPlan {
  readonly chosen: ChosenBundle[];
  /** The catalogs of the chosen bundles; `onNodes` false when only ClusterCatalogs name one (catalogd pulls it itself). */
  readonly catalogs: ReadonlyArray<{ readonly catalog: Catalog; readonly onNodes: boolean }>;
  readonly blocked: PlannedOperatorBlock[];
  readonly warnings: string[];
}

interface Walked {
  readonly where: string;
  /** What OLM installs first when nothing is installed yet (spec.startingCSV, else the channel head). */
  readonly first?: CatalogBundle;
  readonly steps: readonly UpgradeStep[];
}

export function planLiveOperators(input: LiveOperatorsInput): LiveOperatorsPlan {
  const { operators: ops, catalogs } = input;
  const warnings = [...ops.warnings];
  const chosen: ChosenBundle[] = [];
  const used = new Map<string, { catalog: Catalog; onNodes: boolean }>();
  const walks = new Map<string, Walked>();
  // The Subscription of each installed CSV (OLM's overrides find it by status.installedCSV).
  const owners = new Map(ops.subscriptions.flatMap((s) => (s.installedCSV ? [[key(s.namespace, s.installedCSV), key(s.namespace, s.name)] as const] : [])));
  const sources = new Map(ops.catalogSources.map((s) => [key(s.namespace, s.name), s]));
  const csvs = new Map(ops.csvs.map((c) => [key(c.namespace, c.name), c]));
  const manual = new Map<string, string>();
  for (const sub of ops.subscriptions) if (sub.approval === 'Manual' && !manual.has(sub.namespace)) manual.set(sub.namespace, sub.name);
  const use = (catalog: Catalog, onNodes: boolean) => used.set(catalog.reference, { catalog, onNodes: onNodes || (used.get(catalog.reference)?.onNodes ?? false) });

  for (const sub of ops.subscriptions) {
    const where = `Subscription ${key(sub.namespace, sub.name)}`;
    const source = sources.get(key(sub.sourceNamespace, sub.source));
    if (!source) {
      warnings.push(`${where} names CatalogSource ${key(sub.sourceNamespace, sub.source)}, which the cluster does not have: OLM resolves nothing for it, so nothing of it is staged`);
      continue;
    }
    if (!source.image) {
      const serves = source.address ? `the grpc address ${source.address}` : `sourceType ${source.sourceType ?? 'unset'}`;
      warnings.push(`${where}: CatalogSource ${key(source.namespace, source.name)} serves ${serves}, no image; prestage reads catalogs from images, so its upgrade is not staged`);
      continue;
    }
    const catalog = catalogs.get(source.image);
    if (!catalog) continue; // could not be read: said when it was read
    try {
      const walked = subscriptionWalk(sub, where, catalog, csvs.get(key(sub.namespace, sub.installedCSV ?? '')), warnings);
      if (walked && sub.installedCSV) walks.set(key(sub.namespace, sub.installedCSV), walked);
      if (!walked || (walked.steps.length === 0 && !walked.first)) continue;
      use(catalog, true);
      const note = manualNote(sub, manual.get(sub.namespace));
      const runsOn = sub.installedCSV ? runningNow(sub.namespace, sub.installedCSV, input) : undefined;
      const overrides: PodOverrides | undefined = sub.config?.nodeSelector || sub.config?.tolerations ? { from: where, ...sub.config } : undefined;
      const placed = { ...(overrides ? { overrides } : {}), ...(runsOn ? { runsOn } : {}) };
      if (walked.first) chosen.push({ catalog: catalog.reference, bundle: walked.first, why: `install for ${where}: nothing installed yet, so OLM installs ${walked.first.name} first${note}`, ...placed });
      for (const i of walked.steps.keys()) chosen.push({ catalog: catalog.reference, bundle: walked.steps[i]!.bundle, why: `${stepWhy(walked, i)}${note}`, ...placed });
    } catch (error) {
      if (!(error instanceof BadInputError)) throw error;
      warnings.push(`${where}: ${error.message}; its upgrade is not staged`);
    }
  }

  const clusterCatalogs = new Map(ops.clusterCatalogs.map((c) => [c.name, c]));
  for (const ext of ops.extensions) {
    const where = `ClusterExtension ${ext.name}`;
    if (!ext.installed) {
      warnings.push(`${where} has no bundle installed yet (status.install): nothing to upgrade, so nothing of it is staged`);
      continue;
    }
    const serving = ext.catalogs.flatMap((name) => {
      const cc = clusterCatalogs.get(name);
      const catalog = cc && catalogs.get(cc.image);
      return cc && catalog && catalog.config.packages.some((p) => p.name === ext.packageName) ? [{ cc, catalog }] : [];
    }).sort((a, b) => b.cc.priority - a.cc.priority || (a.cc.name < b.cc.name ? -1 : 1));
    const best = serving[0];
    if (!best) {
      warnings.push(`${where}: no ClusterCatalog it selects serves package ${ext.packageName} (or none could be read), so its upgrade is not staged`);
      continue;
    }
    if (serving[1]?.cc.priority === best.cc.priority) warnings.push(`${where}: ClusterCatalogs ${best.cc.name} and ${serving[1].cc.name} both serve package ${ext.packageName} at priority ${best.cc.priority}; the walk follows ${best.cc.name}`);
    try {
      const walk = extensionWalk(ext, best.catalog, warnings);
      if (walk.steps.length > 0) use(best.catalog, false);
      const walked = { where, steps: walk.steps };
      for (const i of walk.steps.keys()) chosen.push({ catalog: best.catalog.reference, bundle: walk.steps[i]!.bundle, why: stepWhy(walked, i), bundleImageOffNodes: true });
    } catch (error) {
      if (!(error instanceof BadInputError)) throw error;
      warnings.push(`${where}: ${error.message}; its upgrade is not staged`);
    }
  }

  chosen.push(...dependencies(chosen, installedBundles(ops, sources, catalogs), [...used.values()].map((u) => u.catalog), warnings));
  const blocked = blockers(ops, owners, walks, input.currentRelease, input.targetRelease);
  for (const b of blocked) warnings.push(blockWarning(b, input.targetRelease));
  return { chosen, catalogs: [...used.values()], blocked, warnings };
}

/** The bundles the cluster's Subscriptions run now, as their catalogs name them: they satisfy requirements already. */
function installedBundles(ops: LiveOperatorsInput['operators'], sources: ReadonlyMap<string, LiveCatalogSource>, catalogs: LiveOperatorsInput['catalogs']): Array<{ catalog: string; bundle: CatalogBundle }> {
  return ops.subscriptions.flatMap((sub) => {
    const image = sources.get(key(sub.sourceNamespace, sub.source))?.image;
    const catalog = image ? catalogs.get(image) : undefined;
    const bundle = catalog?.config.bundles.find((b) => b.package === sub.package && b.name === sub.installedCSV);
    return catalog && bundle ? [{ catalog: catalog.reference, bundle }] : [];
  });
}

/**
 * What OLM installs beside each bundle of the walks to satisfy its olm.package.required and
 * olm.gvk.required, as for a first install (found by OLM's own catalog operator:
 * test/olm-resolves.test.ts); what the cluster runs already satisfies. One nothing satisfies is a
 * warning: OLM fails that resolution too.
 */
function dependencies(chosen: readonly ChosenBundle[], installed: ReadonlyArray<{ catalog: string; bundle: CatalogBundle }>, catalogs: readonly Catalog[], warnings: string[]): ChosenBundle[] {
  if (chosen.length === 0) return [];
  try {
    const { added } = resolveDependencies([...chosen.map((c) => ({ catalog: c.catalog, bundle: c.bundle })), ...installed], catalogs.map((c, i) => ({ name: c.reference, config: c.config, priority: catalogs.length - i })), warnings);
    return added.map((a) => ({ catalog: a.catalog, bundle: a.bundle, why: `dependency of ${a.requiredBy}: ${a.requirement}` }));
  } catch (error) {
    if (!(error instanceof BadInputError)) throw error;
    warnings.push(`${error.message}; OLM cannot resolve it either, so it is not staged`);
    return [];
  }
}

/** The bundles OLM installs for a Subscription: from its installed CSV, or its first install then on. */
function subscriptionWalk(sub: LiveSubscription, where: string, catalog: Catalog, csv: LiveCsv | undefined, warnings: string[]): Walked | undefined {
  const pkg = catalog.config.packages.find((p) => p.name === sub.package);
  const channelName = sub.channel || pkg?.defaultChannel;
  const channel = catalog.config.channels.find((c) => c.package === sub.package && c.name === channelName);
  if (!pkg || !channel) {
    warnings.push(`${where}: catalog ${catalog.reference} has no ${pkg ? `channel ${channelName ?? '(no default)'} in package ${sub.package}` : `package ${sub.package}`}; OLM resolves nothing for it, so nothing of it is staged`);
    return undefined;
  }
  const bundles = bundlesByPackage(catalog.config).get(sub.package) ?? new Map<string, CatalogBundle>();
  const walk = (from: { name: string; version: string }): UpgradeWalk => {
    const walked = upgradeWalkV0(channel, bundles, from, catalog.reference);
    warnings.push(...walked.warnings, ...(walked.stranded ? [`${where}: ${walked.stranded}`] : []));
    return walked;
  };
  if (!sub.installedCSV) {
    // OLM installs spec.startingCSV (when the channel has it), else the head; later resolutions walk on.
    const first = bundles.get(sub.startingCSV && channel.entries.some((e) => e.name === sub.startingCSV) ? sub.startingCSV : channelHead(channel, catalog.reference).name);
    if (!first) throw new BadInputError(`catalog ${catalog.reference}: channel ${channel.name} of package ${sub.package} lists a bundle the catalog does not have`);
    return { where, first, steps: walk(first).steps };
  }
  if (csv?.phase !== undefined && csv.phase !== 'Succeeded') warnings.push(`${where}: its installed CSV ${key(sub.namespace, sub.installedCSV)} is in phase ${csv.phase}; OLM upgrades from it all the same`);
  const version = csv?.version ?? bundles.get(sub.installedCSV)?.version;
  if (version === undefined || !parseTolerant(version)) {
    warnings.push(`${where}: installed CSV ${sub.installedCSV} has ${version === undefined ? 'no version (no CSV on the cluster, none in the catalog)' : `version "${version}", which is not semver`}, so its upgrade is not staged`);
    return undefined;
  }
  return { where, steps: walk({ name: sub.installedCSV, version }).steps };
}

function extensionWalk(ext: LiveExtension, catalog: Catalog, warnings: string[]): UpgradeWalk {
  const channels = catalog.config.channels.filter((c) => c.package === ext.packageName && (ext.channels.length === 0 || ext.channels.includes(c.name)));
  for (const name of ext.channels.filter((n) => !channels.some((c) => c.name === n))) warnings.push(`ClusterExtension ${ext.name}: catalog ${catalog.reference} has no channel ${name} in package ${ext.packageName}`);
  const walk = upgradeWalkV1({
    packageName: ext.packageName,
    channels,
    bundles: bundlesByPackage(catalog.config).get(ext.packageName) ?? new Map(),
    ...(ext.version !== undefined ? { versionRange: ext.version } : {}),
    ...(ext.upgradeConstraintPolicy ? { upgradeConstraintPolicy: ext.upgradeConstraintPolicy } : {}),
    deprecations: catalog.config.deprecations,
  }, ext.installed!, catalog.reference);
  warnings.push(...walk.warnings, ...(walk.stranded ? [`ClusterExtension ${ext.name}: ${walk.stranded}`] : []));
  return walk;
}

/** `upgrade step 2 of 3 for Subscription ns/name: replaces X`. */
function stepWhy(walked: Walked, i: number): string {
  const step = walked.steps[i]!;
  const via = step.via === 'replaces' ? `replaces ${step.from}` : step.via === 'skips' ? `skips ${step.from}` : step.via === 'skipRange' ? `its skipRange holds ${step.from}` : `SelfCertified: the highest in range above ${step.from}`;
  return `upgrade step ${i + 1} of ${walked.steps.length} for ${walked.where}: ${via}`;
}

function manualNote(sub: LiveSubscription, manualSub: string | undefined): string {
  if (manualSub === undefined) return '';
  const why = manualSub === sub.name ? 'Manual approval' : `Manual approval: Subscription ${key(sub.namespace, manualSub)} is Manual, which makes every InstallPlan of the namespace Manual`;
  const pending = sub.state === 'UpgradePending' && sub.currentCSV ? `; an InstallPlan to ${sub.currentCSV} waits` : '';
  return ` (${why}: OLM installs each step once its InstallPlan is approved${pending})`;
}

/** Where the installed CSV's Pods run now: the roles of their nodes. */
function runningNow(namespace: string, csv: string, input: LiveOperatorsInput): Placement | undefined {
  const roleOf = new Map(input.nodes.map((n) => [n.name, n.role]));
  const pods = input.pods.filter((p) => p.csv === csv && p.workload.startsWith(`${namespace}/`) && roleOf.has(p.node));
  if (pods.length === 0) return undefined;
  const on = (role: SetRole, label: string) => {
    const nodes = new Set(pods.filter((p) => roleOf.get(p.node) === role).map((p) => p.node)).size;
    return nodes > 0 ? [`${nodes}/${input.nodes.filter((n) => n.role === role).length} ${label}`] : [];
  };
  const [masters, workers] = [on('control-plane', 'control-plane nodes'), on('worker', 'workers')];
  const role = masters.length > 0 && workers.length > 0 ? 'all' : masters.length > 0 ? 'control-plane' : 'worker';
  return { role, why: `its CSV ${csv} runs now as ${pods.length} pod${pods.length === 1 ? '' : 's'} on ${[...masters, ...workers].join(' and ')}` };
}

/** The installed CSVs that make OLM hold back the update, each with the bundle on its walk that lifts the block. */
function blockers(ops: LiveOperators, owners: ReadonlyMap<string, string>, walks: ReadonlyMap<string, Walked>, current: string, target: string): PlannedOperatorBlock[] {
  const readable = ops.csvs.filter((c) => c.propertiesError === undefined);
  const block = upgradeBlockers(readable.map((c) => ({ namespace: c.namespace, name: c.name, ...(c.maxOpenShiftVersion !== undefined ? { maxOpenShiftVersion: c.maxOpenShiftVersion } : {}) })), current, target);
  const lines = block?.message.split('\n').slice(1) ?? [];
  const now = parseTolerant(current)!;
  const next = parseTolerant(target)!;
  const minorOrMajor = next.major > now.major || (next.major === now.major && next.minor > now.minor);
  const unreadable = minorOrMajor ? ops.csvs.filter((c) => c.propertiesError !== undefined).map((c) => ({ csv: c, reason: `${key(c.namespace, c.name)} has invalid olm.maxOpenShiftVersion properties: ${c.propertiesError}` })) : [];
  const listed = (block?.csvs ?? []).map((csv, i) => ({ csv, reason: (lines[i] ?? '').replace(/^- /, '') }));
  return [...unreadable, ...listed].map(({ csv, reason }) => {
    const subscription = owners.get(key(csv.namespace, csv.name));
    const lifts = walks.get(key(csv.namespace, csv.name))?.steps.find((s) => openShiftAllows(s.bundle, target));
    return { csv: key(csv.namespace, csv.name), reason, ...(subscription ? { subscription } : {}), liftedBy: lifts?.bundle.name ?? null };
  });
}

function blockWarning(b: PlannedOperatorBlock, target: string): string {
  const lifted = b.liftedBy !== null
    ? `${b.liftedBy}, on the upgrade walk of Subscription ${b.subscription}, allows ${target}: let OLM upgrade the operator before the cluster`
    : b.subscription ? `no bundle on the upgrade walk of Subscription ${b.subscription} allows ${target}` : 'no Subscription upgrades it';
  return `OLM holds back the update to ${target} (ClusterOperator operator-lifecycle-manager Upgradeable=False, IncompatibleOperatorsInstalled): ${b.reason}; ${lifted}`;
}

/** The operators a plan stages: those asked for (--config, --catalog) and a live cluster's, catalogs once each. */
export interface StagedOperators extends ChosenOperators {
  /** Catalog references no node pulls: named only by ClusterCatalogs. */
  readonly offNodes: ReadonlySet<string>;
  readonly blocked: readonly PlannedOperatorBlock[];
}

export function withLiveOperators(offline: ChosenOperators | undefined, live: LiveOperatorsPlan | undefined): StagedOperators | undefined {
  if (!live || (live.chosen.length === 0 && live.blocked.length === 0)) return offline && { ...offline, offNodes: new Set(), blocked: [] };
  const catalogs = [...(offline?.catalogs ?? [])];
  const offNodes = new Set<string>();
  for (const { catalog, onNodes } of live.catalogs) {
    if (!catalogs.some((c) => c.reference === catalog.reference)) {
      catalogs.push(catalog);
      if (!onNodes) offNodes.add(catalog.reference);
    }
  }
  const chosen = [...(offline?.chosen ?? []), ...live.chosen];
  const packagesOf = new Map<string, string[]>();
  for (const c of chosen) packagesOf.set(c.catalog, [...new Set([...(packagesOf.get(c.catalog) ?? []), c.bundle.package])].sort());
  return { catalogs, packagesOf, chosen, offNodes, blocked: live.blocked };
}
