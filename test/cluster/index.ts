/**
 * The real-cluster test bed: etcd, kube-apiserver, Node objects, and one real CRI-O per node,
 * all on loopback in a temp dir. Tests drive what kubelets and controllers would do.
 *
 *   const cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': registry.host } });
 *   ...
 *   await cluster.stop();
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, type V1Node } from '@kubernetes/client-node';
import { testbedBinaries, type TestbedBinaries } from './binaries.js';
import { kubeconfig, startControlPlane, SERVICE_ACCOUNT_ISSUER } from './control-plane.js';
import { CrioNode, type SignatureConfig, type StorageDriver } from './crio.js';

export { COLD_BUILD_TIMEOUT_MS } from './binaries.js';
export type { TestbedBinaries } from './binaries.js';
export type { CrioNode, SignatureConfig } from './crio.js';

export interface ClusterOptions {
  /** Worker nodes besides the one control-plane node. */
  readonly workers: number;
  /** Source registry → plain-http mirror: `{ 'quay.io': '127.0.0.1:5000' }`. */
  readonly registryMirrors?: Readonly<Record<string, string>>;
  /** Registries CRI-O reaches over plain http: `['127.0.0.1:5000']`. */
  readonly insecureRegistries?: readonly string[];
  /**
   * Per-node image store size: each CRI-O's storage and pull temp files live on a tmpfs this
   * big (so disk-full can be tested), and the Node's ephemeral-storage reports it.
   */
  readonly imageStoreBytes?: number;
  /**
   * Per node (by name: master-0, worker-0, ...): its own mirrors, replacing `registryMirrors` for
   * that node (a registry per node, so its log counts that node's bytes), and its own image store size.
   */
  readonly perNode?: Readonly<Record<string, { readonly registryMirrors?: Readonly<Record<string, string>>; readonly imageStoreBytes?: number }>>;
  /** containers/storage's driver on every node; default overlay. */
  readonly storageDriver?: StorageDriver;
  /** CRI-O's `global_auth_file` on every node (its own registry credentials); may be written later. */
  readonly crioAuthFile?: string;
  /** Signature policy every node's CRI-O enforces (files written per node, paths made absolute by the caller). */
  readonly crioSignatures?: SignatureConfig;
}

export type NodeRole = 'control-plane' | 'worker';

export interface TestNode {
  readonly name: string;
  readonly role: NodeRole;
  readonly crio: CrioNode;
}

export interface ServiceAccountTokenOptions {
  readonly audiences?: readonly string[];
  readonly expirationSeconds?: number;
  /** Bind the token to a Pod that exists; it dies with the Pod. */
  readonly boundPod?: { readonly name: string; readonly uid: string };
}

export interface TestCluster {
  /** The temp dir holding every component's state and log. */
  readonly dir: string;
  readonly apiServerUrl: string;
  /** Admin (system:masters) kubeconfig. */
  readonly kubeconfigPath: string;
  readonly kubeConfig: KubeConfig;
  readonly nodes: readonly TestNode[];
  readonly binaries: TestbedBinaries;
  /** A token for ServiceAccount `namespace/name` (both created if missing), from the TokenRequest API. */
  serviceAccountToken(namespace: string, name: string, options?: ServiceAccountTokenOptions): Promise<string>;
  /** A KubeConfig that authenticates with a bearer token. */
  kubeConfigForToken(token: string): KubeConfig;
  /** Stops every process and removes the temp dir (kept when PRESTAGE_TESTBED_KEEP is set). */
  stop(): Promise<void>;
}

const DEFAULT_EPHEMERAL_STORAGE_BYTES = 120 * 2 ** 30;

export async function startCluster(options: ClusterOptions): Promise<TestCluster> {
  const binaries = await testbedBinaries();
  const dir = await mkdtemp(join(tmpdir(), 'prestage-cluster-'));
  const stoppers: Array<() => Promise<void>> = [];
  const stop = async () => {
    const results = await Promise.allSettled(stoppers.splice(0).map((stopOne) => stopOne()));
    if (!process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;
  };
  try {
    const roles: NodeRole[] = ['control-plane', ...Array.from({ length: options.workers }, (): NodeRole => 'worker')];
    const names = roles.map((role, index) => (role === 'control-plane' ? 'master-0' : `worker-${index - 1}`));
    const registries = { mirrors: options.registryMirrors ?? {}, insecure: options.insecureRegistries ?? [] };
    const storeBytes = (name: string) => options.perNode?.[name]?.imageStoreBytes ?? options.imageStoreBytes;
    const startCrio = async (name: string) => {
      const own = options.perNode?.[name]?.registryMirrors;
      const crio = await CrioNode.start({ dir: join(dir, 'nodes', name), binaries, registries: own ? { ...registries, mirrors: own } : registries, imageStoreBytes: storeBytes(name), storageDriver: options.storageDriver, authFile: options.crioAuthFile, ...(options.crioSignatures ? { signatures: options.crioSignatures } : {}) });
      stoppers.push(() => crio.stop());
      return crio;
    };
    const [controlPlane, ...crios] = await Promise.all([
      startControlPlane(join(dir, 'control-plane'), binaries).then((started) => {
        stoppers.push(() => started.stop());
        return started;
      }),
      ...names.map(startCrio),
    ]);

    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(controlPlane.kubeconfigPath);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const nodes = await Promise.all(
      names.map(async (name, index): Promise<TestNode> => {
        const role = roles[index] as NodeRole;
        const crio = crios[index] as CrioNode;
        await registerNode(core, name, role, String(storeBytes(name) ?? DEFAULT_EPHEMERAL_STORAGE_BYTES), crio.runtimeVersion, binaries.versions['kube-apiserver']);
        return { name, role, crio };
      }),
    );

    const ca = await readFile(controlPlane.pki.ca.certPath);
    const kubeConfigForToken = (token: string) => {
      const config = new KubeConfig();
      config.loadFromString(JSON.stringify(kubeconfig(controlPlane.apiServerUrl, ca, { token })));
      return config;
    };
    return {
      dir,
      apiServerUrl: controlPlane.apiServerUrl,
      kubeconfigPath: controlPlane.kubeconfigPath,
      kubeConfig,
      nodes,
      binaries,
      serviceAccountToken: (namespace, name, tokenOptions) => serviceAccountToken(core, namespace, name, tokenOptions),
      kubeConfigForToken,
      stop,
    };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

/** What a kubelet would do at registration: the Node, its role labels, then its status. */
async function registerNode(core: CoreV1Api, name: string, role: NodeRole, ephemeralStorage: string, crioVersion: string, kubeVersion: string): Promise<void> {
  const roleLabels: Record<string, string> =
    role === 'control-plane'
      ? { 'node-role.kubernetes.io/master': '', 'node-role.kubernetes.io/control-plane': '' }
      : { 'node-role.kubernetes.io/worker': '' };
  const node = await core.createNode({
    body: {
      metadata: { name, labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', ...roleLabels } },
    },
  });
  const now = new Date();
  const resources = { cpu: '8', memory: '32Gi', pods: '250', 'ephemeral-storage': ephemeralStorage };
  const status: V1Node['status'] = {
    capacity: resources,
    allocatable: resources,
    conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'prestage test bed', lastHeartbeatTime: now, lastTransitionTime: now }],
    nodeInfo: {
      architecture: 'amd64',
      operatingSystem: 'linux',
      osImage: 'prestage test bed',
      kernelVersion: '',
      bootID: '',
      machineID: name,
      systemUUID: name,
      containerRuntimeVersion: `cri-o://${crioVersion}`,
      kubeletVersion: kubeVersion,
      kubeProxyVersion: '',
    },
  };
  await core.replaceNodeStatus({ name, body: { ...node, status } });
}

async function serviceAccountToken(core: CoreV1Api, namespace: string, name: string, options: ServiceAccountTokenOptions = {}): Promise<string> {
  await ignoreConflict(core.createNamespace({ body: { metadata: { name: namespace } } }));
  await ignoreConflict(core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } }));
  const request = await core.createNamespacedServiceAccountToken({
    namespace,
    name,
    body: {
      spec: {
        audiences: [...(options.audiences ?? [SERVICE_ACCOUNT_ISSUER])],
        expirationSeconds: options.expirationSeconds ?? 3600,
        boundObjectRef: options.boundPod ? { kind: 'Pod', apiVersion: 'v1', ...options.boundPod } : undefined,
      },
    },
  });
  const token = request.status?.token;
  if (!token) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
  return token;
}

/** Creating what already exists is fine here: 409 means it is there. */
async function ignoreConflict(creation: Promise<unknown>): Promise<void> {
  try {
    await creation;
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
  }
}
