/**
 * What the node-agent tests share on the test bed: the prestage CRDs, a real `prestage agent` per
 * node as the DaemonSet's pod runs it, and what a node's CRI-O stores and pins.
 */
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { CriClient } from '../../src/cri/client.js';
import { applyServerSide, waitForCrdsEstablished, type Manifest } from '../../src/install/apply.js';
import { AGENT_NODE_OPTIONS } from '../../src/install/manifests.js';
import type { TestCluster, TestNode } from '../cluster/index.js';
import type { Daemon } from '../cluster/processes.js';
import type { CrioNode } from '../cluster/crio.js';
import { startPrestageProcess } from './prestage-process.js';
import { AGENT_NAME } from '../../src/api/names.js';
import { CRDS } from '../../src/api/prestage-crds.js';

/** Installs the prestage.dev CRDs as `prestage install` would and waits until they are served. */
export async function installPrestageCrds(cluster: TestCluster): Promise<CustomObjectsApi> {
  await applyServerSide(cluster.kubeConfig, CRDS as unknown as Manifest[]);
  await waitForCrdsEstablished(cluster.kubeConfig, CRDS.map((crd) => crd.metadata.name));
  return cluster.kubeConfig.makeApiClient(CustomObjectsApi);
}

/** Per image, as the node's CRI-O lists it: pinned (true/false), or 'absent'. */
export async function pinState(node: TestNode, images: readonly string[]): Promise<Record<string, boolean | 'absent'>> {
  const cri = await CriClient.connect(node.crio.socketPath);
  try {
    const listed = await cri.listImages();
    return Object.fromEntries(images.map((image) => [image, listed.find((entry) => entry.repoDigests.includes(image))?.pinned ?? 'absent']));
  } finally {
    cri.close();
  }
}

/** Uncompressed bytes of every layer a test-bed CRI-O's containers/storage holds, by its own accounting (diff-size). */
export function storedLayerBytes(crio: CrioNode): number {
  const layers = JSON.parse(readFileSync(join(crio.root, `${crio.storageDriver}-layers`, 'layers.json'), 'utf8')) as Array<{ 'diff-size'?: number }>;
  return layers.reduce((total, layer) => total + (layer['diff-size'] ?? 0), 0);
}

export interface NodeAgentOptions {
  /** Where its kubeconfig, empty pull secret and log go. */
  readonly dir: string;
  /** The agent's namespace (`install`'s), holding its ServiceAccount. */
  readonly namespace: string;
  /** Flags on top of the common ones (concurrency, --cache-mirror, ...). */
  readonly args?: readonly string[];
  readonly logName?: string;
  /** The process's environment (default: this one's, with the DaemonSet's NODE_OPTIONS). */
  readonly env?: NodeJS.ProcessEnv;
  /** Without the link relay (default: with it, on 127.0.0.1, as the DaemonSet has it on its pod IP). */
  readonly linkRelay?: boolean;
  /** Node arguments that start prestage (default: this checkout's, `prestageEntry()`): a bench's other build. */
  readonly entry?: readonly string[];
}

/**
 * A real `prestage agent` for `node`, as the DaemonSet's pod runs it: a token bound to a Pod on
 * that node (the admission policy checks its node name), the node's CRI-O socket, drop-in dir,
 * reload by pid, and the node's own registries.conf and registries.conf.d (never the host's).
 */
export async function startNodeAgent(cluster: TestCluster, node: TestNode, options: NodeAgentOptions): Promise<Daemon> {
  const pod = await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespacedPod({
    namespace: options.namespace,
    body: {
      metadata: { generateName: `${AGENT_NAME}-`, labels: { app: AGENT_NAME } },
      // Never run by a kubelet (its image is nowhere): only what the token is bound to.
      spec: { nodeName: node.name, serviceAccountName: AGENT_NAME, automountServiceAccountToken: false, containers: [{ name: 'agent', image: 'ghcr.io/prestage/prestage:test' }] },
    },
  });
  const token = await cluster.serviceAccountToken(options.namespace, AGENT_NAME, { boundPod: { name: pod.metadata!.name!, uid: pod.metadata!.uid! } });
  const kubeconfig = join(options.dir, `${node.name}.kubeconfig`);
  await writeFile(kubeconfig, cluster.kubeConfigForToken(token).exportConfig(), { mode: 0o600 });
  const pullSecret = join(options.dir, `${node.name}-config.json`);
  await writeFile(pullSecret, JSON.stringify({ auths: {} }));
  const nodeDir = dirname(node.crio.confDir);
  return startPrestageProcess({
    name: `prestage agent (${node.name})`,
    args: [
      'agent', '--node-name', node.name, '--kubeconfig', kubeconfig, '--cri-socket', node.crio.socketPath,
      '--drop-in', join(node.crio.confDir, '50-prestage-pinned-images'), '--reload', `pid:${node.crio.pid}`, '--pull-secret', pullSecret,
      '--reserve', '0', '--port', '0', '--namespace', options.namespace,
      // As the DaemonSet runs it: under a cap CRI-O pulls through the agent (a build before the relay has no such flag).
      ...(options.linkRelay === false ? [] : ['--link-relay', '127.0.0.1:0']),
      '--registries-conf', join(nodeDir, 'registries.conf'), '--registries-conf-dir', join(nodeDir, 'registries.conf.d'),
      ...(options.args ?? []),
    ],
    logPath: join(options.dir, options.logName ?? `agent-${node.name}.log`),
    readyWhen: '"msg":"agent started"',
    // Node as the DaemonSet runs it (--jitless: no WebAssembly), unless the caller says otherwise.
    env: options.env ?? { ...process.env, NODE_OPTIONS: AGENT_NODE_OPTIONS },
    ...(options.entry ? { entry: options.entry } : {}),
  });
}

/** `use` with a CRI client on `node`'s CRI-O socket, closed after. */
export async function withCri<T>(node: TestNode, use: (cri: CriClient) => Promise<T>): Promise<T> {
  const cri = await CriClient.connect(node.crio.socketPath);
  try {
    return await use(cri);
  } finally {
    cri.close();
  }
}
