/**
 * A small Machine Config Operator for tests, on the real API server, playing MCO as FACTS §3
 * describes it: the controller lists each pool's PinnedImageSets (by the pool's
 * machineConfigSelector) in `spec.pinnedImageSets` and keeps one MachineConfigNode per node;
 * each node's daemon sets `desiredGeneration` to the set's generation, then after a delay
 * either sets `currentGeneration` (pulled and pinned) or records the failure in
 * `lastFailedGeneration`/`lastFailedGenerationError` with a `PinnedImageSetsDegraded`
 * (PrefetchFailed) condition and keeps retrying, as MCO does.
 */
import { Informer } from '../../src/cluster/informer.js';
import { matchesSelector, type KubeClient, type KubeObject, type LabelSelector } from '../../src/cluster/kube.js';
import { MCO_PATHS } from '../../src/cluster/mco/backend.js';

export interface NodeBehaviour {
  /** Time from desiredGeneration to the outcome. */
  readonly pullMs: number;
  /** Fail with this message (MCO's one error string) ... */
  readonly failWith?: string;
  /** ... for this long, retrying, then succeed; forever when absent. */
  readonly failForMs?: number;
}

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

interface Condition {
  type: string;
  status: 'True' | 'False';
  reason: string;
  message: string;
  lastTransitionTime: string;
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

export class McoSimulator {
  private readonly abort = new AbortController();
  private readonly informers: Record<'sets' | 'pools' | 'nodes' | 'mcns', Informer>;
  private readonly behaviours = new Map<string, NodeBehaviour>();
  /** `node/set/generation` → when the node started on it; one pull per generation. */
  private readonly started = new Map<string, number>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Writes per object, in order: the simulator is one controller, not racing itself. */
  private readonly queues = new Map<string, Promise<unknown>>();
  readonly errors: Error[] = [];

  constructor(
    private readonly client: KubeClient,
    private readonly defaultBehaviour: NodeBehaviour = { pullMs: 300 },
  ) {
    const informer = (path: string) => new Informer(client, path, { onChange: () => this.reconcile() });
    this.informers = { sets: informer(MCO_PATHS.pinnedImageSets), pools: informer(MCO_PATHS.machineConfigPools), nodes: informer(MCO_PATHS.nodes), mcns: informer(MCO_PATHS.machineConfigNodes) };
  }

  static async start(client: KubeClient, defaultBehaviour?: NodeBehaviour): Promise<McoSimulator> {
    for (const pool of DEFAULT_POOLS) {
      if (!(await client.find(`${MCO_PATHS.machineConfigPools}/${pool.metadata.name}`))) await client.request('POST', MCO_PATHS.machineConfigPools, { body: pool });
    }
    const simulator = new McoSimulator(client, defaultBehaviour);
    for (const informer of Object.values(simulator.informers)) await informer.start(simulator.abort.signal);
    simulator.reconcile();
    return simulator;
  }

  behave(node: string, behaviour: NodeBehaviour): void {
    this.behaviours.set(node, behaviour);
  }

  stop(): void {
    this.abort.abort();
    for (const timer of this.timers) clearTimeout(timer);
  }

  private reconcile(): void {
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
    this.started.set(key, Date.now());
    const behaviour = this.behaviours.get(node) ?? this.defaultBehaviour;
    const attempt = () => {
      const failing = behaviour.failWith !== undefined && (behaviour.failForMs === undefined || Date.now() - this.started.get(key)! < behaviour.failForMs);
      if (failing) {
        this.updateSet(node, set, (s) => ({ ...s, lastFailedGeneration: generation, lastFailedGenerationError: behaviour.failWith! }), { type: 'PinnedImageSetsDegraded', status: 'True', reason: 'PrefetchFailed', message: behaviour.failWith! });
        this.after(behaviour.pullMs, attempt);
      } else {
        this.updateSet(node, set, (s) => ({ ...s, currentGeneration: generation }), { type: 'PinnedImageSetsDegraded', status: 'False', reason: 'AsExpected', message: '' }, { type: 'PinnedImageSetsProgressing', status: 'False', reason: 'AsExpected', message: '' });
      }
    };
    this.after(behaviour.pullMs, attempt);
  }

  private after(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.abort.signal.aborted) run();
    }, ms);
    this.timers.add(timer);
  }

  /** Read-modify-write of one node's status from the latest cached object (after queued writes). */
  private updateSet(node: string, set: string, change: (s: SetStatus) => SetStatus, ...conditions: Array<Omit<Condition, 'lastTransitionTime'>>): void {
    this.write(`mcn/${node}`, async () => {
      const fresh = await this.client.get<MachineConfigNode>(`${MCO_PATHS.machineConfigNodes}/${node}`);
      const entries = fresh.status?.pinnedImageSets ?? [];
      const current = entries.find((s) => s.name === set) ?? { name: set };
      const pinnedImageSets = [...entries.filter((s) => s.name !== set), change(current)].sort((a, b) => a.name.localeCompare(b.name));
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      const previous = fresh.status?.conditions ?? [];
      // A condition's lastTransitionTime moves only when its status does (metav1.Condition).
      const merged = [
        ...previous.filter((c) => !conditions.some((n) => n.type === c.type)),
        ...conditions.map((c) => ({ ...c, lastTransitionTime: previous.find((p) => p.type === c.type && p.status === c.status)?.lastTransitionTime ?? now })),
      ];
      await this.mergePatch(`${MCO_PATHS.machineConfigNodes}/${node}/status`, { status: { pinnedImageSets, conditions: merged } });
    });
  }

  private mergePatch(path: string, body: object): Promise<unknown> {
    return this.client.request('PATCH', path, { body, contentType: 'application/merge-patch+json' });
  }

  private write(key: string, run: () => Promise<unknown>): void {
    const next = (this.queues.get(key) ?? Promise.resolve()).then(run).catch((error: Error) => {
      if (!this.abort.signal.aborted) this.errors.push(error);
    });
    this.queues.set(key, next);
  }
}
