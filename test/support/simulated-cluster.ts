/**
 * Puts the fixture's simulated cluster (fixtures/live-cluster.ts) on a test bed API server that
 * serves OpenShift's config CRDs: objects first, then their status through the status
 * subresource, as the CVO, the installer and kubelets write them.
 */
import type { SimulatedCluster } from '../../fixtures/live-cluster.js';
import type { KubeClient } from '../../src/kube/client.js';

const CONFIG = '/apis/config.openshift.io/v1';
const merge = { contentType: 'application/merge-patch+json' };

export async function loadSimulatedCluster(client: KubeClient, simulated: SimulatedCluster): Promise<void> {
  for (const [plural, object] of [['clusterversions', simulated.clusterVersion], ['infrastructures', simulated.infrastructure], ['featuregates', simulated.featureGate]] as const) {
    const { status, ...spec } = object as { status: unknown; metadata: { name: string } };
    await client.request('POST', `${CONFIG}/${plural}`, { body: spec });
    await client.request('PATCH', `${CONFIG}/${plural}/${spec.metadata.name}/status`, { body: { status }, ...merge });
  }
  for (const namespace of simulated.namespaces) {
    await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: namespace } } });
    // The ServiceAccount admission plugin wants the account a Pod runs as; no controller makes it here.
    await client.request('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, { body: { metadata: { name: 'default' } } });
  }
  for (const pod of simulated.pods) {
    const path = `/api/v1/namespaces/${pod.metadata.namespace}/pods`;
    await client.request('POST', path, { body: { metadata: pod.metadata, spec: { ...pod.spec, automountServiceAccountToken: false } } });
    await client.request('PATCH', `${path}/${pod.metadata.name}/status`, { body: { status: pod.status }, ...merge });
  }
}
