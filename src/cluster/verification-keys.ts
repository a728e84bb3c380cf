/**
 * The release verification keys a cluster trusts now: the CVO applies its CURRENT release's
 * verifier ConfigMap (annotated `release.openshift.io/verification-config-map`, in
 * `openshift-config-managed`; `verifier-public-key-*` armored keys, `store-*` signature
 * stores). Keys for the next release come from here, never from the next release itself.
 */
import { ClusterError } from '../errors.js';
import type { KubeClient, KubeList, KubeObject } from '../kube/client.js';

export const VERIFIER_ANNOTATION = 'release.openshift.io/verification-config-map';
const NAMESPACE = 'openshift-config-managed';

export interface ClusterVerification {
  /** Armored keys, each named for messages: `configmap openshift-config-managed/release-verification verifier-public-key-redhat`. */
  readonly keys: ReadonlyArray<{ readonly text: string; readonly where: string }>;
  /** Store URLs as the ConfigMap gives them (not yet checked), each named like the keys. */
  readonly stores: ReadonlyArray<{ readonly url: string; readonly where: string }>;
  readonly configMaps: readonly string[];
}

type ConfigMap = KubeObject & { data?: Record<string, string> };

export async function clusterVerification(client: KubeClient): Promise<ClusterVerification> {
  const list = await client.get<KubeList<ConfigMap>>(`/api/v1/namespaces/${NAMESPACE}/configmaps`);
  const verifiers = list.items.filter((cm) => cm.metadata.annotations?.[VERIFIER_ANNOTATION] !== undefined);
  const keys: Array<{ text: string; where: string }> = [];
  const stores: Array<{ url: string; where: string }> = [];
  for (const cm of verifiers) {
    for (const [name, value] of Object.entries(cm.data ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const where = `ConfigMap ${NAMESPACE}/${cm.metadata.name} ${name}`;
      if (name.startsWith('verifier-public-key-')) keys.push({ text: value, where });
      else if (name.startsWith('store-')) stores.push({ url: value.trim(), where });
    }
  }
  if (keys.length === 0) {
    throw new ClusterError(`the cluster has no release verification keys (no ConfigMap in ${NAMESPACE} annotated ${VERIFIER_ANNOTATION} holds a verifier-public-key-*): is it OpenShift? pass --verification-key FILE instead`);
  }
  return { keys, stores, configMaps: verifiers.map((cm) => cm.metadata.name) };
}
