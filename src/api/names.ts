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

/**
 * Host paths the agent's DaemonSet mounts, each at the same path in the container: the agent
 * names a path as CRI-O, the kubelet and containers/image name it on the host (CRI-O's
 * `--config-dir` in its command line is compared with the drop-in directory as a string).
 */
export const NODE_PATHS = {
  crioSocket: '/var/run/crio/crio.sock',
  /** Read-only: crio.conf (its pins are carried), which CRI-O's own packages may not ship. */
  crioConfigDir: '/etc/crio',
  /** Read-write: the one directory the pin drop-in is written (and staged) in. */
  crioDropInDir: '/etc/crio/crio.conf.d',
  kubeletPullSecret: '/var/lib/kubelet/config.json',
  registriesConf: DEFAULT_REGISTRIES_CONF,
  /** Read-only, or read-write with `--cache` (the agent writes `99-prestage-cache.conf` there). */
  registriesConfDir: DEFAULT_REGISTRIES_CONF_DIR,
} as const;

/** The Leases the agents write, in their namespace (src/agent/pacing.ts, link-share.ts, cache-warm.ts). */
export const LINK_LEASE = 'prestage-link';
export const PULL_SLOT_PREFIX = 'prestage-pull-slot-';
export const CACHE_WARM_PREFIX = 'prestage-cache-warm-';
/** One warm slot: the cache is filled by one node at a time. */
export const CACHE_WARM_LEASE = `${CACHE_WARM_PREFIX}0`;
/**
 * A leaf cache's warm slot: `prestage-cache-warm-leaf-<i>-0`, i the leaf's index among the leaves'
 * names sorted (the record on it names the leaf's location, so a renumbered leaf starts empty).
 */
export const cacheLeafWarmPrefix = (index: number): string => `${CACHE_WARM_PREFIX}leaf-${index}-`;
export const cacheLeafWarmLease = (index: number): string => `${cacheLeafWarmPrefix(index)}0`;
/** The set-status writer's Lease, `<prefix>0` (one slot): the agent that holds it writes PinnedImageSets' status. */
export const SET_STATUS_LEASE_PREFIX = 'prestage-set-status-';
export const SET_STATUS_LEASE = `${SET_STATUS_LEASE_PREFIX}0`;

/** The link ledger Lease's annotation: the charges of the last windows, `[at, bytes, until, id]` entries. */
export const LINK_LEDGER_ANNOTATION = 'prestage.dev/link-ledger';
/** The cache warm Lease's annotation: `{caches, keys: ["arch@digest", ...]}`, the images warmed. */
export const CACHE_WARMED_ANNOTATION = 'prestage.dev/cache-warmed';
