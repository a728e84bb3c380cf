/**
 * The one selection model: what a user asks of a catalog, whether from an oc-mirror v2
 * ImageSetConfiguration (`mirror.operators[]`), from the plain flags or from a live cluster's
 * Subscriptions and ClusterExtensions. Each field means what oc-mirror gives it (FACTS §11);
 * select.ts applies it to a catalog.
 */

export interface ChannelSelection {
  readonly name: string;
  /** Inclusive bounds on `olm.package.version`. */
  readonly minVersion?: string;
  readonly maxVersion?: string;
}

export interface PackageSelection {
  readonly name: string;
  /** Replaces the package's default channel in the filtered catalog (it must be one of the kept channels). */
  readonly defaultChannel?: string;
  /** A range over every kept channel of the package (not with a channel's own range). */
  readonly minVersion?: string;
  readonly maxVersion?: string;
  /** None: every channel of the package. */
  readonly channels: readonly ChannelSelection[];
}

export interface CatalogSelection {
  /** The catalog image reference as written. */
  readonly catalog: string;
  /** Where the filtered catalog goes in the mirror: a repository path and a tag (bundle push). */
  readonly targetCatalog?: string;
  readonly targetTag?: string;
  /** Every bundle of the selected packages (of every package when none is listed), not only heads. */
  readonly full: boolean;
  /** None: every package of the catalog. */
  readonly packages: readonly PackageSelection[];
}
