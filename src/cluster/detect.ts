/**
 * Which backend a cluster uses: MCO's PinnedImageSet when the cluster serves it (OpenShift
 * 4.19+ at v1; 4.16-4.18 TechPreview at v1alpha1), else prestage's own CRDs when
 * `prestage install` put them there.
 */
import { ClusterError } from '../errors.js';
import type { BackendKind } from './backend.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import { MCO_GROUP, type McoVersion, type McoVersions } from './mco/backend.js';

interface ApiResourceList {
  resources: Array<{ name: string; kind: string }>;
}

export type DetectedBackend = { readonly kind: 'mco'; readonly versions: McoVersions } | { readonly kind: 'agent' };

async function resourcesOf(client: KubeClient, groupVersion: string): Promise<Set<string>> {
  try {
    const list = await client.get<ApiResourceList>(`/apis/${groupVersion}`);
    return new Set(list.resources.map((r) => r.name));
  } catch (error) {
    if (error instanceof KubeApiError && error.status === 404) return new Set();
    throw error;
  }
}

/** The newest version serving each MCO resource, or undefined when PinnedImageSets are not served. */
export async function mcoVersions(client: KubeClient): Promise<McoVersions | undefined> {
  const served: Record<McoVersion, Set<string>> = { v1: await resourcesOf(client, `${MCO_GROUP}/v1`), v1alpha1: await resourcesOf(client, `${MCO_GROUP}/v1alpha1`) };
  const newest = (resource: string): McoVersion | undefined => (served.v1.has(resource) ? 'v1' : served.v1alpha1.has(resource) ? 'v1alpha1' : undefined);
  const pinnedImageSets = newest('pinnedimagesets');
  if (!pinnedImageSets) return undefined;
  return { pinnedImageSets, machineConfigNodes: newest('machineconfignodes') ?? pinnedImageSets };
}

export async function detectBackend(client: KubeClient, agentGroupVersion: string, scriptName: string, forced?: BackendKind): Promise<DetectedBackend> {
  if (forced === 'agent') return { kind: 'agent' };
  const versions = await mcoVersions(client);
  if (versions) return { kind: 'mco', versions };
  if (forced === 'mco') throw new ClusterError(`--backend mco: this cluster serves no ${MCO_GROUP} PinnedImageSets (OpenShift 4.16+; on 4.16-4.18 enable the TechPreviewNoUpgrade feature set)`);
  if ((await resourcesOf(client, agentGroupVersion)).has('pinnedimagesets')) return { kind: 'agent' };
  throw new ClusterError(`this cluster has neither MCO PinnedImageSets nor the prestage CRDs; run \`${scriptName} install\` first`);
}
