/** Between benchmark runs on the test bed: every set deleted and every image the runs pulled removed, so the next run starts cold. */
import { setTimeout as sleep } from 'node:timers/promises';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import type { KubeClient } from '../src/kube/client.js';
import type { TestCluster } from '../test/cluster/index.js';
import { withCri } from '../test/support/agent-bed.js';

/** Every set deleted, until no pull is under way (what each node stores unchanged over 8 s), then the images under `prefixes` removed. */
export async function emptyNodes(client: KubeClient, cluster: TestCluster, prefixes: readonly string[]): Promise<void> {
  const ours = (image: { repoDigests: readonly string[] }) => image.repoDigests.some((name) => prefixes.some((prefix) => name.startsWith(prefix)));
  const sets = (await client.get<{ items: Array<{ metadata: { name: string } }> }>(AGENT_PATHS.pinnedImageSets)).items;
  for (const set of sets) await client.request('DELETE', `${AGENT_PATHS.pinnedImageSets}/${set.metadata.name}`);
  const stored = async () => JSON.stringify(await Promise.all(cluster.nodes.map((node) => withCri(node, async (cri) => (await cri.listImages()).filter((image) => ours(image)).map((image) => `${image.id}${image.pinned ? '+' : ''}`)))));
  for (let before = await stored(); ; ) {
    await sleep(8_000);
    const now = await stored();
    if (now === before && !now.includes('+')) break;
    before = now;
  }
  for (const node of cluster.nodes) await withCri(node, async (cri) => {
    for (const image of await cri.listImages()) if (ours(image)) await cri.removeImage(image.id);
  });
}
