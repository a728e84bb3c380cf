/**
 * The one door from the CLI to a cluster: a kubeconfig selection in, a client out. The CLI holds
 * the client only to hand it to cluster/, install/ and verify/, which speak the API.
 */
import { KubeClient } from '../kube/client.js';
import { loadKubeconfig, type KubeconfigSelection } from '../kube/kubeconfig.js';

/** A connection to one cluster; only the modules below the CLI call its methods. */
export type ClusterClient = KubeClient;

export async function connectCluster(selection: KubeconfigSelection): Promise<ClusterClient> {
  return new KubeClient(await loadKubeconfig(selection));
}
