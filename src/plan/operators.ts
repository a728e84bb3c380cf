/**
 * Where an operator's images run (pure): the evidence a catalog gives for each image a chosen
 * bundle brings to the nodes.
 * - The bundle image: OLM's unpack Job pulls it, and the Job (nodeSelector kubernetes.io/os=linux,
 *   tolerating the control-plane taint) runs on any Linux node: every node.
 * - The catalog image: the CatalogSource's registry pod in openshift-marketplace; a mirrored
 *   CatalogSource names no nodeSelector, so every node.
 * - The CSV's deployments' images: where the deployment's nodeSelector and tolerations let it run
 *   (a control-plane selector: control-plane; a control-plane toleration and no selector: every
 *   node; else workers, since control-plane nodes carry a NoSchedule taint).
 * - Other related images are operands the operator starts for its custom resources, where the
 *   workloads run: the worker set by default (the catalog cannot say more).
 * A bundle whose CSV the catalog does not carry (only `olm.csv.metadata`) is placed by the CSV in
 * its bundle image (catalog/bundle-image.ts), else by the worker default, and says so.
 * From a live cluster (live-operators.ts), where the current CSV's Pods run wins, and a
 * Subscription's spec.config is applied to the deployments first, as OLM applies it.
 */
import type { BundleDeployment, Catalog, CatalogBundle, Toleration } from '../catalog/declcfg.js';
import type { ImageRole } from './types.js';

/** Where an operator's deployments run, and why. */
export interface Placement {
  readonly role: ImageRole;
  readonly why: string;
}

/**
 * A Subscription's spec.config as OLM applies it to every deployment of the CSV
 * (overrides/inject/inject.go): its nodeSelector replaces the deployment's, its tolerations are
 * added to the deployment's.
 */
export interface PodOverrides {
  /** `Subscription ns/name`, for the evidence. */
  readonly from: string;
  readonly nodeSelector?: Readonly<Record<string, string>>;
  readonly tolerations?: readonly Toleration[];
}

/** A bundle the plan stages, and why. */
export interface ChosenBundle {
  /** The catalog reference as the user named it. */
  readonly catalog: string;
  readonly bundle: CatalogBundle;
  readonly why: string;
  /** Where its CSV's deployments were read when the catalog did not carry them. */
  readonly csvFrom?: 'bundle image';
  /** A live Subscription's spec.config, applied to the CSV's deployments before they are placed. */
  readonly overrides?: PodOverrides;
  /**
   * Where a live cluster runs the operator's deployments now (its current CSV's Pods): wins over
   * the pod spec. Without a CSV read, it (or the overrides) places the images `opm render` lists
   * unnamed: the CSV's deployment images.
   */
  readonly runsOn?: Placement;
  /** OLM v1: operator-controller pulls bundle images in its own process (containers/image), no node does. */
  readonly bundleImageOffNodes?: boolean;
}

/** The bundles a plan stages and the catalogs they come from. */
export interface ChosenOperators {
  readonly catalogs: readonly Catalog[];
  /** Per catalog, the packages it serves in the plan. */
  readonly packagesOf: ReadonlyMap<string, readonly string[]>;
  readonly chosen: readonly ChosenBundle[];
}

/** One image an operator brings, with the nodes it goes to and why. */
export interface OperatorImage {
  readonly reference: string;
  readonly name: string;
  readonly role: ImageRole;
  readonly evidence: readonly string[];
  /** The packages and bundles that bring it, sorted. */
  readonly packages: readonly string[];
  readonly bundles: readonly string[];
}

const CONTROL_PLANE_LABELS = ['node-role.kubernetes.io/master', 'node-role.kubernetes.io/control-plane'];

/** What a deployment's pod spec lets the scheduler do. */
export function deploymentRole(d: BundleDeployment): Placement {
  const selector = Object.keys(d.nodeSelector);
  if (selector.some((k) => CONTROL_PLANE_LABELS.includes(k))) return { role: 'control-plane', why: `deployment ${d.name} selects control-plane nodes (nodeSelector ${selector.join(', ')})` };
  if (selector.includes('node-role.kubernetes.io/worker')) return { role: 'worker', why: `deployment ${d.name} selects workers (nodeSelector node-role.kubernetes.io/worker)` };
  const tolerates = d.tolerations.some((t) => (t.operator === 'Exists' && t.key === undefined) || (t.key !== undefined && CONTROL_PLANE_LABELS.includes(t.key)));
  if (tolerates && selector.length === 0) return { role: 'all', why: `deployment ${d.name} tolerates the control-plane taint and selects no nodes: any node` };
  return { role: 'worker', why: `deployment ${d.name} ${selector.length > 0 ? `selects ${selector.join(', ')}` : 'selects no nodes'} and does not tolerate the control-plane taint: workers` };
}

function overridden(d: BundleDeployment, o: PodOverrides): BundleDeployment {
  const same = (x: Toleration, y: Toleration) => x.key === y.key && x.operator === y.operator && x.value === y.value && x.effect === y.effect;
  const added = (o.tolerations ?? []).filter((t) => !d.tolerations.some((mine) => same(mine, t)));
  return { ...d, nodeSelector: o.nodeSelector ?? d.nodeSelector, tolerations: [...d.tolerations, ...added] };
}

/** Where a chosen bundle's deployments go: the Pods running now, else the (overridden) pod spec. */
function placeDeployment(chosen: ChosenBundle, d: BundleDeployment): Placement {
  if (chosen.runsOn) return chosen.runsOn;
  if (!chosen.overrides) return deploymentRole(d);
  const { role, why } = deploymentRole(overridden(d, chosen.overrides));
  return { role, why: `${why} (${chosen.overrides.from}'s spec.config applied, as OLM does)` };
}

function wider(a: ImageRole, b: ImageRole): ImageRole {
  return a === b ? a : 'all';
}

/** Every image the chosen bundles bring, once each, with their roles and evidence; catalog images too. */
export function placeOperatorImages(chosen: readonly ChosenBundle[], catalogs: ReadonlyArray<{ readonly reference: string; readonly pullSpec: string; readonly packages: readonly string[] }>): OperatorImage[] {
  const out = new Map<string, { name: string; role: ImageRole; evidence: string[]; packages: Set<string>; bundles: Set<string> }>();
  const add = (reference: string, name: string, role: ImageRole, evidence: string, pkg: string | readonly string[], bundle?: string) => {
    let image = out.get(reference);
    if (!image) out.set(reference, (image = { name, role, evidence: [], packages: new Set(), bundles: new Set() }));
    else image.role = wider(image.role, role);
    if (!image.evidence.includes(evidence)) image.evidence.push(evidence);
    for (const p of typeof pkg === 'string' ? [pkg] : pkg) image.packages.add(p);
    if (bundle) image.bundles.add(bundle);
  };
  for (const catalog of catalogs) add(catalog.pullSpec, repositoryName(catalog.reference), 'all', `catalog ${catalog.reference}: its CatalogSource's registry pod in openshift-marketplace may run on any node`, catalog.packages);
  for (const c of chosen) {
    const { bundle, why, csvFrom } = c;
    const of = `${bundle.name} (${why})`;
    if (bundle.image !== '' && c.bundleImageOffNodes !== true) add(bundle.image, `${bundle.name}-bundle`, 'all', `bundle image of ${of}: OLM's unpack Job runs on any Linux node`, bundle.package, bundle.name);
    const deployed = new Set<string>();
    for (const d of bundle.deployments ?? []) {
      const { role, why: placed } = placeDeployment(c, d);
      for (const image of d.images) {
        deployed.add(image);
        add(image, relatedName(bundle, image), role, `runs in ${of}: ${placed}${csvFrom && !c.runsOn ? ` (the CSV in its ${csvFrom})` : ''}`, bundle.package, bundle.name);
      }
    }
    const unread = bundle.deployments === undefined && (c.runsOn || c.overrides) ? placeDeployment(c, { name: 'of its CSV', nodeSelector: {}, tolerations: [], images: [] }) : undefined;
    for (const related of bundle.relatedImages) {
      if (related.image === bundle.image || deployed.has(related.image)) continue;
      if (unread && related.name === '') {
        add(related.image, relatedName(bundle, related.image), unread.role, `runs in ${of}: ${unread.why} (opm render lists the CSV's deployment images unnamed)`, bundle.package, bundle.name);
      } else if (bundle.deployments === undefined) {
        add(related.image, relatedName(bundle, related.image), 'worker', `related image of ${of}; the catalog carries no CSV (olm.csv.metadata only), so the worker set by default`, bundle.package, bundle.name);
      } else {
        add(related.image, relatedName(bundle, related.image), 'worker', `operand of ${of} (a related image no CSV deployment runs): where workloads run, the worker set by default`, bundle.package, bundle.name);
      }
    }
  }
  return [...out].map(([reference, i]) => ({ reference, name: i.name, role: i.role, evidence: i.evidence, packages: [...i.packages].sort(), bundles: [...i.bundles].sort() })).sort((a, b) => a.reference.localeCompare(b.reference));
}

function relatedName(bundle: CatalogBundle, image: string): string {
  const named = bundle.relatedImages.find((r) => r.image === image && r.name !== '');
  return named?.name ?? repositoryName(image);
}

/** `quay.io/datagrid/operator:2.4.2` → `operator`. */
function repositoryName(reference: string): string {
  return reference.split('@')[0]!.split('/').slice(1).join('/').replace(/:[^/]*$/, '').split('/').at(-1) ?? reference;
}
