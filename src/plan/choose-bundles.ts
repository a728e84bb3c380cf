/**
 * The operators' half of a plan: read each selected catalog (catalog/image.ts), select from it as
 * oc-mirror would (catalog/select.ts), then add what OLM would install for the bundles'
 * dependencies (catalog/resolve.ts), which oc-mirror leaves out; from a live cluster, the bundles
 * OLM will walk its operators through (live-operators.ts). Catalogs are read at once, and while
 * the release is read.
 */
import { BadInputError } from '../errors.js';
import { ManifestNotFoundError, type RegistryClient } from '../registry/client.js';
import { parseReference } from '../registry/reference.js';
import type { Catalog } from '../catalog/declcfg.js';
import type { CatalogSelection } from '../catalog/selection.js';
import type { LiveCluster } from './live.js';
import type { LiveOperators } from './live-olm.js';
import type { StagedOperators } from './live-operators.js';
import type { ChosenBundle, ChosenOperators } from './operators.js';
import type { PlannedOperators } from './types.js';


/** Read every catalog named; each read fails alone with its own one-line error. */
export async function readCatalogs(client: RegistryClient, selections: readonly CatalogSelection[], arch: string, warnings: string[]): Promise<Catalog[]> {
  const seen = new Set<string>();
  for (const s of selections) {
    if (seen.has(s.catalog)) throw new BadInputError(`catalog ${s.catalog} is named twice; list its packages under one mirror.operators entry`);
    seen.add(s.catalog);
  }
  const { readCatalog } = await import('../catalog/image.js');
  return Promise.all(selections.map((s) => readCatalog(client, s.catalog, arch, warnings)));
}

/**
 * Bundles whose catalog entry carries no CSV get their deployments from the CSV in their bundle
 * image (a few KiB each, read at once): where the operator runs is evidence the plan places by.
 */
export async function withBundleDeployments(client: RegistryClient, chosen: readonly ChosenBundle[], arch: string, warnings: string[]): Promise<ChosenBundle[]> {
  const { readBundleDeployments } = await import('../catalog/bundle-image.js');
  return Promise.all(chosen.map(async (c) => {
    if (c.bundle.deployments !== undefined || c.bundle.image === '') return c;
    const deployments = await readBundleDeployments(client, c.bundle.image, arch, warnings);
    return deployments ? { ...c, bundle: { ...c.bundle, deployments }, csvFrom: 'bundle image' as const } : c;
  }));
}

/** Selection, then dependencies: the bundles the plan stages, each with why. */
export async function chooseBundles(catalogs: readonly Catalog[], selections: readonly CatalogSelection[], warnings: string[]): Promise<ChosenOperators> {
  const [{ selectFromCatalog }, { resolveDependencies }] = await Promise.all([import('../catalog/select.js'), import('../catalog/resolve.js')]);
  const chosen: ChosenBundle[] = [];
  const selected = catalogs.map((catalog, i) => ({ catalog, picked: selectFromCatalog(catalog.config, selections[i]!, warnings) }));
  for (const { catalog, picked } of selected) {
    for (const bundle of picked.config.bundles) chosen.push({ catalog: catalog.reference, bundle, why: picked.why.get(bundle.name) ?? 'selected' });
  }
  // Catalogs listed first are preferred, as a CatalogSource of higher priority is.
  const resolution = resolveDependencies(
    chosen.map((c) => ({ catalog: c.catalog, bundle: c.bundle })),
    catalogs.map((c, i) => ({ name: c.reference, config: c.config, priority: catalogs.length - i })),
    warnings,
  );
  for (const added of resolution.added) chosen.push({ catalog: added.catalog, bundle: added.bundle, why: `dependency of ${added.requiredBy}: ${added.requirement}` });
  const packagesOf = new Map<string, string[]>();
  for (const c of chosen) {
    const list = packagesOf.get(c.catalog) ?? [];
    if (!list.includes(c.bundle.package)) list.push(c.bundle.package);
    packagesOf.set(c.catalog, list);
  }
  for (const list of packagesOf.values()) list.sort();
  return { catalogs, packagesOf, chosen };
}

/** A catalog names images as it likes: one that is no image reference fails naming the bundle. */
export function parseOperatorReference(text: string, bundles: readonly string[]) {
  try {
    return parseReference(text);
  } catch (error) {
    if (error instanceof BadInputError) throw new BadInputError(`${bundles[0] ? `bundle ${bundles[0]}` : 'a catalog'} names the image ${JSON.stringify(text)}, which is not an image reference: ${error.message}`);
    throw error;
  }
}

export function operatorSummary(operators: ChosenOperators): PlannedOperators {
  return {
    catalogs: operators.catalogs.map((c) => ({ reference: c.reference, pullSpec: c.pullSpec, digest: c.digest, packages: operators.packagesOf.get(c.reference) ?? [] })),
    bundles: operators.chosen.map(({ catalog, bundle, why }) => ({
      catalog,
      package: bundle.package,
      name: bundle.name,
      version: bundle.version,
      image: bundle.image,
      why,
      ...(bundle.maxOpenShiftVersion !== undefined ? { maxOpenShiftVersion: bundle.maxOpenShiftVersion } : {}),
    })).sort((a, b) => a.package.localeCompare(b.package) || a.name.localeCompare(b.name)),
  };
}

/**
 * The operators the plan stages: those asked for and, from a live cluster, every bundle OLM will
 * walk its operators through (live-operators.ts), their CSVs read from bundle images where the
 * catalogs lack them.
 */
export async function withLiveBundles(
  client: RegistryClient,
  operators: ChosenOperators | undefined,
  live: { cluster: LiveCluster; read: { catalogs: Map<string, Catalog>; warnings: string[] }; currentRelease: string; targetRelease: string } | undefined,
  arch: string,
  warnings: string[],
): Promise<StagedOperators | undefined> {
  if (!live) return operators && { ...operators, offNodes: new Set(), blocked: [] };
  const { planLiveOperators, withLiveOperators } = await import('./live-operators.js');
  const { cluster, read, currentRelease, targetRelease } = live;
  const planned = planLiveOperators({ operators: cluster.operators!, catalogs: read.catalogs, nodes: cluster.nodes, pods: cluster.pods, currentRelease, targetRelease });
  warnings.push(...read.warnings, ...planned.warnings);
  return withLiveOperators(operators, { ...planned, chosen: await withBundleDeployments(client, planned.chosen, arch, warnings) });
}

/** The catalog images a live cluster's operators come from, at once; one gone or refused as content is a warning. */
export async function readLiveCatalogs(client: RegistryClient, operators: LiveOperators, arch: string): Promise<{ catalogs: Map<string, Catalog>; warnings: string[] }> {
  const [{ readCatalog }, { liveCatalogImages }] = await Promise.all([import('../catalog/image.js'), import('./live-operators.js')]);
  const warnings: string[] = [];
  const read = await Promise.all(liveCatalogImages(operators).map(async (reference) => {
    try {
      return [[reference, await readCatalog(client, reference, arch, warnings)] as const];
    } catch (error) {
      if (!(error instanceof ManifestNotFoundError || error instanceof BadInputError)) throw error;
      warnings.push(`catalog ${reference}, which the cluster's operators come from, cannot be read (${error.message}): their upgrades are not staged`);
      return [];
    }
  }));
  return { catalogs: new Map(read.flat()), warnings };
}
