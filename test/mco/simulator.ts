/**
 * The Machine Config Operator for tests, on the real API server with OpenShift's own CRDs,
 * behaving as MCO's source does (FACTS §3; machine-config-operator pkg/daemon/pinned_image_set.go),
 * with its timings divided by `timeScale`, never changed in kind:
 * - the controller lists each pool's PinnedImageSets (by `machineConfigSelector`) in the pool's
 *   `spec.pinnedImageSets`, keeps one MachineConfigNode per node, and the pool's
 *   `poolSynchronizersStatus` (PinnedImageSets) with a PinnedImageSetsDegraded condition;
 * - each node's daemon runs ONE sync for all sets of its pool: the disk check inspects every image
 *   not present and not sized yet, one at a time; then the images are queued through a channel of
 *   10 to the node's pull workers (5, or 1 on a master; 5 tries per image; a 1 s pause after every
 *   image on every node), the deadline (2 minutes) checked only while queueing;
 * - a sync that misses its deadline writes `requeue: prefetching images incomplete after
 *   timeout: 2m0s` as the failure of every unfinished set and is requeued rate-limited, as every
 *   failed sync is; the workers pull on meanwhile; the next sync's apply leaves the failure fields
 *   out (server-side apply drops them) while PinnedImageSetsDegraded stays True until a sync
 *   completes; pulled images are kept across syncs;
 * - any sync error (a bad image in any set, a node-wide error) is written into EVERY unfinished
 *   set of the pool;
 * - status is written by server-side apply, field manager `machine-config-operator`, with
 *   `status.configVersion`; at v1alpha1 (4.16) unfinished entries carry zero generations.
 */
import { setMaxListeners } from 'node:events';
import type { Informer } from '../../src/kube/informer.js';
import { matchesSelector, type KubeClient, type KubeObject, type LabelSelector } from '../../src/kube/client.js';
import { MCO_GROUP, MCO_V1, mcoPaths, type McoVersions } from '../../src/cluster/mco/backend.js';
import { mergeConditions, NodePlayer, type Condition, type NodeBehaviour as BaseBehaviour } from './node-player.js';

export interface NodeBehaviour extends BaseBehaviour {
  /** Time of one image's pull (default: `pullMs` spread over the sync's images). */
  readonly imageMs?: number;
  /** Images whose every pull fails (a registry error past the manifest): 5 tries, then the sync fails naming it. */
  readonly badImages?: readonly string[];
  /**
   * Images the registry does not have: the daemon's disk check runs `podman manifest inspect` on
   * every image not yet present before any pull, and fails there (podman's output discarded),
   * with `failed to execute podman manifest inspect for "<image>": exit status 125`.
   */
  readonly missingImages?: readonly string[];
  /** One `podman manifest inspect` of the disk check (default: 400 ms scaled). */
  readonly inspectMs?: number;
}

export interface McoSimulatorOptions {
  /** The versions the cluster serves: v1 (4.19+) or v1alpha1 (4.16-4.18). */
  readonly versions?: McoVersions;
  /** MCO's durations (2 min sync deadline, 1 s pause per image, 0.4 s per inspect, 1-8 s pull retries) divided by this. */
  readonly timeScale?: number;
}

/** The PinnedImageSetsDegraded message MCO's daemon writes on every failure from 4.19 (pkg/daemon/pinned_image_set.go). */
const GENERIC_DEGRADED = 'One or more PinnedImageSet is experiencing an error. See PinnedImageSet list for more details.';

/** MCO's own constants (pkg/daemon/pinned_image_set.go, 4.16-4.21; cmd/machine-config-daemon/start.go). */
const PREFETCH_TIMEOUT_MS = 120_000;
const PREFETCH_TIMEOUT_TEXT = '2m0s';
/** The pause after every image, on every worker of every node (defaultPrefetchThrottleDuration). */
const THROTTLE_MS = 1_000;
const WORKERS = 5;
const CHANNEL = 10;
/** One `podman manifest inspect` (FACTS §3: 190 tiny images on a master took 4 min 37 s). */
const INSPECT_MS = 400;
const PULL_TRIES = 5;
/** wait.Backoff{Duration: 1s, Factor: 2, Cap: 10s}: sleeps between the 5 tries. */
const PULL_RETRY_SLEEPS_MS = [1_000, 2_000, 4_000, 8_000];
const FIELD_MANAGER = 'machine-config-operator';
/**
 * A sync that returns an error is requeued rate-limited (workqueue.DefaultControllerRateLimiter:
 * 5 ms doubling per requeue, capped at 1000 s), up to 15 requeues (maxRetriesController), then
 * once more after a minute. A sync returns the error of its last status write ("All pinned image
 * sets complete"), so a status the API server did not take is written again.
 */
const REQUEUE_BASE_MS = 5;
const MAX_REQUEUES = 15;
const REQUEUE_AFTER_MAX_MS = 60_000;

interface Pool extends KubeObject {
  spec: { nodeSelector?: LabelSelector; machineConfigSelector?: LabelSelector; pinnedImageSets?: Array<{ name: string }> };
  status?: Record<string, unknown>;
}

interface PinnedImageSet extends KubeObject {
  spec: { pinnedImages: Array<{ name: string }> };
}

interface SetStatus {
  name: string;
  desiredGeneration?: number;
  currentGeneration?: number;
  lastFailedGeneration?: number;
  lastFailedGenerationError?: string;
  lastFailedGenerationErrors?: string[];
}

interface MachineConfigNode extends KubeObject {
  status?: { pinnedImageSets?: SetStatus[]; conditions?: Condition[] };
}

/** One node's daemon: what it has pulled and finished, and its running sync. */
interface Daemon {
  /** Images present in the node's storage. */
  readonly pulled: Set<string>;
  /** The daemon's cache: images marked pulled (even when their pull failed), images whose size it has. */
  readonly marked: Set<string>;
  readonly sized: Set<string>;
  /** The prefetch channel (10 places) and its workers (persistent, 5 or 1 on a master). */
  readonly channel: Task[];
  readonly waiting: Array<() => void>;
  readonly room: Array<() => void>;
  workers?: number;
  /** Set uid → the generation whose images are all pulled (MCO's cache). */
  readonly complete: Map<string, number>;
  conditions: Condition[];
  /** The sets (name, uid, generation) the running or last sync started with. */
  started?: string;
  sync?: AbortController;
  /** First sync of a failing behaviour, for `failForMs`. */
  failingSince?: number;
  /** Requeues since the last sync that returned no error (the work queue's NumRequeues). */
  requeues?: number;
}

export const DEFAULT_POOLS = ['master', 'worker'].map((role) => ({
  apiVersion: `${MCO_GROUP}/v1`,
  kind: 'MachineConfigPool',
  metadata: { name: role },
  spec: {
    nodeSelector: { matchLabels: { [`node-role.kubernetes.io/${role}`]: '' } },
    machineConfigSelector: { matchLabels: { [`${MCO_GROUP}/role`]: role } },
  },
}));

export class McoSimulator extends NodePlayer {
  private readonly paths: ReturnType<typeof mcoPaths>;
  private readonly informers: Record<'sets' | 'pools' | 'nodes' | 'mcns', Informer>;
  private readonly daemons = new Map<string, Daemon>();
  private readonly poolStatus = new Map<string, string>();
  /** Syncs that missed their deadline, per node. */
  readonly deadlinesMissed = new Map<string, number>();
  /** Per node: when its first sync started, and when its last sync completed (epoch ms). */
  readonly timeline = new Map<string, { firstSync: number; completed?: number }>();

  private constructor(
    client: KubeClient,
    defaultBehaviour: NodeBehaviour,
    private readonly versions: McoVersions,
    private readonly timeScale: number,
  ) {
    super(client, defaultBehaviour);
    // Every pull worker of every node sleeps on the simulator's signal at once.
    setMaxListeners(0, this.abort.signal);
    this.paths = mcoPaths(versions);
    this.informers = { sets: this.informer(this.paths.pinnedImageSets), pools: this.informer(this.paths.machineConfigPools), nodes: this.informer(this.paths.nodes), mcns: this.informer(this.paths.machineConfigNodes) };
  }

  static async start(client: KubeClient, defaultBehaviour: NodeBehaviour = { pullMs: 300 }, options: McoSimulatorOptions = {}): Promise<McoSimulator> {
    const versions = options.versions ?? MCO_V1;
    for (const pool of DEFAULT_POOLS) {
      if (!(await client.find(`${mcoPaths(versions).machineConfigPools}/${pool.metadata.name}`))) await client.request('POST', mcoPaths(versions).machineConfigPools, { body: pool });
    }
    return new McoSimulator(client, defaultBehaviour, versions, options.timeScale ?? 10).run();
  }

  override behave(node: string, behaviour: NodeBehaviour): void {
    super.behave(node, behaviour);
  }

  override stop(): void {
    for (const daemon of this.daemons.values()) daemon.sync?.abort();
    super.stop();
  }

  protected reconcile(): void {
    if (this.abort.signal.aborted) return;
    const sets = [...this.informers.sets.items.values()] as PinnedImageSet[];
    const pools = [...this.informers.pools.items.values()] as Pool[];
    for (const pool of pools) this.controlPool(pool, sets);
    for (const node of this.informers.nodes.items.values()) {
      const name = node.metadata.name;
      const pool = pools.find((p) => p.metadata.name === (node.metadata.labels?.['node-role.kubernetes.io/master'] !== undefined ? 'master' : 'worker'));
      if (!pool) continue;
      if (!this.informers.mcns.items.has(name)) {
        this.createMachineConfigNode(name, pool.metadata.name);
        continue;
      }
      // The daemon works from the pool's list, which the controller fills: nothing before it.
      const poolSets = (pool.spec.pinnedImageSets ?? []).flatMap((ref) => sets.filter((s) => s.metadata.name === ref.name));
      if (poolSets.length === 0) continue;
      const started = JSON.stringify(poolSets.map((s) => [s.metadata.name, uidOf(s), s.metadata.generation]));
      const daemon = this.daemonOf(name);
      if (daemon.started !== started) this.startSync(name, pool.metadata.name, poolSets, started);
    }
  }

  /** The controller's part: a pool's set list, and its PinnedImageSets synchronizer status. */
  private controlPool(pool: Pool, sets: readonly PinnedImageSet[]): void {
    const names = sets.filter((s) => pool.spec.machineConfigSelector && matchesSelector(s.metadata.labels, pool.spec.machineConfigSelector)).map((s) => ({ name: s.metadata.name })).sort((a, b) => a.name.localeCompare(b.name));
    if (JSON.stringify(pool.spec.pinnedImageSets ?? []) !== JSON.stringify(names)) {
      this.write(`pool/${pool.metadata.name}`, () => this.mergePatch(`${this.paths.machineConfigPools}/${pool.metadata.name}`, { spec: { pinnedImageSets: names } }));
    }
    const members = [...this.informers.nodes.items.values()].filter((n) => pool.spec.nodeSelector && matchesSelector(n.metadata.labels, pool.spec.nodeSelector));
    const mcns = members.map((n) => this.informers.mcns.items.get(n.metadata.name) as MachineConfigNode | undefined);
    // A node is updated when every entry of its MCN has current == desired > 0 (MCO's controller).
    const updated = mcns.filter((m) => (m?.status?.pinnedImageSets ?? []).length > 0 && m!.status!.pinnedImageSets!.every((e) => (e.desiredGeneration ?? 0) > 0 && e.currentGeneration === e.desiredGeneration)).length;
    const degraded = mcns.filter((m) => m?.status?.conditions?.some((c) => c.type === 'PinnedImageSetsDegraded' && c.status === 'True')).length;
    const synchronizer = { poolSynchronizerType: 'PinnedImageSets', machineCount: members.length, updatedMachineCount: updated, readyMachineCount: updated, availableMachineCount: updated, unavailableMachineCount: degraded, observedGeneration: pool.metadata.generation ?? 1 };
    const condition = degraded > 0
      ? { type: 'PinnedImageSetsDegraded', status: 'True' as const, reason: 'PinnedImageSetsDegraded', message: `${degraded} nodes are reporting degraded status on image pinning` }
      : { type: 'PinnedImageSetsDegraded', status: 'False' as const, reason: '', message: '' };
    const key = JSON.stringify([synchronizer, condition]);
    if (this.poolStatus.get(pool.metadata.name) === key) return;
    this.poolStatus.set(pool.metadata.name, key);
    // The condition's previous transition time comes from the watched pool; no read before the write.
    const previous = (pool.status?.['conditions'] ?? []) as Condition[];
    this.write(`pool-status/${pool.metadata.name}`, async () => {
      await this.client.apply(`${this.paths.machineConfigPools}/${pool.metadata.name}/status`, {
        apiVersion: `${MCO_GROUP}/v1`,
        kind: 'MachineConfigPool',
        metadata: { name: pool.metadata.name },
        status: { poolSynchronizersStatus: [synchronizer], conditions: mergeConditions(previous.filter((c) => c.type === 'PinnedImageSetsDegraded'), [condition]) },
      } as KubeObject, { fieldManager: FIELD_MANAGER });
    });
  }

  private createMachineConfigNode(name: string, pool: string): void {
    this.write(`mcn/${name}`, async () => {
      if (this.informers.mcns.items.has(name)) return;
      await this.client.request('POST', this.paths.machineConfigNodes, {
        body: { apiVersion: `${MCO_GROUP}/${this.versions.machineConfigNodes}`, kind: 'MachineConfigNode', metadata: { name }, spec: { node: { name }, pool: { name: pool }, configVersion: { desired: `rendered-${pool}-0` } } },
      }).catch((error: { status?: number }) => { if (error.status !== 409) throw error; });
    });
  }

  private daemonOf(node: string): Daemon {
    let daemon = this.daemons.get(node);
    if (!daemon) this.daemons.set(node, (daemon = { pulled: new Set(), marked: new Set(), sized: new Set(), channel: [], waiting: [], room: [], complete: new Map(), conditions: [] }));
    return daemon;
  }

  /** A new sync cancels the running one (MCO's resetWorkload), as a set or pool change does. */
  private startSync(node: string, pool: string, sets: readonly PinnedImageSet[], started: string): void {
    const daemon = this.daemonOf(node);
    daemon.started = started;
    daemon.sync?.abort();
    const sync = new AbortController();
    daemon.sync = sync;
    this.runSync(node, pool, sets, daemon, sync.signal).catch((error: Error) => {
      if (!sync.signal.aborted && !this.abort.signal.aborted) this.errors.push(error);
    });
  }

  private async runSync(node: string, pool: string, sets: readonly PinnedImageSet[], daemon: Daemon, signal: AbortSignal): Promise<void> {
    const behaviour = this.behaviourOf(node) as NodeBehaviour;
    const deadline = Date.now() + PREFETCH_TIMEOUT_MS / this.timeScale;
    if (!this.timeline.has(node)) this.timeline.set(node, { firstSync: Date.now() });
    await this.applyStatus(node, pool, sets, daemon, { type: 'PinnedImageSetsProgressing', status: 'True', reason: 'ImagePrefetch', message: `node is prefetching images: ${node}` });

    let error: string | undefined;
    const failing = behaviour.failWith !== undefined && (behaviour.failForMs === undefined || Date.now() - (daemon.failingSince ??= Date.now()) < behaviour.failForMs);
    if (failing) {
      await sleep(behaviour.pullMs, signal);
      error = behaviour.failWith;
    } else {
      daemon.failingSince = undefined;
      error = await this.prefetch(node, sets, behaviour, daemon, deadline, signal);
    }
    if (signal.aborted) return;
    if (error === undefined) {
      for (const set of sets) daemon.complete.set(uidOf(set), set.metadata.generation ?? 1);
      this.timeline.get(node)!.completed = Date.now();
      const written =
        (await this.applyStatus(node, pool, sets, daemon, { type: 'PinnedImageSetsProgressing', status: 'False', reason: 'AsExpected', message: 'All pinned image sets complete' })) &&
        (await this.applyStatus(node, pool, sets, daemon, { type: 'PinnedImageSetsDegraded', status: 'False', reason: 'AsExpected', message: 'All is good' }));
      if (written) {
        daemon.requeues = 0;
        return;
      }
      // The status write failed (the API server down, say): the sync returns its error and is requeued.
      return this.requeue(node, pool, sets, daemon, signal);
    }
    if (error.startsWith('requeue:')) this.deadlinesMissed.set(node, (this.deadlinesMissed.get(node) ?? 0) + 1);
    // The condition's message: the error itself on 4.16-4.18 (v1alpha1), a generic text from 4.19 (v1), the error being in the entries.
    const message = this.versions.machineConfigNodes === 'v1alpha1' ? error : GENERIC_DEGRADED;
    await this.applyStatus(node, pool, sets, daemon, { type: 'PinnedImageSetsDegraded', status: 'True', reason: 'PrefetchFailed', message }, error);
    await this.requeue(node, pool, sets, daemon, signal);
  }

  /** The work queue's AddRateLimited: 5 ms doubling per requeue, 15 times, then once after a minute and from 5 ms again. */
  private async requeue(node: string, pool: string, sets: readonly PinnedImageSet[], daemon: Daemon, signal: AbortSignal): Promise<void> {
    const requeues = daemon.requeues ?? 0;
    daemon.requeues = requeues < MAX_REQUEUES ? requeues + 1 : 0;
    await sleep((requeues < MAX_REQUEUES ? REQUEUE_BASE_MS * 2 ** requeues : REQUEUE_AFTER_MAX_MS) / this.timeScale, signal);
    if (!signal.aborted && daemon.sync?.signal === signal) this.startSync(node, pool, sets, daemon.started!);
  }

  /**
   * One sync's prefetch as the daemon's: per set, the disk check (`podman manifest inspect` of
   * each image not present whose size is not cached, one at a time, under the deadline), then
   * every image not marked pulled is queued to the node's workers through a channel of 10, the
   * deadline checked only between queueings; then the sync waits for its images however long they
   * take, and checks every image is present (a failed pull is marked pulled too: the next sync
   * finds it missing, "image removed during sync", and clears the cache).
   */
  private async prefetch(node: string, sets: readonly PinnedImageSet[], behaviour: NodeBehaviour, daemon: Daemon, deadline: number, signal: AbortSignal): Promise<string | undefined> {
    const imagesOf = (set: PinnedImageSet) => set.spec.pinnedImages.map((i) => i.name);
    for (const set of sets) {
      for (const image of imagesOf(set)) {
        if (daemon.marked.has(image) || daemon.pulled.has(image) || daemon.sized.has(image)) continue;
        if (Date.now() >= deadline) return `failed to execute podman manifest inspect for "${image}": signal: killed`;
        await sleep(behaviour.inspectMs ?? INSPECT_MS / this.timeScale, signal);
        if (signal.aborted) return undefined;
        if (behaviour.missingImages?.includes(image)) return `failed to execute podman manifest inspect for "${image}": exit status 125`;
        daemon.sized.add(image);
      }
    }
    const unfinished = sets.filter((s) => daemon.complete.get(uidOf(s)) !== s.metadata.generation);
    const count = new Set(unfinished.flatMap(imagesOf)).size;
    const monitor = newMonitor();
    for (const set of unfinished) {
      for (const image of imagesOf(set)) {
        if (daemon.marked.has(image)) continue;
        if (Date.now() >= deadline) return `requeue: prefetching images incomplete after timeout: ${PREFETCH_TIMEOUT_TEXT}`;
        await this.enqueue(node, daemon, { image, monitor, imageMs: behaviour.imageMs ?? behaviour.pullMs / Math.max(1, count) }, signal);
        if (signal.aborted) return undefined;
      }
    }
    await monitor.done();
    if (monitor.error !== undefined) return monitor.error;
    for (const image of [...new Set(sets.flatMap(imagesOf))].sort()) {
      if (!daemon.pulled.has(image)) {
        daemon.marked.clear();
        daemon.sized.clear();
        return `failed to pull image: image removed during sync: ${image}`;
      }
    }
    return undefined;
  }

  /** Puts a task in the node's channel (10 places), starting its workers the first time. */
  private async enqueue(node: string, daemon: Daemon, task: Task, signal: AbortSignal): Promise<void> {
    if (!daemon.workers) {
      const master = this.informers.nodes.items.get(node)?.metadata.labels?.['node-role.kubernetes.io/master'] !== undefined;
      daemon.workers = master ? 1 : WORKERS;
      for (let i = 0; i < daemon.workers; i++) {
        this.worker(node, daemon).catch((error: Error) => {
          if (!this.abort.signal.aborted) this.errors.push(error);
        });
      }
    }
    task.monitor.add();
    while (daemon.channel.length >= CHANNEL && !signal.aborted) await new Promise<void>((resolve) => daemon.room.push(resolve));
    daemon.channel.push(task);
    daemon.waiting.shift()?.();
  }

  /** A pull worker: ImageStatus, else the pull (5 tries for a bad image); marked pulled either way; a 1 s pause after every image. */
  private async worker(node: string, daemon: Daemon): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      const task = daemon.channel.shift();
      if (!task) {
        await new Promise<void>((resolve) => daemon.waiting.push(resolve));
        continue;
      }
      for (const wake of daemon.room.splice(0)) wake();
      const behaviour = this.behaviourOf(node) as NodeBehaviour;
      if (!daemon.pulled.has(task.image)) {
        const bad = behaviour.badImages?.includes(task.image) ?? false;
        await sleep(bad ? PULL_TRIES * task.imageMs + PULL_RETRY_SLEEPS_MS.reduce((a, b) => a + b, 0) / this.timeScale : task.imageMs, signal);
        if (bad) task.monitor.error = `failed to pull image "${task.image}" (${PULL_TRIES} tries): timed out waiting for the condition: rpc error: code = Unknown desc = reading manifest ${task.image.split('@')[1]} in ${task.image.split('@')[0]}: manifest unknown`;
        else daemon.pulled.add(task.image);
      }
      daemon.marked.add(task.image);
      task.monitor.finish();
      await sleep(THROTTLE_MS / this.timeScale, signal);
    }
  }

  /**
   * One status apply, as MCO's upgrademonitor writes it: every set of the pool, finished ones
   * with currentGeneration, unfinished ones with the error when there is one; fields left out
   * are dropped by server-side apply.
   */
  private async applyStatus(node: string, pool: string, sets: readonly PinnedImageSet[], daemon: Daemon, condition: Omit<Condition, 'lastTransitionTime'>, error?: string): Promise<boolean> {
    daemon.conditions = mergeConditions(daemon.conditions, [condition]);
    const alpha = this.versions.machineConfigNodes === 'v1alpha1';
    const pinnedImageSets = sets.map((set): SetStatus => {
      const generation = set.metadata.generation ?? 1;
      const entry: SetStatus = { name: set.metadata.name, desiredGeneration: generation };
      if (daemon.complete.get(uidOf(set)) === generation) return { ...entry, currentGeneration: generation, ...(alpha ? { lastFailedGeneration: 0 } : {}) };
      if (error !== undefined) return { ...entry, ...(alpha ? { currentGeneration: 0, lastFailedGeneration: generation, lastFailedGenerationErrors: [error] } : { lastFailedGeneration: generation, lastFailedGenerationError: error }) };
      return alpha ? { ...entry, currentGeneration: 0, lastFailedGeneration: 0 } : entry;
    });
    return new Promise<boolean>((resolve) => this.write(`mcn/${node}`, async () => {
      let written = false;
      try {
        await this.client.apply(`${this.paths.machineConfigNodes}/${node}/status`, {
          apiVersion: `${MCO_GROUP}/${this.versions.machineConfigNodes}`,
          kind: 'MachineConfigNode',
          metadata: { name: node },
          status: { configVersion: { desired: `rendered-${pool}-0`, current: `rendered-${pool}-0` }, conditions: daemon.conditions, pinnedImageSets },
        } as KubeObject, { fieldManager: FIELD_MANAGER });
        written = true;
      } finally {
        resolve(written);
      }
    }));
  }
}

const uidOf = (object: KubeObject): string => object.metadata['uid'] as string;

interface Monitor {
  error?: string;
  add(): void;
  finish(): void;
  done(): Promise<void>;
}

/** prefetchMonitor: a wait group of one sync's tasks, keeping the last error. */
function newMonitor(): Monitor {
  let pending = 0;
  let wake: (() => void) | undefined;
  return {
    add: () => void pending++,
    finish: () => {
      if (--pending === 0) wake?.();
    },
    done: () => (pending === 0 ? Promise.resolve() : new Promise<void>((resolve) => (wake = resolve))),
  };
}

interface Task {
  readonly image: string;
  readonly monitor: Monitor;
  readonly imageMs: number;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

export type { MachineConfigNode };
