/**
 * Which backend a cluster uses: MCO's PinnedImageSet when the cluster serves it (OpenShift
 * 4.16+), else prestage's own CRDs when `prestage install` put them there.
 */
import { ClusterError } from '../errors.js';
import type { BackendKind } from './backend.js';
import { KubeApiError, type KubeClient } from './kube.js';

interface ApiResourceList {
  resources: Array<{ name: string; kind: string }>;
}

async function serves(client: KubeClient, groupVersion: string, resource: string): Promise<boolean> {
  try {
    const list = await client.get<ApiResourceList>(`/apis/${groupVersion}`);
    return list.resources.some((r) => r.name === resource);
  } catch (error) {
    if (error instanceof KubeApiError && error.status === 404) return false;
    throw error;
  }
}

export async function detectBackend(client: KubeClient, agentGroupVersion: string, scriptName: string): Promise<BackendKind> {
  if (await serves(client, 'machineconfiguration.openshift.io/v1', 'pinnedimagesets')) return 'mco';
  if (await serves(client, agentGroupVersion, 'pinnedimagesets')) return 'agent';
  throw new ClusterError(`this cluster has neither MCO PinnedImageSets nor the prestage CRDs; run \`${scriptName} install\` first`);
}
