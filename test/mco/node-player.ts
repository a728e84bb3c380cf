/**
 * What the MCO simulator and the agent status writer share: both play node daemons on the real
 * API server, driven by informers, writing each object's status in order, pulling for a while
 * and then succeeding or failing (and retrying) as each node's behaviour says.
 */
import { Informer } from '../../src/kube/informer.js';
import type { KubeClient } from '../../src/kube/client.js';

export interface NodeBehaviour {
  /** Time from desiredGeneration to the outcome. */
  readonly pullMs: number;
  /** Fail with this message (MCO's one error string) ... */
  readonly failWith?: string;
  /** ... for this long, retrying, then succeed; when absent, until the test behaves the node again. */
  readonly failForMs?: number;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
}

/** A condition's lastTransitionTime moves only when its status does (metav1.Condition). */
export function mergeConditions(previous: readonly Condition[], updates: ReadonlyArray<Omit<Condition, 'lastTransitionTime'>>): Condition[] {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  return [
    ...previous.filter((c) => !updates.some((u) => u.type === c.type)),
    ...updates.map((c) => ({ ...c, lastTransitionTime: previous.find((p) => p.type === c.type && p.status === c.status)?.lastTransitionTime ?? now })),
  ];
}

export abstract class NodePlayer {
  protected readonly abort = new AbortController();
  private readonly behaviours = new Map<string, NodeBehaviour>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Writes per object, in order: one controller, not racing itself. */
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly watched: Informer[] = [];
  readonly errors: Error[] = [];

  protected constructor(
    protected readonly client: KubeClient,
    private readonly defaultBehaviour: NodeBehaviour,
  ) {}

  /** Look at every watched object and write what the daemons would. */
  protected abstract reconcile(): void;

  protected informer(path: string): Informer {
    const informer = new Informer(this.client, path, { onChange: () => this.reconcile() });
    this.watched.push(informer);
    return informer;
  }

  /** Lists every informer, then reconciles once; watches run until stop(). */
  protected async run(): Promise<this> {
    for (const informer of this.watched) await informer.start(this.abort.signal);
    this.reconcile();
    return this;
  }

  protected behaviourOf(node: string): NodeBehaviour {
    return this.behaviours.get(node) ?? this.defaultBehaviour;
  }

  behave(node: string, behaviour: NodeBehaviour): void {
    this.behaviours.set(node, behaviour);
  }

  stop(): void {
    this.abort.abort();
    for (const timer of this.timers) clearTimeout(timer);
  }

  /** One pull of one generation: after each pull time, fail (and try again) or succeed once. */
  protected pull(node: string, onFailure: (message: string, attempt: number) => void, onSuccess: () => void): void {
    const since = Date.now();
    // The behaviour is read at each attempt: a test ends a failure by behaving again.
    const attempt = (n: number) => {
      const behaviour = this.behaviourOf(node);
      const failing = behaviour.failWith !== undefined && (behaviour.failForMs === undefined || Date.now() - since < behaviour.failForMs);
      if (!failing) return onSuccess();
      onFailure(behaviour.failWith!, n);
      this.after(behaviour.pullMs, () => attempt(n + 1));
    };
    this.after(this.behaviourOf(node).pullMs, () => attempt(1));
  }

  private after(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.abort.signal.aborted) run();
    }, ms);
    this.timers.add(timer);
  }

  protected write(key: string, run: () => Promise<unknown>): void {
    const next = (this.queues.get(key) ?? Promise.resolve()).then(run).catch((error: Error) => {
      if (!this.abort.signal.aborted) this.errors.push(error);
    });
    this.queues.set(key, next);
  }

  protected mergePatch(path: string, body: object): Promise<unknown> {
    return this.client.request('PATCH', path, { body, contentType: 'application/merge-patch+json' });
  }
}
