/**
 * One model of an operator catalog, as operator-registry's `alpha/declcfg` has it: packages,
 * channels, bundles and deprecations as plain values. Loaders fill it (load.ts from documents,
 * image.ts from a catalog image); selection, resolution and the upgrade walk take it in and give
 * bundles out, with no registry.
 *
 * A bundle keeps only what staging needs of its properties: its version, what it provides and
 * requires, the highest OpenShift it allows, its images, and where the CSV's deployments run.
 * The rest (CRDs, icons, alm-examples: most of a catalog's bytes) is dropped as it is read.
 */

export interface CatalogPackage {
  readonly name: string;
  /** `olm.package.defaultChannel`; FBC requires it, opm validate refuses a package without one. */
  readonly defaultChannel?: string;
}

export interface ChannelEntry {
  /** A bundle name of the channel's package. */
  readonly name: string;
  readonly replaces?: string;
  readonly skips: readonly string[];
  /** A semver range (blang's grammar: `>=4.1.0 <4.2.0`, `||`, `x` wildcards) of versions it upgrades from. */
  readonly skipRange?: string;
}

export interface CatalogChannel {
  readonly name: string;
  readonly package: string;
  readonly entries: readonly ChannelEntry[];
}

export interface GroupVersionKind {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
}

/** `olm.package.required`: a package whose `olm.package.version` is in `versionRange`. */
export interface PackageRequirement {
  readonly packageName: string;
  readonly versionRange: string;
}

export interface Toleration {
  readonly key?: string;
  readonly operator?: string;
  readonly value?: string;
  readonly effect?: string;
}

/** One deployment of a bundle's ClusterServiceVersion, as much as placement needs. */
export interface BundleDeployment {
  readonly name: string;
  readonly nodeSelector: Readonly<Record<string, string>>;
  readonly tolerations: readonly Toleration[];
  /** Its containers' and init containers' images. */
  readonly images: readonly string[];
}

export interface RelatedImage {
  /** Empty for the bundle image and for images `opm render` found in the CSV's deployments. */
  readonly name: string;
  readonly image: string;
}

export interface CatalogBundle {
  readonly name: string;
  readonly package: string;
  /** The bundle image (what OLM's unpack Job pulls). */
  readonly image: string;
  /** `olm.package` property's `version` (exactly one per bundle). */
  readonly version: string;
  /** `olm.gvk` properties: the APIs it provides. */
  readonly provides: readonly GroupVersionKind[];
  /** `olm.gvk.required` properties. */
  readonly requiresApis: readonly GroupVersionKind[];
  /** `olm.package.required` properties. */
  readonly requiresPackages: readonly PackageRequirement[];
  /** `olm.maxOpenShiftVersion` ("X.Y"), when the bundle names one. */
  readonly maxOpenShiftVersion?: string;
  /** Properties OLM v1 refuses (`olm.constraint`), by type: bundles with these are v0-only. */
  readonly constraints: readonly string[];
  readonly relatedImages: readonly RelatedImage[];
  /**
   * The CSV's deployments when the catalog carries the CSV (`olm.bundle.object`); undefined when
   * it carries only `olm.csv.metadata` (the CSV is then only in the bundle image).
   */
  readonly deployments?: readonly BundleDeployment[];
}

/** `olm.deprecations`: a package, channel or bundle marked deprecated, with its message. */
export interface Deprecation {
  readonly package: string;
  readonly schema: 'olm.package' | 'olm.channel' | 'olm.bundle';
  /** The channel or bundle name; empty for the package itself. */
  readonly name: string;
  readonly message: string;
}

export interface DeclarativeConfig {
  readonly packages: readonly CatalogPackage[];
  readonly channels: readonly CatalogChannel[];
  readonly bundles: readonly CatalogBundle[];
  readonly deprecations: readonly Deprecation[];
}

/** A catalog as read from its image: where it came from and its model. */
export interface Catalog {
  /** The reference as the user gave it (`registry.redhat.io/redhat/redhat-operator-index:v4.16`). */
  readonly reference: string;
  /** The digest pullspec read. */
  readonly pullSpec: string;
  readonly digest: string;
  /** The FBC root inside the image (the `operators.operatorframework.io.index.configs.v1` label). */
  readonly configsDir: string;
  readonly config: DeclarativeConfig;
}

/** Bundles by package, and by name within it: the index every consumer of the model builds. */
export function bundlesByPackage(config: DeclarativeConfig): Map<string, Map<string, CatalogBundle>> {
  const out = new Map<string, Map<string, CatalogBundle>>();
  for (const b of config.bundles) {
    let byName = out.get(b.package);
    if (!byName) out.set(b.package, (byName = new Map()));
    byName.set(b.name, b);
  }
  return out;
}
