/**
 * What live planning reads and the RBAC it needs, in words: apart from live-cluster.ts, so that
 * `plan`'s help and flags load no Kubernetes client unless the plan reads a cluster.
 */
export const LIVE_CLUSTER_RBAC =
  'get, list on nodes and pods (all namespaces); get on clusterversions, featuregates and infrastructures (config.openshift.io); get on osimagestreams, list on machineconfigpools (machineconfiguration.openshift.io)';

/** What reading a cluster's OLM operators needs, beyond LIVE_CLUSTER_RBAC (only where OLM's APIs are served). */
export const LIVE_OPERATORS_RBAC = 'list on subscriptions, catalogsources and clusterserviceversions (operators.coreos.com, all namespaces) and on clusterextensions and clustercatalogs (olm.operatorframework.io) for the operators it runs';

/** `plan --help` and docs/planning.md: what live planning reads. */
export const LIVE_CLUSTER_HELP = `\nLive cluster (--kubeconfig/--context on plan, by default in stage; --no-cluster turns it off): reads ClusterVersion, Infrastructure, Nodes and Pods, and OLM's Subscriptions, CatalogSources, CSVs, ClusterExtensions and ClusterCatalogs where OLM runs (every bundle OLM will walk an installed operator through is staged), read-only. RBAC needed: ${LIVE_CLUSTER_RBAC}; and ${LIVE_OPERATORS_RBAC}.`;
