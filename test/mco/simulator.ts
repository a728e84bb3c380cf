/**
 * A small Machine Config Operator for tests, on the real API server, playing MCO as FACTS §3
 * describes it: the controller lists each pool's PinnedImageSets (by the pool's
 * machineConfigSelector) in `spec.pinnedImageSets` and keeps one MachineConfigNode per node;
 * each node's daemon sets `desiredGeneration` to the set's generation, then after a delay
 * either sets `currentGeneration` (pulled and pinned) or records the failure in
 * `lastFailedGeneration`/`lastFailedGenerationError` with a `PinnedImageSetsDegraded`
 * (PrefetchFailed) condition and keeps retrying, as MCO does.
 */
import type { Informer } from '../../src/cluster/informer.js';
import { matchesSelector, type KubeClient, type KubeObject, type LabelSelector } from '../../src/cluster/kube.js';
import { MCO_PATHS } from '../../src/cluster/mco/backend.js';
import { mergeConditions, NodePlayer, type Condition, type NodeBehaviour } from './node-player.js';

export type { NodeBehaviour } from './node-player.js';

interface Pool extends KubeObject {
  spec: { nodeSelector?: LabelSelector; machineConfigSelector?: LabelSelector; pinnedImageSets?: Array<{ name: string }> };
}

interface SetStatus {
  name: string;
  desiredGeneration?: number;
  currentGeneration?: number;
  lastFailedGeneration?: number;
  lastFailedGenerationError?: string;
}

interface MachineConfigNode extends KubeObject {
  status?: { pinnedImageSets?: SetStatus[]; conditions?: Condition[] };
}

export const DEFAULT_POOLS = ['master', 'worker'].map((role) => ({
  apiVersion: 'machineconfiguration.openshift.io/v1',
  kind: 'MachineConfigPool',
  metadata: { name: role },
  spec: {
    nodeSelector: { matchLabels: { [`node-role.kubernetes.io/${role}`]: '' } },
    machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': role } },
  },
}));

export class McoSimulator extends NodePlayer {
  private readonly informers: Record<'sets' | 'pools' | 'nodes' | 'mcns', Informer>;
  /** `node/set/generation` already pulling: one pull per generation. */
  private readonly started = new Set<string>();

  private constructor(client: KubeClient, defaultBehaviour: NodeBehaviour = { pullMs: 300 }) {
    super(client, defaultBehaviour);
    this.informers = { sets: this.informer(MCO_PATHS.pinnedImageSets), pools: this.informer(MCO_PATHS.machineConfigPools), nodes: this.informer(MCO_PATHS.nodes), mcns: this.informer(MCO_PATHS.machineConfigNodes) };
  }

  static async start(client: KubeClient, defaultBehaviour?: NodeBehaviour): Promise<McoSimulator> {
    for (const pool of DEFAULT_POOLS) {
      if (!(await client.find(`${MCO_PATHS.machineConfigPools}/${pool.metadata.name}`))) await client.request('POST', MCO_PATHS.machineConfigPools, { body: pool });
    }
    return new McoSimulator(client, defaultBehaviour).run();
  }

  protected reconcile(): void {
    if (this.abort.signal.aborted) return;
    const sets = [...this.informers.sets.items.values()];
    const pools = [...this.informers.pools.items.values()] as Pool[];
    for (const pool of pools) {
      const names = sets.filter((s) => pool.spec.machineConfigSelector && matchesSelector(s.metadata.labels, pool.spec.machineConfigSelector)).map((s) => ({ name: s.metadata.name })).sort((a, b) => a.name.localeCompare(b.name));
      if (JSON.stringify(pool.spec.pinnedImageSets ?? []) !== JSON.stringify(names)) {
        this.write(`pool/${pool.metadata.name}`, () => this.mergePatch(`${MCO_PATHS.machineConfigPools}/${pool.metadata.name}`, { spec: { pinnedImageSets: names } }));
      }
    }
    for (const node of this.informers.nodes.items.values()) {
      const name = node.metadata.name;
      const pool = pools.find((p) => p.metadata.name === (node.metadata.labels?.['node-role.kubernetes.io/master'] !== undefined ? 'master' : 'worker'));
      if (!pool) continue;
      const mcn = this.informers.mcns.items.get(name) as MachineConfigNode | undefined;
      if (!mcn) {
        this.write(`mcn/${name}`, async () => {
          if (this.informers.mcns.items.has(name)) return;
          await this.client.request('POST', MCO_PATHS.machineConfigNodes, {
            body: { apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfigNode', metadata: { name }, spec: { node: { name }, pool: { name: pool.metadata.name }, configVersion: { desired: 'rendered-0' } } },
          }).catch((error: { status?: number }) => { if (error.status !== 409) throw error; });
        });
        continue;
      }
      for (const set of sets.filter((s) => pool.spec.machineConfigSelector && matchesSelector(s.metadata.labels, pool.spec.machineConfigSelector))) {
        this.daemon(name, set.metadata.name, set.metadata.generation ?? 1, mcn);
      }
    }
  }

  /** The node daemon for one set: take the new generation, then succeed or fail after the pull time. */
  private daemon(node: string, set: string, generation: number, mcn: MachineConfigNode): void {
    const entry = mcn.status?.pinnedImageSets?.find((s) => s.name === set);
    if ((entry?.desiredGeneration ?? 0) < generation) {
      this.updateSet(node, set, (s) => ({ ...s, desiredGeneration: generation }), { type: 'PinnedImageSetsProgressing', status: 'True', reason: 'ImagePrefetch', message: `pulling images of ${set}` });
      return;
    }
    const key = `${node}/${set}/${generation}`;
    if (this.started.has(key) || entry?.currentGeneration === generation) return;
    this.started.add(key);
    this.pull(
      node,
      (message) => this.updateSet(node, set, (s) => ({ ...s, lastFailedGeneration: generation, lastFailedGenerationError: message }), { type: 'PinnedImageSetsDegraded', status: 'True', reason: 'PrefetchFailed', message }),
      () => this.updateSet(node, set, (s) => ({ ...s, currentGeneration: generation }), { type: 'PinnedImageSetsDegraded', status: 'False', reason: 'AsExpected', message: '' }, { type: 'PinnedImageSetsProgressing', status: 'False', reason: 'AsExpected', message: '' }),
    );
  }

  /** Read-modify-write of one node's status from the latest cached object (after queued writes). */
  private updateSet(node: string, set: string, change: (s: SetStatus) => SetStatus, ...conditions: Array<Omit<Condition, 'lastTransitionTime'>>): void {
    this.write(`mcn/${node}`, async () => {
      const fresh = await this.client.get<MachineConfigNode>(`${MCO_PATHS.machineConfigNodes}/${node}`);
      const entries = fresh.status?.pinnedImageSets ?? [];
      const current = entries.find((s) => s.name === set) ?? { name: set };
      const pinnedImageSets = [...entries.filter((s) => s.name !== set), change(current)].sort((a, b) => a.name.localeCompare(b.name));
      await this.mergePatch(`${MCO_PATHS.machineConfigNodes}/${node}/status`, { status: { pinnedImageSets, conditions: mergeConditions(fresh.status?.conditions ?? [], conditions) } });
    });
  }
}
