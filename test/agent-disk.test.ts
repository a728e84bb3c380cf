/**
 * The node agent's disk check by exact sizes, on the real test bed: a CRI-O whose image store is
 * a fixed-size tmpfs (so free space moves only with our pulls) and whose registries.conf mirrors
 * quay.io to a real registry holding the fixture release. Sizes are compared with the fixture's
 * truth: the uncompressed size of every layer, as built.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION, isSetDone, type NodePinnedImages, type PinnedImageSet, type PinnedImageSetStatus } from '../src/api/prestage.js';
import { DISK_BYTES_ANNOTATION } from '../src/api/set-metadata.js';
import { CrioRuntime } from '../src/agent/crio.js';
import { hasLayers, RegistryImageSizes } from '../src/agent/image-sizes.js';
import { KubeAgentCluster } from '../src/agent/kube.js';
import { KubeClient } from '../src/kube/client.js';
import { NodeAgent } from '../src/agent/reconcile.js';
import { parsePullSecret } from '../src/registry/credentials.js';
import { createLogger } from '../src/telemetry/log.js';
import type { ComponentTruth, LayerTruth } from '../fixtures/release.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { registriesConf } from './cluster/crio.js';
import { waitFor } from './cluster/processes.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { installPrestageCrds, pinState } from './support/agent-bed.js';

const truth = inject('fixtureTruth');
const component = (name: string): ComponentTruth => {
  const found = truth.components.find((candidate) => candidate.name === name);
  if (!found) throw new Error(`no fixture component ${name}`);
  return found;
};
const IMAGE_STORE_BYTES = 96 * 2 ** 20;
const DROP_IN = '99-prestage-pinned-images';
const log = createLogger(process.env.PRESTAGE_TEST_LOG ? 'debug' : 'silent');

/** Unique layers of the images, less those of `present` images: what the agent must count. */
function truthLayers(images: readonly ComponentTruth[], present: readonly ComponentTruth[] = []): LayerTruth[] {
  const onNode = new Set(present.flatMap((image) => image.layers.map((layer) => layer.digest)));
  const unique = new Map<string, LayerTruth>();
  for (const image of images) for (const layer of image.layers) if (!onNode.has(layer.digest)) unique.set(layer.digest, layer);
  return [...unique.values()];
}
const sum = (values: readonly number[]) => values.reduce((total, value) => total + value, 0);

let registry: RegistryHandle;
let cluster: TestCluster;
let objects: CustomObjectsApi;
let worker: TestNode;

beforeAll(async () => {
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  cluster = await startCluster({ workers: 1, registryMirrors: { 'quay.io': registry.host }, insecureRegistries: [registry.host], imageStoreBytes: IMAGE_STORE_BYTES });
  objects = await installPrestageCrds(cluster);
  worker = cluster.nodes.find((node) => node.name === 'worker-0')!;
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await cluster?.stop();
  await registry?.stop();
});

/** The node's own registries.conf, as CRI-O reads it (test/cluster/crio.ts writes it). */
const nodeSizes = (node: TestNode) => new RegistryImageSizes({ registriesConf: join(dirname(node.crio.confDir), 'registries.conf'), registriesConfDir: join(dirname(node.crio.confDir), 'registries.conf.d'), log });

/** One agent on worker-0 with this reserve; with `exact`, sizes come from the node's registries.conf. */
async function startAgent(reserveBytes: number, exact: boolean): Promise<() => Promise<void>> {
  const runtime = await CrioRuntime.connect({ socketPath: worker.crio.socketPath, dropInPath: join(worker.crio.confDir, DROP_IN), reload: () => worker.crio.reload() });
  const imageSizes = exact ? nodeSizes(worker) : undefined;
  let agent: NodeAgent | undefined;
  const view = new KubeAgentCluster(new KubeClient(cluster.kubeConfig), worker.name, log, () => agent?.trigger());
  agent = new NodeAgent({ nodeName: worker.name, runtime, cluster: view, log, concurrency: 2, reserveBytes, resyncMs: 1_500, retry: { attempts: 3, initialDelayMs: 200, maxDelayMs: 1_000 }, ...(imageSizes ? { imageSizes } : {}) });
  await view.start();
  agent.start();
  return async () => {
    await agent.stop();
    await view.stop();
    await imageSizes?.close();
    runtime.close();
  };
}

async function freeBytes(): Promise<number> {
  const runtime = await CrioRuntime.connect({ socketPath: worker.crio.socketPath, dropInPath: join(worker.crio.confDir, DROP_IN), reload: () => worker.crio.reload() });
  try {
    return (await runtime.imageFilesystem()).freeBytes;
  } finally {
    runtime.close();
  }
}

const setAddress = { group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS };
function createSet(name: string, images: readonly string[], annotations: Record<string, string> = {}) {
  const body: PinnedImageSet = { apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name, annotations }, spec: { pinnedImages: images.map((image) => ({ name: image })), nodeSelector: { matchLabels: { 'kubernetes.io/hostname': 'worker-0' } } } };
  return objects.createClusterCustomObject({ ...setAddress, body });
}

const waitForSet = (name: string, until: (set: PinnedImageSetStatus) => boolean, what: string) =>
  waitFor(`${name} on worker-0: ${what}`, async () => {
    const status = (await objects.getClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: 'worker-0' }).catch(() => undefined)) as NodePinnedImages | undefined;
    const set = status?.status?.pinnedImageSets?.find((candidate) => candidate.name === name);
    return set && until(set) ? set : undefined;
  }, 60_000, 250);

const stored = (images: readonly string[]) => pinState(worker, images);

describe('exact image sizes through the node registries.conf', () => {
  it("reads each layer's uncompressed size through the mirror, resolving manifest lists to the node's platform", async () => {
    const sizes = nodeSizes(worker);
    try {
      const single = component('operator-lifecycle-manager');
      const listed = truth.multi.components[0]!;
      const result = await sizes.layers([single.pullSpec, listed.pullSpec], { arch: 'amd64', pullSecrets: [] });
      // Exact disk bytes, and the compressed bytes a pull moves over the link (what a cap charges).
      const expected = (layers: readonly LayerTruth[]) => layers.map((layer) => ({ digest: layer.digest, diskBytes: layer.uncompressedSize, linkBytes: layer.size, exact: true }));
      expect(result.get(single.pullSpec)).toEqual({ layers: expected(single.layers), from: single.pullSpec.replace(/^quay\.io/, registry.host), overheadBytes: expect.any(Number) });
      expect((result.get(single.pullSpec) as { overheadBytes: number }).overheadBytes).toBeGreaterThan(single.config.size);
      expect(hasLayers(result.get(listed.pullSpec)) && result.get(listed.pullSpec)).toMatchObject({ layers: expected(listed.perArch.amd64.layers) });
      const arm = await sizes.layers([listed.pullSpec], { arch: 'arm64', pullSecrets: [] });
      expect(arm.get(listed.pullSpec)).toMatchObject({ layers: expected(listed.perArch.arm64.layers) });
    } finally {
      await sizes.close();
    }
  });

  it('says, for an image it cannot size, what each endpoint answered: the mirror first, then the source', async () => {
    const sizes = nodeSizes(worker);
    try {
      const missing = component('docker-registry').pullSpec.replace(/@.*$/, `@sha256:${'0'.repeat(64)}`);
      const result = await sizes.layers([missing], { arch: 'amd64', pullSecrets: [] });
      const error = (result.get(missing) as { error: string }).error;
      expect(error).not.toContain('\n');
      expect(error).toMatch(new RegExp(`^mirror ${registry.host.replace(/\./g, '\\.')}/\\S+: .*manifest not found \\(404\\).*; quay\\.io/\\S+: `));
    } finally {
      await sizes.close();
    }
  });

  it("uses the node's pull secret for a mirror that wants credentials, and never puts them in its answers", async () => {
    const locked = await startRegistry({ storageDir: inject('fixtureStorageDir'), auth: 'basic' });
    const dir = await mkdtemp(join(tmpdir(), 'prestage-registries-conf-'));
    const sizes = new RegistryImageSizes({ registriesConf: join(dir, 'registries.conf'), registriesConfDir: join(dir, 'registries.conf.d'), log });
    try {
      await writeFile(join(dir, 'registries.conf'), registriesConf({ mirrors: { 'quay.io': locked.host }, insecure: [] }));
      const image = component('docker-registry');
      const anonymous = (await sizes.layers([image.pullSpec], { arch: 'amd64', pullSecrets: [] })).get(image.pullSpec) as { error: string };
      expect(anonymous.error).toMatch(/access denied \(401\)/);
      const secret = parsePullSecret(JSON.stringify({ auths: { [locked.host]: { auth: Buffer.from(`${locked.username}:${locked.password}`).toString('base64') } } }), 'kubelet config.json');
      const authorised = (await sizes.layers([image.pullSpec], { arch: 'amd64', pullSecrets: [secret] })).get(image.pullSpec);
      expect(authorised).toMatchObject({ layers: image.layers.map((layer) => ({ digest: layer.digest, diskBytes: layer.uncompressedSize })) });
      expect(JSON.stringify([anonymous, authorised])).not.toContain(locked.password!);
    } finally {
      await sizes.close();
      await locked.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
  it('gets past a mirror that never answers quickly, skips it for the next images, and answers within its budget', async () => {
    // A host that accepts connections and never says a word, like a blackholed mirror.
    const sockets = new Set<Socket>();
    let connections = 0;
    const silent = createServer((socket) => {
      connections++;
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const silentHost = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const dir = await mkdtemp(join(tmpdir(), 'prestage-registries-conf-'));
    const conf = `[[registry]]\nlocation = "quay.io"\n[[registry.mirror]]\nlocation = "${silentHost}"\n[[registry.mirror]]\nlocation = "${registry.host}"\ninsecure = true\n`;
    await writeFile(join(dir, 'registries.conf'), conf);
    const sizes = new RegistryImageSizes({ registriesConf: join(dir, 'registries.conf'), registriesConfDir: join(dir, 'registries.conf.d'), log, requestTimeoutMs: 2_000 });
    const impatient = new RegistryImageSizes({ registriesConf: join(dir, 'registries.conf'), registriesConfDir: join(dir, 'registries.conf.d'), log, requestTimeoutMs: 2_000, budgetMs: 1_000 });
    try {
      const [first, second, third] = [component('docker-registry'), component('haproxy-router'), component('baremetal-runtimecfg')];
      const before = await sizes.layers([first.pullSpec], { arch: 'amd64', pullSecrets: [] });
      // Answered at all: the silent mirror's TLS handshake never ends, so its attempts timed out and the next mirror answered.
      expect(before.get(first.pullSpec)).toMatchObject({ from: first.pullSpec.replace(/^quay\.io/, registry.host) });
      const seen = connections;
      expect(seen).toBeGreaterThan(0);
      const after = await sizes.layers([second.pullSpec], { arch: 'amd64', pullSecrets: [] });
      expect(after.get(second.pullSpec)).toMatchObject({ layers: second.layers.map((layer) => ({ digest: layer.digest, diskBytes: layer.uncompressedSize })) });
      // Skipped, not waited for again.
      expect(connections).toBe(seen);

      const late = await impatient.layers([third.pullSpec], { arch: 'amd64', pullSecrets: [] });
      expect(late.get(third.pullSpec)).toEqual({ error: 'no answer from the registry within 1 s' });
    } finally {
      await sizes.close();
      await impatient.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('node agent disk check by exact sizes', () => {
  // Two small images sharing three base layers: the exact need is well under MCO's 2x guess.
  const FITS = [component('operator-lifecycle-manager'), component('network-interface-bond-cni')];
  // Two images sharing those base layers (on the node once FITS is pulled) and one that shares none.
  const TOO_BIG = [component('aws-machine-controllers'), component('docker-registry'), component('rhel-coreos-extensions')];

  it('pulls a set that fits by its exact size though its 2x-compressed estimate does not fit', async () => {
    const exact = sum(truthLayers(FITS).map((layer) => layer.uncompressedSize));
    const twiceCompressed = 2 * sum(truthLayers(FITS).map((layer) => layer.size));
    const room = Math.round((exact + twiceCompressed) / 2);
    // The window is wide enough that the tmpfs' bookkeeping cannot close it.
    expect(room - exact).toBeGreaterThan(256 * 1024);
    expect(twiceCompressed - room).toBeGreaterThan(256 * 1024);
    const reserve = (await freeBytes()) - room;
    const images = FITS.map((image) => image.pullSpec);
    await createSet('fits-exactly', images, { [DISK_BYTES_ANNOTATION]: String(twiceCompressed) });

    // Control: an agent that knows only the annotation refuses it.
    let stop = await startAgent(reserve, false);
    try {
      const refused = await waitForSet('fits-exactly', (set) => set.lastFailedGeneration === 1, 'refused by the estimate');
      expect(refused.lastFailedGenerationError).toMatch(new RegExp(`^not enough disk: 2 images need ${twiceCompressed} bytes \\(estimated from the prestage\\.dev/disk-bytes annotation; `));
    } finally {
      await stop();
    }
    expect(await stored(images)).toEqual(Object.fromEntries(images.map((image) => [image, 'absent'])));

    stop = await startAgent(reserve, true);
    try {
      const done = await waitForSet('fits-exactly', (set) => isSetDone(set) && set.desiredGeneration === 1, 'pulled and pinned by exact size');
      expect(done.images.map((image) => image.state)).toEqual(['Pinned', 'Pinned']);
      expect(await stored(images)).toEqual(Object.fromEntries(images.map((image) => [image, true])));
    } finally {
      await stop();
    }
  });

  it("fails a set that does not fit, naming exactly the bytes of the layers not on the node yet, and pulls nothing of it", async () => {
    const needed = truthLayers(TOO_BIG, FITS);
    const neededBytes = sum(needed.map((layer) => layer.uncompressedSize));
    // The base layers the first two share with what is stored are not counted again.
    expect(neededBytes).toBeLessThan(sum(TOO_BIG.map((image) => sum(image.layers.map((layer) => layer.uncompressedSize)))) - 1024 * 1024);
    const reserve = (await freeBytes()) - neededBytes + 256 * 1024;
    const images = TOO_BIG.map((image) => image.pullSpec);
    // The annotation says 1 byte; the exact sizes decide.
    await createSet('too-big', images, { [DISK_BYTES_ANNOTATION]: '1' });
    const stop = await startAgent(reserve, true);
    try {
      const failed = await waitForSet('too-big', (set) => set.lastFailedGeneration === 1, 'failed');
      expect(failed.lastFailedGenerationError).toMatch(
        new RegExp(`^not enough disk: 3 images need ${neededBytes} bytes \\(exact, ${needed.length} layers\\), \\d+ free after the ${reserve}-byte reserve and earlier sets; nothing pulled$`),
      );
      // Not pulled, not even tried; the images not pulled report their exact sizes.
      expect(failed.images.map((image) => [image.state, image.attempts, image.bytes])).toEqual(TOO_BIG.map((image) => ['Pending', 0, sum(image.layers.map((layer) => layer.uncompressedSize))]));
      expect(await stored(images)).toEqual(Object.fromEntries(images.map((image) => [image, 'absent'])));
      // The set that fits stays done.
      expect(isSetDone(await waitForSet('fits-exactly', () => true, 'listed'))).toBe(true);
    } finally {
      await stop();
    }
  });
});
