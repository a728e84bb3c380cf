/**
 * The operators' half of a plan: read each selected catalog (catalog/image.ts), select from it as
 * oc-mirror would (catalog/select.ts), then add what OLM would install for the bundles'
 * dependencies (catalog/resolve.ts), which oc-mirror leaves out. Catalogs are read at once, and
 * while the release is read.
 */
import { BadInputError } from '../errors.js';
import type { RegistryClient } from '../registry/client.js';
import type { Catalog } from '../catalog/declcfg.js';
import type { CatalogSelection } from '../catalog/selection.js';
import type { ChosenBundle } from './operators.js';

export interface ChosenOperators {
  readonly catalogs: readonly Catalog[];
  /** Per catalog, the packages it serves in the plan. */
  readonly packagesOf: ReadonlyMap<string, readonly string[]>;
  readonly chosen: readonly ChosenBundle[];
}

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
