/** Cluster flags shared by apply, wait, status and stage: kubeconfig, context, backend. */
import type { Argv } from 'yargs';
import { API_VERSION as AGENT_API_VERSION } from '../api/prestage.js';
import { agentBackend } from '../cluster/agent/backend.js';
import type { BackendKind, PinningBackend } from '../cluster/backend.js';
import { detectBackend } from '../cluster/detect.js';
import { connectCluster, type ClusterClient } from '../cluster/connect.js';
import { mcoBackend, type McoVersions } from '../cluster/mco/backend.js';

export interface KubeFlags {
  kubeconfig?: string;
  context?: string;
  backend?: BackendKind;
}

export function withKubeOptions<T>(y: Argv<T>): Argv<T & KubeFlags> {
  return y
    .option('kubeconfig', { type: 'string', describe: 'Kubeconfig file (default: $KUBECONFIG, a list, then ~/.kube/config, then in-cluster)' })
    .option('context', { type: 'string', describe: 'Kubeconfig context to use' })
    .option('backend', { choices: ['mco', 'agent'] as const, describe: 'Pinning backend (default: MCO when the cluster serves PinnedImageSets, else the prestage agent)' }) as unknown as Argv<T & KubeFlags>;
}

export async function clusterFrom(flags: KubeFlags, scriptName: string): Promise<{ client: ClusterClient; backend: PinningBackend; mco?: McoVersions }> {
  const client = await connectCluster(flags);
  const detected = await detectBackend(client, AGENT_API_VERSION, scriptName, flags.backend);
  return detected.kind === 'mco' ? { client, backend: mcoBackend(client, detected.versions), mco: detected.versions } : { client, backend: agentBackend(client) };
}
