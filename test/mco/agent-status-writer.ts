/**
 * Plays the prestage node agents' part for the backend contract tests (the real agents'
 * end-to-end test lives with the agent): for each prestage.dev PinnedImageSet and each node
 * its nodeSelector matches, writes the node's NodePinnedImages status as an agent would:
 * desiredGeneration, the set's bytes and Pending images, then after the pull time either
 * every image Pinned and currentGeneration, or the failure (lastFailedGeneration, the image's
 * lastError, a Degraded condition) while it keeps retrying.
 */
import { API_VERSION, type NodePinnedImages, type PinnedImageSet, type PinnedImageSetStatus } from '../../src/api/prestage.js';
import { AGENT_PATHS } from '../../src/cluster/agent/backend.js';
import type { Informer } from '../../src/kube/informer.js';
import { matchesSelector, type KubeClient, type LabelSelector } from '../../src/kube/client.js';
import { mergeConditions, NodePlayer, type NodeBehaviour } from './node-player.js';
import { CRDS } from '../../src/api/prestage-crds.js';

const IMAGE_BYTES = 10 * 2 ** 20;

export async function installAgentCrds(client: KubeClient): Promise<void> {
  for (const crd of CRDS) await client.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: crd });
  const deadline = Date.now() + 30_000;
  while (!(await client.find<{ resources: Array<{ name: string }> }>(`/apis/${API_VERSION}`))?.resources.some((r) => r.name === 'nodepinnedimages')) {
    if (Date.now() > deadline) throw new Error('prestage CRDs were not served within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export class AgentStatusWriter extends NodePlayer {
  private readonly sets: Informer;
  private readonly nodes: Informer;
  private readonly statuses: Informer;
  /** `node/set/generation` already pulling: one pull per generation. */
  private readonly started = new Set<string>();

  private constructor(client: KubeClient, defaultBehaviour: NodeBehaviour) {
    super(client, defaultBehaviour);
    this.sets = this.informer(AGENT_PATHS.pinnedImageSets);
    this.nodes = this.informer(AGENT_PATHS.nodes);
    this.statuses = this.informer(AGENT_PATHS.nodePinnedImages);
  }

  static async start(client: KubeClient, defaultBehaviour: NodeBehaviour = { pullMs: 300 }): Promise<AgentStatusWriter> {
    return new AgentStatusWriter(client, defaultBehaviour).run();
  }

  protected reconcile(): void {
    if (this.abort.signal.aborted) return;
    for (const node of this.nodes.items.values()) {
      const name = node.metadata.name;
      const own = this.statuses.items.get(name) as unknown as NodePinnedImages | undefined;
      if (!own) {
        this.write(name, async () => {
          if (this.statuses.items.has(name)) return;
          await this.client.request('POST', AGENT_PATHS.nodePinnedImages, { body: { apiVersion: API_VERSION, kind: 'NodePinnedImages', metadata: { name }, spec: { nodeName: name } } })
            .catch((error: { status?: number }) => { if (error.status !== 409) throw error; });
        });
        continue;
      }
      for (const set of this.sets.items.values() as Iterable<unknown> as Iterable<PinnedImageSet>) {
        if (matchesSelector(node.metadata.labels, set.spec.nodeSelector as LabelSelector | undefined)) this.agent(name, set, own);
      }
    }
  }

  private agent(node: string, set: PinnedImageSet, own: NodePinnedImages): void {
    const generation = set.metadata.generation ?? 1;
    const entry = own.status?.pinnedImageSets?.find((s) => s.name === set.metadata.name);
    const images = set.spec.pinnedImages.map((i) => i.name);
    if ((entry?.desiredGeneration ?? 0) < generation) {
      // Images share no layers here: the set's bytes over unique layers are the images' sum.
      this.update(node, set.metadata.name, (s) => ({ ...s, desiredGeneration: generation, bytes: images.length * IMAGE_BYTES, pulledBytes: 0, images: images.map((name) => ({ name, state: 'Pending', attempts: 0, bytes: IMAGE_BYTES })) }));
      return;
    }
    const key = `${node}/${set.metadata.name}/${generation}`;
    if (this.started.has(key) || entry?.currentGeneration === generation) return;
    this.started.add(key);
    this.pull(
      node,
      (message, n) =>
        this.update(node, set.metadata.name, (s) => ({
          ...s,
          lastFailedGeneration: generation,
          lastFailedGenerationError: message,
          pulledBytes: (s.images.length - 1) * IMAGE_BYTES,
          images: s.images.map((i, index) => (index === 0 ? { ...i, state: 'Failed', attempts: n, lastError: message } : { ...i, state: 'Pinned', attempts: 1, pulledBytes: IMAGE_BYTES })),
        }), { type: 'Degraded', status: 'True', reason: 'PullFailed', message }),
      () => this.update(node, set.metadata.name, (s) => ({ ...s, currentGeneration: generation, pulledBytes: s.images.length * IMAGE_BYTES, images: s.images.map((i) => ({ ...i, state: 'Pinned', attempts: Math.max(1, i.attempts), pulledBytes: IMAGE_BYTES })) }), { type: 'Degraded', status: 'False', reason: 'AsExpected', message: '' }),
    );
  }

  private update(node: string, set: string, change: (s: PinnedImageSetStatus) => PinnedImageSetStatus, condition?: { type: 'Degraded'; status: 'True' | 'False'; reason: string; message: string }): void {
    this.write(node, async () => {
      const path = `${AGENT_PATHS.nodePinnedImages}/${node}`;
      const fresh = await this.client.get<NodePinnedImages>(path);
      const entries = fresh.status?.pinnedImageSets ?? [];
      const current = entries.find((s) => s.name === set) ?? { name: set, desiredGeneration: 0, images: [] };
      const pinnedImageSets = [...entries.filter((s) => s.name !== set), change(current)].sort((a, b) => a.name.localeCompare(b.name));
      const conditions = mergeConditions(fresh.status?.conditions ?? [], condition ? [condition] : []);
      await this.mergePatch(`${path}/status`, { status: { pinnedImageSets, conditions } });
    });
  }
}
