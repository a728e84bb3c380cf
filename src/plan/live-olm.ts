/**
 * What OLM shows of a live cluster's operators, as cluster/live-operators.ts reads it (every field
 * checked there): OLM v0's Subscriptions, CatalogSources and ClusterServiceVersions
 * (operators.coreos.com/v1alpha1, operator-framework/api), OLM v1's ClusterExtensions and
 * ClusterCatalogs (olm.operatorframework.io/v1, operator-controller). Planned by live-operators.ts.
 */
import type { Toleration } from '../catalog/declcfg.js';
import type { UpgradeConstraintPolicy } from '../catalog/upgrade.js';

/** operators.coreos.com/v1alpha1 Subscription, as read (cluster/live-operators.ts). */
export interface LiveSubscription {
  readonly namespace: string;
  readonly name: string;
  /** spec.name. */
  readonly package: string;
  /** spec.source and spec.sourceNamespace: the CatalogSource. */
  readonly source: string;
  readonly sourceNamespace: string;
  readonly channel?: string;
  readonly startingCSV?: string;
  readonly approval: 'Automatic' | 'Manual';
  readonly config?: { readonly nodeSelector?: Readonly<Record<string, string>>; readonly tolerations?: readonly Toleration[] };
  readonly installedCSV?: string;
  readonly currentCSV?: string;
  readonly state?: string;
}

export interface LiveCatalogSource {
  readonly namespace: string;
  readonly name: string;
  readonly sourceType?: string;
  readonly image?: string;
  readonly address?: string;
  /** status.connectionState.lastObservedState (READY, TRANSIENT_FAILURE, ...). */
  readonly connectionState?: string;
}

/** A ClusterServiceVersion that is not a copy. */
export interface LiveCsv {
  readonly namespace: string;
  readonly name: string;
  readonly version?: string;
  readonly phase?: string;
  /** Its olm.maxOpenShiftVersion property's JSON value, from the operatorframework.io/properties annotation. */
  readonly maxOpenShiftVersion?: string;
  /** Why that annotation cannot be read (OLM then reports the CSV as blocking). */
  readonly propertiesError?: string;
}

/** olm.operatorframework.io/v1 ClusterExtension. */
export interface LiveExtension {
  readonly name: string;
  readonly packageName: string;
  readonly channels: readonly string[];
  /** spec.source.catalog.version, a Masterminds constraint. */
  readonly version?: string;
  readonly upgradeConstraintPolicy?: UpgradeConstraintPolicy;
  /** The ClusterCatalogs its spec.source.catalog.selector admits, by name. */
  readonly catalogs: readonly string[];
  readonly installed?: { readonly name: string; readonly version: string };
}

export interface LiveClusterCatalog {
  readonly name: string;
  /** status.resolvedSource.image.ref (what catalogd serves), else spec.source.image.ref. */
  readonly image: string;
  readonly priority: number;
}

/** What OLM (v0 and v1) shows of a cluster's operators. */
export interface LiveOperators {
  readonly subscriptions: readonly LiveSubscription[];
  readonly catalogSources: readonly LiveCatalogSource[];
  readonly csvs: readonly LiveCsv[];
  readonly extensions: readonly LiveExtension[];
  readonly clusterCatalogs: readonly LiveClusterCatalog[];
  /** Objects the reader left out, and why. */
  readonly warnings: readonly string[];
}
