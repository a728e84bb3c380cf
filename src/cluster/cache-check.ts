/**
 * `stage --cache`: before the sets go out, the in-cluster cache (`install --cache`) must be there,
 * wired to the nodes, and its volume must hold what this plan pulls through it: every config and
 * layer of the sets' images once (compressed, as the cache stores them). A volume too small still
 * works, but the proxy evicts and the link carries blobs again: said as a warning.
 */
import { BadInputError } from '../errors.js';
import type { Plan } from '../plan/types.js';
import type { KubeClient, KubeObject } from '../kube/client.js';
import { formatBytes } from '../units.js';
import { CACHE_NAME } from '../api/names.js';
import { CACHE_MIRROR_SET_NAME } from '../api/names.js';

/** Compressed bytes of every blob (config and layers) of the images in the plan's sets, each once. */
export function planCacheBytes(plan: Plan): number {
  const inSets = new Set(plan.sets.flatMap((set) => set.images));
  const blobs = new Map<string, number>();
  for (const image of plan.images) {
    if (!inSets.has(image.pullSpec)) continue;
    blobs.set(image.config.digest, image.config.size);
    for (const layer of image.layers) blobs.set(layer.digest, layer.compressedBytes);
  }
  return [...blobs.values()].reduce((sum, size) => sum + size, 0);
}

const SUFFIXES: Readonly<Record<string, number>> = { '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50 };

/** A Kubernetes quantity (`100Gi`, `120G`, `5e10`) in bytes; undefined when it is not one. */
export function quantityBytes(text: string | undefined): number | undefined {
  const match = /^(\d+(?:\.\d+)?(?:e\d+)?)([kMGTP]i?|Ki)?$/.exec(String(text ?? '').trim());
  if (!match) return undefined;
  const factor = SUFFIXES[match[2] ?? ''];
  return factor === undefined ? undefined : Math.round(Number(match[1]) * factor);
}

interface Pvc extends KubeObject {
  spec?: { resources?: { requests?: { storage?: string } } };
  status?: { capacity?: { storage?: string } };
}

interface DaemonSetArgs extends KubeObject {
  spec?: { template?: { spec?: { containers?: Array<{ args?: string[] }> } } };
}

/** Checks the cache for this plan: lines to print, warnings to give; a one-line BadInputError when there is no cache. */
export async function checkCacheForPlan(client: KubeClient, namespace: string, plan: Plan, agentName: string): Promise<{ lines: string[]; warnings: string[] }> {
  const base = `/api/v1/namespaces/${encodeURIComponent(namespace)}`;
  const service = await client.find<KubeObject>(`${base}/services/${CACHE_NAME}`);
  if (!service) throw new BadInputError(`--cache: there is no cache in namespace ${namespace} (service ${CACHE_NAME}); install it with \`prestage install --cache --apply\` (--cache-namespace names another namespace), or leave --cache out`);
  const needed = planCacheBytes(plan);
  const warnings: string[] = [];
  const pvc = await client.find<Pvc>(`${base}/persistentvolumeclaims/${CACHE_NAME}`);
  const size = quantityBytes(pvc?.status?.capacity?.storage ?? pvc?.spec?.resources?.requests?.storage);
  const volume = pvc ? (size !== undefined ? `a ${formatBytes(size)} volume` : 'a volume of unknown size') : 'no PVC (a host directory, or installed another way)';
  if (size !== undefined && size < needed) {
    warnings.push(`the cache's volume (${formatBytes(size)}) is smaller than the ${formatBytes(needed)} this plan pulls through it: the cache will evict and the link carry blobs again; grow ${namespace}/${CACHE_NAME} (a PVC of an expandable StorageClass) or reinstall with a larger --cache-size`);
  }
  // Who pulls through it: the agents (their --cache-mirror) and, on OpenShift, MCO-pinned nodes (the mirror set).
  const daemonSet = await client.find<DaemonSetArgs>(`/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/daemonsets/${agentName}`);
  const agentsWired = daemonSet?.spec?.template?.spec?.containers?.some((container) => container.args?.some((arg) => arg.startsWith('--cache-mirror'))) ?? false;
  const mirrorSet = await client.find<KubeObject>(`/apis/config.openshift.io/v1/imagedigestmirrorsets/${CACHE_MIRROR_SET_NAME}`).catch(() => undefined);
  if (!agentsWired && !mirrorSet) warnings.push(`nothing sends pulls to the cache: the agents have no --cache-mirror and there is no ImageDigestMirrorSet ${CACHE_MIRROR_SET_NAME}; run \`prestage install --cache --apply\``);
  const wired = [agentsWired ? 'the agents' : '', mirrorSet ? `ImageDigestMirrorSet ${CACHE_MIRROR_SET_NAME}` : ''].filter(Boolean).join(' and ');
  return { lines: [`cache ${namespace}/${CACHE_NAME}: ${volume}; this plan pulls ${formatBytes(needed)} through it${wired ? ` (wired: ${wired})` : ''}`], warnings };
}
