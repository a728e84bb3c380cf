/**
 * The agent's view of the Kubernetes API, through the project's own KubeClient and Informer (no
 * @kubernetes/client-node: an agent on every node cannot afford its memory): informers over
 * PinnedImageSets and its own Node, and its NodePinnedImages status, written only through the
 * status subresource (the object is created when missing).
 *
 * Changes are reported only once both informers have listed and the Node has been seen: a pass
 * started from the sets' first events alone would not know the node's labels yet. A Node update
 * is reported only when its labels change (the kubelet rewrites its status every few seconds,
 * which selects no set differently). A set change that only stamps a new verify request
 * (`prestage.dev/verify-requested`) is reported to `onVerify`, not as a change: answering it is a
 * CRI ListImages, not a pass.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERIFY_REQUESTED_ANNOTATION, VERSION, type NodePinnedImages, type NodePinnedImagesStatus, type PinnedImageSet } from '../api/prestage.js';
import { ClusterError } from '../errors.js';
import { Informer, withoutFieldManagers } from '../kube/informer.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
import { pullSecretOf, type PullSecret } from '../registry/credentials.js';
import type { AgentCluster } from './agent-cluster.js';

const NODE_PINNED_IMAGES_PATH = `/apis/${GROUP}/${VERSION}/${NODE_PINNED_IMAGES}`;
/** The first list is retried this often at most (with jitter) while the API server cannot answer. */
const START_BACKOFF_MS = { first: 500, max: 30_000 };

interface SecretObject extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}

export class KubeAgentCluster implements AgentCluster {
  private readonly sets: Informer<KubeObject>;
  private readonly node: Informer<KubeObject>;
  private readonly stopping = new AbortController();
  private setsListed = false;
  private nodeListed = false;
  /** The labels last reported: a Node change that keeps them starts no pass. */
  private reportedLabels: string | undefined;
  private notifyQueued = false;
  /** Readers of every change of the sets, their status included (the set-status writer). */
  private readonly setsListeners = new Set<() => void>();
  private readonly whenSetsListed: Promise<void>;
  private markSetsListed: () => void = () => undefined;
  /** What was last reported of the sets: all but their verify requests (a digest: the sets' JSON is 100+ KB at 1000 images), and the requests alone. */
  private reportedSets: string | undefined;
  private reportedRequests: string | undefined;
  /** Changes not reported yet (kept while not loaded). */
  private changePending = false;
  private verifyPending = false;
  private readonly whenLoaded: Promise<void>;
  private markLoaded: () => void = () => undefined;
  /** The NodePinnedImages as the last status write left it, without its status. */
  private written: NodePinnedImages | undefined;

  constructor(
    private readonly client: KubeClient,
    private readonly nodeName: string,
    private readonly log: Logger,
    private readonly onChange: () => void,
    /** The agent's own namespace: the Secrets sets name, and its Events. */
    private readonly namespace = 'prestage',
    /** A set's verify request changed: answer it (`NodeAgent.verify`). */
    private readonly onVerify: () => void = () => undefined,
  ) {
    this.whenLoaded = new Promise((resolve) => (this.markLoaded = resolve));
    this.whenSetsListed = new Promise((resolve) => (this.markSetsListed = resolve));
    const onRetry = (what: string) => (error: Error, delayMs: number) => log.warn({ err: error.message, delayMs }, `${what} watch failed; retrying`);
    this.sets = new Informer(client, `/apis/${GROUP}/${VERSION}/${PINNED_IMAGE_SETS}`, {
      onChange: () => {
        this.setsListed = true;
        this.markSetsListed();
        const { sets, requests } = this.setsKeys();
        if (sets !== this.reportedSets) this.changePending = true;
        if (requests !== this.reportedRequests) this.verifyPending = true;
        this.reportedSets = sets;
        this.reportedRequests = requests;
        this.notify();
        for (const listener of this.setsListeners) listener();
      },
      onRetry: onRetry('PinnedImageSet'),
      // The cache holds every set: their specs, not their field managers.
      slim: withoutFieldManagers,
    });
    this.node = new Informer(client, `/api/v1/nodes?fieldSelector=${encodeURIComponent(`metadata.name=${nodeName}`)}`, {
      onChange: () => {
        this.nodeListed = true;
        const labels = this.nodeLabels();
        const key = labels === undefined ? undefined : JSON.stringify(Object.entries(labels).sort());
        if (key === this.reportedLabels) return;
        this.reportedLabels = key;
        this.changePending = true;
        this.notify();
      },
      onRetry: onRetry('Node'),
      // Labels decide which sets select the node; its status (rewritten by the kubelet) is not kept.
      slim: (node) => ({ metadata: { name: node.metadata.name, uid: node.metadata.uid, resourceVersion: node.metadata.resourceVersion, labels: node.metadata.labels ?? {} } }),
    });
  }

  /** Lists both collections (retried with jittered backoff while the API server cannot answer), then watches them. */
  async start(): Promise<void> {
    await Promise.all([this.startInformer(this.sets, 'PinnedImageSets'), this.startInformer(this.node, `Node ${this.nodeName}`)]);
  }

  async stop(): Promise<void> {
    this.stopping.abort();
  }

  /** Both informers have listed and this node's Node object is known: a pass can run. */
  loaded(): boolean {
    return this.setsListed && this.nodeListed && this.node.items.has(this.nodeName);
  }

  /** Resolves once loaded() is first true (the change callback has been called by then). */
  untilLoaded(): Promise<void> {
    return this.whenLoaded;
  }

  /** What loaded() still waits for, for a log line. */
  waitingFor(): string {
    const missing = [
      ...(this.setsListed ? [] : ['the PinnedImageSets list']),
      ...(this.nodeListed ? (this.node.items.has(this.nodeName) ? [] : [`Node ${this.nodeName} (not in the cluster)`]) : [`Node ${this.nodeName}`]),
    ];
    return missing.join(' and ') || 'nothing';
  }

  pinnedImageSets(): readonly PinnedImageSet[] {
    return [...this.sets.items.values()] as unknown as PinnedImageSet[];
  }

  /** Resolves once the sets are listed (whether or not this node's Node is known). */
  untilSetsListed(): Promise<void> {
    return this.whenSetsListed;
  }

  /** Calls `listener` on every change of the sets once listed, their status included; returns its removal. */
  onSetsChange(listener: () => void): () => void {
    this.setsListeners.add(listener);
    return () => this.setsListeners.delete(listener);
  }

  nodeLabels(): Readonly<Record<string, string>> | undefined {
    return this.node.items.get(this.nodeName)?.metadata.labels;
  }

  async readPullSecret(name: string): Promise<PullSecret> {
    const source = `pull secret ${this.namespace}/${name}`;
    let secret: SecretObject;
    try {
      secret = await this.client.get<SecretObject>(`/api/v1/namespaces/${encodeURIComponent(this.namespace)}/secrets/${encodeURIComponent(name)}`);
    } catch (error) {
      const status = error instanceof KubeApiError ? error.status : 0;
      if (status === 404) throw new Error(`${source} not found: create it (type ${DOCKER_CONFIG_JSON}) in namespace ${this.namespace}`);
      // The Role names each Secret it may read (resourceNames): the grant to add, on one line.
      if (status === 403) throw new Error(`${source}: forbidden (403): the agent's Role grants get on no Secret named ${name} in ${this.namespace}; grant it with prestage install --pull-secret-name ${name} --apply`);
      throw clusterError(`cannot read ${source}`, error);
    }
    return pullSecretOfSecret(secret, source);
  }

  async readStatus(): Promise<NodePinnedImagesStatus | undefined> {
    return (await this.read())?.status;
  }

  /**
   * Writes over the object as this agent last wrote it (its resourceVersion the precondition), so
   * a write is one PUT, not a GET of the whole status and a PUT; on a conflict (someone else
   * wrote, its spec changed) or once deleted, read or create it again and retry.
   */
  async writeStatus(status: NodePinnedImagesStatus): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const current = this.written ?? (await this.read()) ?? (await this.create());
      this.written = undefined;
      try {
        const after = await this.client.request<NodePinnedImages>('PUT', `${NODE_PINNED_IMAGES_PATH}/${this.nodeName}/status`, {
          body: { apiVersion: current.apiVersion, kind: current.kind, metadata: current.metadata, spec: current.spec, status: { ...status, observedGeneration: current.metadata.generation } },
        });
        // Only what the next write needs (a PUT on /status takes no change but the status's): not
        // its status nor its field managers, which an agent's idle memory must not hold a copy of.
        const { name, uid, resourceVersion, generation } = after.metadata;
        this.written = { apiVersion: after.apiVersion, kind: after.kind, metadata: { name, uid, resourceVersion, generation }, spec: after.spec };
        return;
      } catch (error) {
        if (error instanceof KubeApiError && (error.status === 409 || error.status === 404) && attempt < 5) continue;
        throw clusterError(`cannot write the status of ${NODE_PINNED_IMAGES}/${this.nodeName}`, error);
      }
    }
  }

  /** A Warning Event about this Node, in the agent's namespace (`kubectl describe node` lists it). */
  async recordWarning(reason: string, message: string): Promise<void> {
    const now = new Date().toISOString();
    await this.client.request('POST', `/api/v1/namespaces/${encodeURIComponent(this.namespace)}/events`, {
      body: {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { generateName: `${this.nodeName}.prestage.`, namespace: this.namespace },
        involvedObject: { kind: 'Node', apiVersion: 'v1', name: this.nodeName, uid: this.node.items.get(this.nodeName)?.metadata.uid },
        type: 'Warning',
        reason,
        message: message.slice(0, 1024),
        source: { component: 'prestage-agent', host: this.nodeName },
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
  }

  /** Informer events come in bursts (a list, then its items): report once they are all in. */
  private notify(): void {
    if (this.notifyQueued) return;
    this.notifyQueued = true;
    setImmediate(() => {
      this.notifyQueued = false;
      if (this.stopping.signal.aborted || !this.loaded()) return;
      this.markLoaded();
      const [change, verify] = [this.changePending, this.verifyPending];
      this.changePending = this.verifyPending = false;
      if (change) this.onChange();
      if (verify) this.onVerify();
    });
  }

  /**
   * The sets as a pass sees them (all but the verify annotation), and their verify requests: a
   * new request alone must not start a pass (with 1000 nodes, a verify would be 1000 passes).
   */
  private setsKeys(): { sets: string; requests: string } {
    const sets: unknown[] = [];
    const requests: string[] = [];
    for (const set of [...this.sets.items.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) {
      const { [VERIFY_REQUESTED_ANNOTATION]: request, ...annotations } = set.metadata.annotations ?? {};
      // Not its status: the set-status writer rewrites it as nodes report, and no pass reads it.
      const { metadata, status: _status, ...rest } = set;
      sets.push([metadata.name, metadata.uid, metadata.generation, metadata.labels, annotations, metadata['deletionTimestamp'], rest]);
      if (request !== undefined) requests.push(`${metadata.name}/${metadata.uid}=${request}`);
    }
    return { sets: createHash('sha256').update(JSON.stringify(sets)).digest('base64'), requests: requests.join('\n') };
  }

  private async startInformer(informer: Informer<KubeObject>, what: string): Promise<void> {
    for (let delay = START_BACKOFF_MS.first; ; delay = Math.min(delay * 2, START_BACKOFF_MS.max)) {
      try {
        await informer.start(this.stopping.signal);
        return;
      } catch (error) {
        if (this.stopping.signal.aborted) return;
        // Fatal for input the agent cannot fix by waiting (RBAC, a missing CRD): say so and retry all the same.
        const wait = delay / 2 + Math.random() * (delay / 2);
        this.log.warn({ err: (error as Error).message, delayMs: Math.round(wait) }, `cannot list ${what}; retrying`);
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  private async read(): Promise<NodePinnedImages | undefined> {
    try {
      return await this.client.find<NodePinnedImages>(`${NODE_PINNED_IMAGES_PATH}/${this.nodeName}`);
    } catch (error) {
      throw clusterError(`cannot read ${NODE_PINNED_IMAGES}/${this.nodeName}`, error);
    }
  }

  private async create(): Promise<NodePinnedImages> {
    const body: NodePinnedImages = { apiVersion: API_VERSION, kind: 'NodePinnedImages', metadata: { name: this.nodeName }, spec: { nodeName: this.nodeName } };
    try {
      return await this.client.request<NodePinnedImages>('POST', NODE_PINNED_IMAGES_PATH, { body });
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 409) return (await this.read()) as NodePinnedImages;
      throw clusterError(`cannot create ${NODE_PINNED_IMAGES}/${this.nodeName}`, error);
    }
  }
}

/** KubeApiError messages already say method, path, status and reason: keep one line. */
function clusterError(what: string, error: unknown): ClusterError {
  return new ClusterError(`${what}: ${(error as Error).message}`.replace(/\s+/g, ' '), { cause: error });
}

const DOCKER_CONFIG_JSON = 'kubernetes.io/dockerconfigjson';
const DOCKER_CFG = 'kubernetes.io/dockercfg';

/**
 * The credentials of an image pull Secret, as the kubelet reads `imagePullSecrets`:
 * `.dockerconfigjson` ({"auths": {...}}) or the legacy `.dockercfg` (the auths map alone).
 * Errors name the Secret and what is wrong, never its content.
 */
export function pullSecretOfSecret(secret: { type?: string; data?: Record<string, string> }, source: string): PullSecret {
  const key = secret.type === DOCKER_CONFIG_JSON ? '.dockerconfigjson' : secret.type === DOCKER_CFG ? '.dockercfg' : undefined;
  if (!key) throw new Error(`${source} is of type ${secret.type ?? 'Opaque'}; want ${DOCKER_CONFIG_JSON} (kubectl create secret docker-registry)`);
  const encoded = secret.data?.[key];
  if (!encoded) throw new Error(`${source} has no ${key} key`);
  let document: unknown;
  try {
    document = JSON.parse(Buffer.from(encoded, 'base64').toString('utf8'));
  } catch {
    throw new Error(`${source}: its ${key} is not JSON`);
  }
  return pullSecretOf(key === '.dockercfg' ? { auths: document } : document, source, source);
}
