/**
 * Names the installer, the node agent and the cluster commands agree on: the agent's and the
 * cache's object names, and the node paths the agent's DaemonSet mounts.
 */

/** The agent's DaemonSet, ServiceAccount, RBAC and Pod label (`app`). */
export const AGENT_NAME = 'prestage-agent';

/** The in-cluster cache's Deployment, Service, ConfigMap, Secret and PVC. */
export const CACHE_NAME = 'prestage-cache';
/** The cache Service's port that serves the registry's Prometheus metrics (its debug server). */
export const CACHE_METRICS_PORT_NAME = 'metrics';
/** The ImageDigestMirrorSet `install --cache` writes on OpenShift. */
export const CACHE_MIRROR_SET_NAME = CACHE_NAME;

/** `99-`: after MCO's `50-pinned-images`, so this file's list (the union) is the one in force. */
export const DEFAULT_PIN_DROP_IN = '/etc/crio/crio.conf.d/99-prestage-pinned-images';
/** The node's registries configuration, as CRI-O reads it. */
export const DEFAULT_REGISTRIES_CONF = '/etc/containers/registries.conf';
export const DEFAULT_REGISTRIES_CONF_DIR = '/etc/containers/registries.conf.d';
