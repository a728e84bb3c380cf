/**
 * What live planning reads and the RBAC it needs, in words: apart from live-cluster.ts, so that
 * `plan`'s help and flags load no Kubernetes client unless the plan reads a cluster.
 */
export const LIVE_CLUSTER_RBAC =
  'get, list on nodes and pods (all namespaces); get on clusterversions, featuregates and infrastructures (config.openshift.io); get on osimagestreams, list on machineconfigpools (machineconfiguration.openshift.io)';

/** `plan --help` and docs/planning.md: what live planning reads. */
export const LIVE_CLUSTER_HELP = `\nLive cluster (--kubeconfig/--context on plan, by default in stage; --no-cluster turns it off): reads ClusterVersion, Infrastructure, Nodes and Pods, read-only. RBAC needed: ${LIVE_CLUSTER_RBAC}.`;
