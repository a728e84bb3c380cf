/** What the node-agent tests share on the test bed: the prestage CRDs, and what a node's CRI-O stores and pins. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { CRDS } from '../../src/api/prestage.js';
import { CriClient } from '../../src/cri/client.js';
import { applyServerSide, waitForCrdsEstablished, type Manifest } from '../../src/install/apply.js';
import type { TestCluster, TestNode } from '../cluster/index.js';

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

/** Uncompressed bytes of every layer a test-bed CRI-O's containers/storage (vfs) holds, by its own accounting (diff-size). */
export function storedLayerBytes(root: string): number {
  const layers = JSON.parse(readFileSync(join(root, 'vfs-layers', 'layers.json'), 'utf8')) as Array<{ 'diff-size'?: number }>;
  return layers.reduce((total, layer) => total + (layer['diff-size'] ?? 0), 0);
}
