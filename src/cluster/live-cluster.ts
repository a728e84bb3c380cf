/**
 * What a running OpenShift cluster says about itself, read-only: ClusterVersion (the release it
 * runs, its capabilities and overrides), FeatureGate `cluster` (its feature set and enabled gates
 * per version), Infrastructure (its platform), the OS streams its pools boot (OSImageStream and
 * MachineConfigPools, where served), Nodes (their roles), Pods of all namespaces (the images
 * each node runs; the CSV an OLM deployment's Pod runs) and, where it runs OLM, its operators
 * (live-operators.ts). The RBAC this needs is LIVE_CLUSTER_RBAC, and LIVE_OPERATORS_RBAC with OLM.
 */
import { ClusterError } from '../errors.js';
import { gateNames } from '../plan/feature-gates.js';
import type { UnmanagedOverride } from '../plan/inclusion.js';
import type { LiveCluster, RunningPod } from '../plan/live.js';
import { KubeApiError, KubeClient, type KubeList, type KubeObject } from '../kube/client.js';
import { loadKubeconfig } from '../kube/kubeconfig.js';
import { readLiveOperators } from './live-operators.js';
import { listAll, LiveClusterRefused, read } from './live-reads.js';

/** ClusterVersion `version`: there on every OpenShift cluster, nowhere else. */
export const CLUSTER_VERSION = '/apis/config.openshift.io/v1/clusterversions/version';
const INFRASTRUCTURE = '/apis/config.openshift.io/v1/infrastructures/cluster';
const FEATURE_GATE = '/apis/config.openshift.io/v1/featuregates/cluster';
const OS_IMAGE_STREAM = '/apis/machineconfiguration.openshift.io/v1/osimagestreams/cluster';
const MACHINE_CONFIG_POOLS = '/apis/machineconfiguration.openshift.io/v1/machineconfigpools';
const CONTROL_PLANE_LABELS = ['node-role.kubernetes.io/master', 'node-role.kubernetes.io/control-plane'];

/** A release as ClusterVersion names it (`status.desired`, `availableUpdates[]`, `conditionalUpdates[].release`). */
export interface ClusterRelease {
  image?: string;
  version?: string;
  url?: string;
}

/** ClusterVersion as the CVO writes it (openshift/api config/v1), the fields prestage reads. */
export interface ClusterVersion extends KubeObject {
  spec?: {
    channel?: string;
    /** The update service the CVO asks; empty: Red Hat's. */
    upstream?: string;
    capabilities?: { baselineCapabilitySet?: string; additionalEnabledCapabilities?: string[] };
    overrides?: Array<{ kind?: string; group?: string; namespace?: string; name?: string; unmanaged?: boolean }>;
  };
  status?: {
    desired?: ClusterRelease;
    /** Newest first; `state` Completed or Partial. */
    history?: Array<ClusterRelease & { state?: string; completionTime?: string }>;
    availableUpdates?: ClusterRelease[] | null;
    conditionalUpdates?: Array<{
      release?: ClusterRelease;
      risks?: Array<{ name?: string; message?: string; url?: string }>;
      conditions?: Array<{ type?: string; status?: string; reason?: string; message?: string }>;
    }>;
    capabilities?: { enabledCapabilities?: string[] };
  };
}

/** FeatureGate `cluster` (config.openshift.io/v1). */
interface FeatureGate extends KubeObject {
  spec?: { featureSet?: string; customNoUpgrade?: { enabled?: string[]; disabled?: string[] } };
  status?: { featureGates?: Array<{ version?: string; enabled?: Array<{ name?: string }>; disabled?: Array<{ name?: string }> }> };
}

/** OSImageStream `cluster` and MachineConfigPools, where the cluster serves them (MCO 4.21+). */
interface OSImageStream extends KubeObject {
  spec?: { defaultStream?: string };
  status?: { defaultStream?: string };
}
interface MachineConfigPool extends KubeObject {
  spec?: { osImageStream?: { name?: string } };
}

interface Pod extends KubeObject {
  metadata: KubeObject['metadata'] & { namespace?: string; ownerReferences?: Array<{ kind?: string; name?: string }> };
  spec?: { nodeName?: string; containers?: Array<{ image?: string; env?: Array<{ name?: string; value?: string }> }>; initContainers?: Array<{ image?: string }> };
  status?: { containerStatuses?: Array<{ imageID?: string }>; initContainerStatuses?: Array<{ imageID?: string }> };
}

/**
 * The running cluster to plan the upgrade of. When it was asked for (`required`), a cluster
 * without ClusterVersion (not OpenShift) or a refusal is an error; by default (`stage`) the
 * plan comes from the release alone: silently when the cluster is not OpenShift, with `warn`
 * when it refused.
 */
export async function liveClusterFrom(flags: { kubeconfig?: string; context?: string }, required: boolean, warn: (line: string) => void): Promise<LiveCluster | undefined> {
  const client = new KubeClient(await loadKubeconfig(flags));
  let live: LiveCluster | undefined;
  try {
    live = await readLiveCluster(client);
  } catch (error) {
    if (required || !(error instanceof LiveClusterRefused)) throw error;
    warn(`${error.server} refused to ${error.what} (HTTP ${error.status}), so the plan comes from the release alone; planning from the live cluster needs ${error.needs} (--no-cluster skips it)`);
    return undefined;
  }
  if (!live && required) throw new ClusterError(`${client.server} has no ClusterVersion (not an OpenShift cluster): nothing to plan the upgrade of; plan with --no-cluster`);
  return live;
}

/** ClusterVersion `version`, for `what` (`--to`, `prune`): a refusal or a cluster without one is exit 4. */
export async function readClusterVersion(client: KubeClient, what: string): Promise<ClusterVersion> {
  let clusterVersion: ClusterVersion | undefined;
  try {
    clusterVersion = await client.find<ClusterVersion>(CLUSTER_VERSION);
  } catch (error) {
    if (error instanceof KubeApiError && (error.status === 401 || error.status === 403)) {
      throw new ClusterError(`${client.server} refused to get clusterversions/version (HTTP ${error.status}): ${what} needs get on clusterversions (config.openshift.io)`);
    }
    throw error;
  }
  if (!clusterVersion) throw new ClusterError(`${client.server} has no ClusterVersion (not an OpenShift cluster): ${what} needs the cluster's release versions`);
  return clusterVersion;
}

/** The cluster as observed; undefined when it has no ClusterVersion (not OpenShift). */
export async function readLiveCluster(client: KubeClient): Promise<LiveCluster | undefined> {
  const clusterVersion = await read(client, () => client.find<ClusterVersion>(CLUSTER_VERSION), 'get clusterversions/version');
  if (!clusterVersion) return undefined;
  const current = currentRelease(clusterVersion);
  if (!current) throw new ClusterError(`ClusterVersion version on ${client.server} names no release (status.history and status.desired have no image); plan with --no-cluster`);
  const infrastructure = await read(client, () => client.find<KubeObject & { status?: { platformStatus?: { type?: string }; platform?: string } }>(INFRASTRUCTURE), 'get infrastructures/cluster');
  const nodes = await read(client, () => listAll<KubeObject, KubeObject>(client, '/api/v1/nodes', (n) => [n]), 'list nodes');
  const pods = await read(client, () => listAll<Pod, RunningPod>(client, '/api/v1/pods', runningPod), 'list pods in all namespaces');
  const featureGate = await read(client, () => client.find<FeatureGate>(FEATURE_GATE), 'get featuregates/cluster');
  const osStreams = await readOsStreams(client);
  const operators = await readLiveOperators(client);
  const platform = infrastructure?.status?.platformStatus?.type ?? infrastructure?.status?.platform;
  const capabilities = clusterVersion.status?.capabilities?.enabledCapabilities;
  const spec = clusterVersion.spec?.capabilities;
  const overrides = (clusterVersion.spec?.overrides ?? []).filter((o) => o.unmanaged === true && o.kind && o.name).map((o): UnmanagedOverride => ({ group: o.group ?? '', kind: o.kind!, namespace: o.namespace ?? '', name: o.name! }));
  return {
    server: client.server,
    release: current,
    ...(Array.isArray(capabilities) ? { capabilities: [...capabilities].sort() } : {}),
    ...(spec ? { capabilitySpec: { ...(spec.baselineCapabilitySet ? { baseline: spec.baselineCapabilitySet } : {}), additional: spec.additionalEnabledCapabilities ?? [] } } : {}),
    ...(overrides.length > 0 ? { overrides } : {}),
    ...(featureGate ? { featureGate: featureGateOf(featureGate) } : {}),
    ...(osStreams ? { osStreams } : {}),
    ...(platform ? { platform } : {}),
    nodes: nodes.map((n) => ({ name: n.metadata.name, role: CONTROL_PLANE_LABELS.some((l) => l in (n.metadata.labels ?? {})) ? 'control-plane' : 'worker' })),
    pods,
    ...(operators ? { operators } : {}),
  };
}

function featureGateOf(fg: FeatureGate): NonNullable<LiveCluster['featureGate']> {
  const custom = fg.spec?.customNoUpgrade;
  return {
    featureSet: fg.spec?.featureSet ?? '',
    ...(custom ? { custom: { enabled: custom.enabled ?? [], disabled: custom.disabled ?? [] } } : {}),
    status: (fg.status?.featureGates ?? []).map((s) => ({ version: s.version ?? '', enabled: gateNames(s.enabled), disabled: gateNames(s.disabled) })),
  };
}

/** The streams the pools boot: OSImageStream's default (status, else spec) and every pool with its choice; undefined where neither is served. */
async function readOsStreams(client: KubeClient): Promise<LiveCluster['osStreams']> {
  const stream = await read(client, () => client.find<OSImageStream>(OS_IMAGE_STREAM), 'get osimagestreams/cluster');
  const pools = await read(client, () => client.find<KubeList<MachineConfigPool>>(MACHINE_CONFIG_POOLS), 'list machineconfigpools');
  if (!stream && !pools) return undefined;
  const defaultStream = stream?.status?.defaultStream || stream?.spec?.defaultStream;
  return {
    ...(defaultStream ? { defaultStream } : {}),
    pools: (pools?.items ?? []).map((p) => ({ pool: p.metadata.name, ...(p.spec?.osImageStream?.name ? { stream: p.spec.osImageStream.name } : {}) })).sort((a, b) => (a.pool < b.pool ? -1 : 1)),
  };
}

/**
 * The release the nodes run: the newest Completed update in the history. During an update,
 * `status.desired` is already the target, so it is only the last resort.
 */
export function currentRelease(cv: ClusterVersion): LiveCluster['release'] | undefined {
  const done = cv.status?.history?.find((h) => h.state === 'Completed' && h.image);
  const entry = done ?? (cv.status?.desired?.image ? cv.status.desired : undefined);
  return entry?.image ? { pullSpec: entry.image, ...(entry.version ? { version: entry.version } : {}) } : undefined;
}

/** A Pod bound to a node, with every digest its containers name or run. */
function runningPod(pod: Pod): RunningPod[] {
  const node = pod.spec?.nodeName;
  if (!node) return [];
  const texts = [
    ...[...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].map((c) => c.image),
    ...[...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].map((s) => s.imageID),
  ];
  const digests = [...new Set(texts.flatMap((t) => (typeof t === 'string' ? [...t.matchAll(/@(sha256:[a-f0-9]{64})/g)].map((m) => m[1]!) : [])))];
  // OLM sets OPERATOR_CONDITION_NAME to the CSV's name on every container of its deployments (install/deployment.go).
  const csv = (pod.spec?.containers ?? []).flatMap((c) => (Array.isArray(c.env) ? c.env : [])).find((e) => e?.name === 'OPERATOR_CONDITION_NAME')?.value;
  return [{ workload: workloadOf(pod), node, digests, ...(typeof csv === 'string' && csv !== '' ? { csv } : {}) }];
}

/** `namespace/name` of the DaemonSet, Deployment (its ReplicaSet less the hash) or owner; else the Pod. */
function workloadOf(pod: Pod): string {
  const owner = pod.metadata.ownerReferences?.[0];
  const name = owner?.name ? (owner.kind === 'ReplicaSet' ? owner.name.replace(/-[a-z0-9]{5,10}$/, '') : owner.name) : pod.metadata.name;
  return `${pod.metadata.namespace ?? ''}/${name}`;
}
