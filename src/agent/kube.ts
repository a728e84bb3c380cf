/**
 * The agent's view of the Kubernetes API: informers over PinnedImageSets and its own Node
 * (label changes re-evaluate selectors), and its NodePinnedImages status, written only through
 * the status subresource (the object is created when missing).
 *
 * Changes are reported only once both informers have listed and the Node has been seen: a pass
 * started from the sets' first events alone would not know the node's labels yet.
 */
import { ADD, CoreV1Api, CustomObjectsApi, DELETE, ERROR, ListWatch, UPDATE, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject, type V1Node, type V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION, type NodePinnedImages, type NodePinnedImagesStatus, type PinnedImageSet } from '../api/prestage.js';
import { ClusterError } from '../errors.js';
import { pullSecretOf, type PullSecret } from '../registry/credentials.js';
import type { AgentCluster } from './reconcile.js';

/** Informers restart after a dropped watch after this long. */
const RELIST_DELAY_MS = 2_000;

export class KubeAgentCluster implements AgentCluster {
  private readonly objects: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly sets: ListWatch<KubernetesObject>;
  private readonly node: ListWatch<V1Node>;
  private stopped = false;
  private setsListed = false;
  private nodeListed = false;
  private notifyQueued = false;
  private readonly whenLoaded: Promise<void>;
  private markLoaded: () => void = () => undefined;

  constructor(
    kubeConfig: KubeConfig,
    private readonly nodeName: string,
    private readonly log: Logger,
    onChange: () => void,
    /** Where the Secrets that sets name live: the agent's own namespace. */
    private readonly namespace = 'prestage',
  ) {
    this.objects = kubeConfig.makeApiClient(CustomObjectsApi);
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    const core = this.core;
    const watch = new Watch(kubeConfig);
    this.whenLoaded = new Promise((resolve) => (this.markLoaded = resolve));
    // Items are added (and ADD reported) right after a list resolves: notify once they all are.
    const notify = () => {
      if (this.notifyQueued) return;
      this.notifyQueued = true;
      setImmediate(() => {
        this.notifyQueued = false;
        if (this.stopped || !this.loaded()) return;
        this.markLoaded();
        onChange();
      });
    };
    this.sets = new ListWatch(
      `/apis/${GROUP}/${VERSION}/${PINNED_IMAGE_SETS}`,
      watch,
      async () => {
        const list = (await this.objects.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS })) as KubernetesListObject<KubernetesObject>;
        this.setsListed = true;
        notify();
        return list;
      },
      false,
    );
    const fieldSelector = `metadata.name=${nodeName}`;
    this.node = new ListWatch(
      '/api/v1/nodes',
      watch,
      async () => {
        const list = await core.listNode({ fieldSelector });
        this.nodeListed = true;
        notify();
        return list;
      },
      false,
      undefined,
      fieldSelector,
    );
    for (const informer of [this.sets, this.node] as ListWatch<KubernetesObject>[]) {
      informer.on(ADD, notify);
      informer.on(UPDATE, notify);
      informer.on(DELETE, notify);
      informer.on(ERROR, (error: unknown) => {
        if (this.stopped) return;
        this.log.warn({ err: String((error as Error)?.message ?? error) }, 'watch failed; relisting');
        setTimeout(() => {
          if (!this.stopped) void informer.start().catch(() => undefined);
        }, RELIST_DELAY_MS).unref();
      });
    }
  }

  async start(): Promise<void> {
    await Promise.all([this.sets.start(), this.node.start()]);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([this.sets.stop(), this.node.stop()]);
  }

  /** Both informers have listed and this node's Node object is known: a pass can run. */
  loaded(): boolean {
    return this.setsListed && this.nodeListed && this.node.get(this.nodeName) !== undefined;
  }

  /** Resolves once loaded() is first true (the change callback has been called by then). */
  untilLoaded(): Promise<void> {
    return this.whenLoaded;
  }

  /** What loaded() still waits for, for a log line. */
  waitingFor(): string {
    const missing = [
      ...(this.setsListed ? [] : ['the PinnedImageSets list']),
      ...(this.nodeListed ? (this.node.get(this.nodeName) ? [] : [`Node ${this.nodeName} (not in the cluster)`]) : [`Node ${this.nodeName}`]),
    ];
    return missing.join(' and ') || 'nothing';
  }

  pinnedImageSets(): readonly PinnedImageSet[] {
    return this.sets.list() as unknown as PinnedImageSet[];
  }

  nodeLabels(): Readonly<Record<string, string>> | undefined {
    const node = this.node.get(this.nodeName);
    return node ? (node.metadata?.labels ?? {}) : undefined;
  }

  async readPullSecret(name: string): Promise<PullSecret> {
    const source = `pull secret ${this.namespace}/${name}`;
    let secret: V1Secret;
    try {
      secret = await this.core.readNamespacedSecret({ namespace: this.namespace, name });
    } catch (error) {
      const code = (error as { code?: number }).code;
      if (code === 404) throw new Error(`${source} not found: create it (type ${DOCKER_CONFIG_JSON}) in namespace ${this.namespace}`);
      if (code === 403) throw new Error(`${source}: forbidden (403); the agent reads Secrets only in its own namespace (--namespace), where prestage install's Role lets it`);
      throw clusterError(`cannot read ${source}`, error);
    }
    return pullSecretOfSecret(secret, source);
  }

  async readStatus(): Promise<NodePinnedImagesStatus | undefined> {
    return (await this.read())?.status;
  }

  async writeStatus(status: NodePinnedImagesStatus): Promise<void> {
    const address = { group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: this.nodeName };
    for (let attempt = 1; ; attempt++) {
      const current = (await this.read()) ?? (await this.create());
      try {
        await this.objects.replaceClusterCustomObjectStatus({ ...address, body: { ...current, status: { ...status, observedGeneration: current.metadata.generation } } });
        return;
      } catch (error) {
        // Someone else wrote in between: read again and retry.
        if ((error as { code?: number }).code === 409 && attempt < 5) continue;
        throw clusterError(`cannot write the status of ${NODE_PINNED_IMAGES}/${this.nodeName}`, error);
      }
    }
  }

  async recordWarning(reason: string, message: string): Promise<void> {
    const node = this.node.get(this.nodeName);
    const now = new Date();
    // Node Events live in `default`, as the kubelet's do.
    await this.core.createNamespacedEvent({
      namespace: 'default',
      body: {
        metadata: { generateName: `${this.nodeName}.prestage.` },
        involvedObject: { kind: 'Node', apiVersion: 'v1', name: this.nodeName, uid: node?.metadata?.uid },
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

  private async read(): Promise<NodePinnedImages | undefined> {
    try {
      return (await this.objects.getClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: this.nodeName })) as NodePinnedImages;
    } catch (error) {
      if ((error as { code?: number }).code === 404) return undefined;
      throw clusterError(`cannot read ${NODE_PINNED_IMAGES}/${this.nodeName}`, error);
    }
  }

  private async create(): Promise<NodePinnedImages> {
    const body: NodePinnedImages = { apiVersion: API_VERSION, kind: 'NodePinnedImages', metadata: { name: this.nodeName }, spec: { nodeName: this.nodeName } };
    try {
      return (await this.objects.createClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, body })) as NodePinnedImages;
    } catch (error) {
      if ((error as { code?: number }).code === 409) return (await this.read()) as NodePinnedImages;
      throw clusterError(`cannot create ${NODE_PINNED_IMAGES}/${this.nodeName}`, error);
    }
  }
}

function clusterError(what: string, error: unknown): ClusterError {
  const { code, body } = error as { code?: number; body?: unknown };
  const detail = typeof body === 'string' ? (JSON.parse(body) as { message?: string }).message ?? body : (error as Error).message;
  return new ClusterError(`${what}: ${code ?? ''} ${detail}`.replace(/\s+/g, ' '), { cause: error });
}

const DOCKER_CONFIG_JSON = 'kubernetes.io/dockerconfigjson';
const DOCKER_CFG = 'kubernetes.io/dockercfg';

/**
 * The credentials of an image pull Secret, as the kubelet reads `imagePullSecrets`:
 * `.dockerconfigjson` ({"auths": {...}}) or the legacy `.dockercfg` (the auths map alone).
 * Errors name the Secret and what is wrong, never its content.
 */
export function pullSecretOfSecret(secret: Pick<V1Secret, 'type' | 'data'>, source: string): PullSecret {
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
