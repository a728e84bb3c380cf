/**
 * The in-cluster cache as users get it (issue #15): `prestage install --cache --apply` on the test
 * bed, its Deployment run as a pod by a REAL kubelet (with kube-controller-manager and
 * kube-scheduler) on a pod network, its Service's ClusterIP made reachable from the host network
 * by a REAL kube-proxy (iptables mode), and three nodes' CRI-O pulling through that ClusterIP, as
 * the `--cache-mirror` flag install gave the DaemonSet says; then through a NodePort at each
 * node's own address (`--cache-node-port`). Then installing again keeps the cache,
 * and `install --no-cache --apply` turns it off in one command: the agents drop their drop-in, the
 * cache's objects go.
 *
 * What the test bed changes, and why (everything else is what `install` renders and applies):
 * - the cache image: no route to Docker Hub, so `registry:3` is the test bed's distribution 3.1
 *   binary (built from the Go module proxy) in an image pushed to a test registry, run with the
 *   Deployment's own args (`serve /etc/distribution/config.yml`);
 * - the ConfigMap's `proxy.remoteurl`: the link in front of the fixture registry, at the host's
 *   address (patched before the controllers run, so the pod starts with it), not https://quay.io;
 * - storage: `--cache-host-path` on the kubelet's node (the test bed has no volume provisioner);
 * - the agents run as processes (test/support/agent-bed.ts) with the DaemonSet's `--cache-mirror`
 *   flag: the DaemonSet's own pod is what test/daemonset.test.ts runs.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION, type NodePinnedImages } from '../src/api/prestage.js';
import { CACHE_DROP_IN_NAME } from '../src/agent/cache-mirror.js';
import { cacheMirrorArgsOf } from '../src/install/cache.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { KubeProxy } from './cluster/kube-proxy.js';
import { KubeletBed, pushPauseImage } from './cluster/kubelet.js';
import { Daemon, waitFor } from './cluster/processes.js';
import { startFaultProxy, type FaultProxy } from './harness/fault-proxy.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { pinState, startNodeAgent } from './support/agent-bed.js';
import { dir as directory, file, pushImage } from './support/built-images.js';
import { blobGets, bytesOf, hostAddress, sum, uniqueBlobs } from './support/cache-bed.js';
import { runCli } from './support/cli.js';
import { AGENT_NAME } from '../src/api/names.js';

const NAMESPACE = 'prestage';
const POD_CIDR = '10.244.0.0/16';
const truth = inject('fixtureTruth');
/** A third of the release's every-node images: pulled by all three nodes through the cache. */
const IMAGES = truth.components.filter((component) => component.role === 'all').filter((_, index) => index % 3 === 0);
/** Another sixth, through the NodePort. */
const NODE_PORT_IMAGES = truth.components.filter((component) => component.role === 'all').filter((_, index) => index % 6 === 1);
const NODE_PORT = 30500;

let dir: string;
let upstream: RegistryHandle;
/** The slow link in front of the fixture registry; it also answers on the host's address, for the cache's pod. */
let link: FaultProxy;
/** Where the test bed's images (the pause image, the cache's image) are pushed. */
let images: RegistryHandle;
let cluster: TestCluster;
let cacheNode: TestNode;
let kubelets: KubeletBed;
let kubeProxy: KubeProxy;
const agents: Daemon[] = [];
let clusterIP: string;

const kube = () => ['--kubeconfig', cluster.kubeconfigPath];
const install = (...flags: string[]) => runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', ...flags, '--apply', ...kube()]);
const dropInOf = (node: TestNode) => join(dirname(node.crio.confDir), 'registries.conf.d', CACHE_DROP_IN_NAME);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-cache-cluster-'));
  upstream = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  link = await startFaultProxy({ upstream: upstream.url, listenAddress: '0.0.0.0' });
  images = await startRegistry();
  cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': link.host }, insecureRegistries: [link.host, images.host] });
  cacheNode = cluster.nodes.find((node) => node.name === 'worker-1')!;
  kubelets = new KubeletBed(cluster);
  const bridge = `pst${process.pid.toString(36)}`.slice(0, 15);
  await kubelets.runContainers(cacheNode, { pauseImage: await pushPauseImage(images.host, cluster.binaries.busybox), podNetwork: { bridge, subnet: '10.244.1.0/24' } });
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
  await kubeProxy?.stop();
  await kubelets?.stop();
  await cluster?.stop();
  await images?.stop();
  await link?.stop();
  await upstream?.stop();
  if (dir && !process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
}, 180_000);

/** The one test-bed change to the rendered config: the upstream is the link, at an address the pod reaches. */
async function patchRemoteUrl(): Promise<void> {
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  const rendered = (await core.readNamespacedConfigMap({ name: 'prestage-cache', namespace: NAMESPACE })).data!['config.yml']!;
  expect(rendered).toContain('remoteurl: https://quay.io\n');
  const linkForPods = `http://${hostAddress()}:${link.host.split(':')[1]}`;
  await core.patchNamespacedConfigMap(
    { name: 'prestage-cache', namespace: NAMESPACE, body: { data: { 'config.yml': rendered.replace('remoteurl: https://quay.io', `remoteurl: ${linkForPods}`) } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

async function createSet(name: string, pullSpecs: readonly string[]): Promise<void> {
  await cluster.kubeConfig.makeApiClient(CustomObjectsApi).createClusterCustomObject({
    group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS,
    body: { apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name }, spec: { pinnedImages: pullSpecs.map((pullSpec) => ({ name: pullSpec })) } },
  });
}

describe('install --cache on a cluster: the cache pod behind its ClusterIP', () => {
  it('runs the Deployment install renders, and three nodes pull a set through the Service ClusterIP kube-proxy routes: each unique blob crosses the link once; wait reads the pod\'s own counters', async () => {
    const cacheImage = await pushImage(images.host, 'distribution', [[
      directory('bin/'), file('bin/registry', readFileSync(cluster.binaries.distribution), 0o755),
      directory('etc/'), directory('etc/distribution/'), directory('var/'), directory('var/lib/'), directory('var/lib/registry/'), directory('tmp/', 0o1777),
    ]], { Entrypoint: ['/bin/registry'], Cmd: ['serve', '/etc/distribution/config.yml'] });
    const installed = await install('--cache', '--cache-image', cacheImage, '--cache-host-path', join(dir, 'cache-storage'), '--cache-node', cacheNode.name);
    expect([installed.code, installed.stderr]).toEqual([0, '']);
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    clusterIP = (await core.readNamespacedService({ name: 'prestage-cache', namespace: NAMESPACE })).spec!.clusterIP!;
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    const flags = cacheMirrorArgsOf(await apps.readNamespacedDaemonSet({ name: AGENT_NAME, namespace: NAMESPACE }) as Parameters<typeof cacheMirrorArgsOf>[0]);
    expect(flags).toEqual([`--cache-mirror=quay.io=${clusterIP}:5000`]);
    expect(installed.stdout).toContain(`agents pull through the cache: ${flags[0]}\n`);

    await patchRemoteUrl();
    kubelets.startControllers();
    await kubelets.start(cacheNode);
    kubeProxy = await KubeProxy.start(cluster, { nodeName: cacheNode.name, clusterCidr: POD_CIDR });
    const pod = await waitFor('the cache pod to be ready', async () => {
      const pods = await core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: 'app.kubernetes.io/name=prestage-cache' });
      return pods.items.find((candidate) => candidate.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True'));
    }, 180_000, 1_000);
    // A pod of the Deployment, on the bridge network (not the host's), on the node --cache-node names.
    expect(pod.metadata!.ownerReferences![0]!.kind).toBe('ReplicaSet');
    expect(pod.spec!.nodeName).toBe(cacheNode.name);
    expect(pod.status!.podIP).toMatch(/^10\.244\.1\.\d+$/);
    await kubeProxy.routes(clusterIP, 5000);
    // The host network reaches the registry at the ClusterIP (kube-proxy's DNAT to the pod).
    expect((await fetch(`http://${clusterIP}:5000/v2/`)).status).toBe(200);

    link.resetStats();
    const pullSpecs = IMAGES.map((component) => component.pullSpec);
    await createSet('through-cluster-ip', pullSpecs);
    const waited = runCli(['wait', 'through-cluster-ip', '-o', 'json', '--timeout', '4m', ...kube()]);
    const mirror = flags[0]!.slice('--cache-mirror='.length);
    for (const node of cluster.nodes) agents.push(await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, args: ['--cache-mirror', mirror] }));
    const wait = await waited;
    expect([wait.code, wait.stderr]).toEqual([0, '']);
    for (const node of cluster.nodes) {
      expect(Object.values(await pinState(node, pullSpecs))).toEqual(pullSpecs.map(() => true));
      expect(await readFile(dropInOf(node), 'utf8')).toContain(`[[registry.mirror]]\nlocation = "${clusterIP}:5000"\ninsecure = true\npull-from-mirror = "digest-only"\n`);
      // CRI-O went to the ClusterIP for the images' blobs.
      expect(await readFile(node.crio.logPath, 'utf8')).toContain(`Trying to access \\"${clusterIP}:5000/`);
    }
    // Sizes stay exact through the cache: the agents read them from the upstream (4-byte trailer reads; a proxy
    // cache answers those with the whole blob), so each node's status carries the set's exact uncompressed bytes.
    const layers = new Map(IMAGES.flatMap((component) => component.layers.map((layer) => [layer.digest, layer.uncompressedSize] as const)));
    const exactBytes = [...layers.values()].reduce((total, size) => total + size, 0);
    const custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    for (const node of cluster.nodes) {
      const status = (await custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: node.name })) as NodePinnedImages;
      const set = status.status?.pinnedImageSets?.find((entry) => entry.name === 'through-cluster-ip');
      expect([node.name, set?.bytes, set?.pulledBytes]).toEqual([node.name, exactBytes, exactBytes]);
    }
    const unique = uniqueBlobs(IMAGES);
    const fills = blobGets(link.stats.log).filter((record) => record.range === undefined);
    const ratio = bytesOf(blobGets(link.stats.log)) / sum(unique);
    const cacheEvent = JSON.parse(wait.stdout.split('\n').filter((line) => line.includes('"type":"cache"')).at(-1)!) as Record<string, number>;
    console.log(
      `through the ClusterIP ${clusterIP}:5000 (pod ${pod.status!.podIP}): ${pullSpecs.length} images x ${cluster.nodes.length} nodes; unique blobs ${unique.size} (${sum(unique)} B); ` +
        `link: ${fills.length} whole-blob GETs, ratio ${ratio.toFixed(3)}; wait's cache event ${JSON.stringify(cacheEvent)}`,
    );
    // Each unique blob once over the link (distribution 3 in the pod), plus the agents' 4-byte size reads.
    expect(fills.map((record) => record.target.split('/blobs/')[1]).sort()).toEqual([...unique.keys()].sort());
    expect(ratio).toBeGreaterThanOrEqual(1);
    expect(ratio).toBeLessThanOrEqual(1.05);
    // wait's figures: the pod's counters, through the API server's service proxy to the pod's address.
    expect(cacheEvent).toMatchObject({ cache: 'prestage/prestage-cache', upstreamBytes: bytesOf(fills), misses: unique.size });
    expect(cacheEvent.hits).toBeGreaterThanOrEqual(unique.size * cluster.nodes.length);
  }, 600_000);

  it('with --cache-node-port: a NodePort Service, and each node pulls through the cache at its own address (kube-proxy\'s NodePort rules), the next set\'s blobs once over the link', async () => {
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    const cacheImage = (await apps.readNamespacedDeployment({ name: 'prestage-cache', namespace: NAMESPACE })).spec!.template.spec!.containers[0]!.image!;
    const installed = await install('--cache', '--cache-image', cacheImage, '--cache-host-path', join(dir, 'cache-storage'), '--cache-node', cacheNode.name, '--cache-node-port', String(NODE_PORT));
    expect([installed.code, installed.stderr]).toEqual([0, '']);
    // The Deployment is unchanged (the pod keeps running); the ConfigMap is as rendered again: the test bed's upstream back in.
    await patchRemoteUrl();
    const service = await core.readNamespacedService({ name: 'prestage-cache', namespace: NAMESPACE });
    expect(service.spec!.type).toBe('NodePort');
    expect(service.spec!.ports!.find((port) => port.name === 'registry')!.nodePort).toBe(NODE_PORT);
    const daemonSet = await apps.readNamespacedDaemonSet({ name: AGENT_NAME, namespace: NAMESPACE });
    expect(cacheMirrorArgsOf(daemonSet as Parameters<typeof cacheMirrorArgsOf>[0])).toEqual([`--cache-mirror=quay.io=$(HOST_IP):${NODE_PORT}`]);
    expect(daemonSet.spec!.template.spec!.containers[0]!.env).toContainEqual({ name: 'HOST_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.hostIP' } } });
    await kubeProxy.routesNodePort(NODE_PORT);
    // What the kubelet makes of $(HOST_IP) for a pod on any of these nodes: they all run on this host.
    const mirror = `quay.io=${hostAddress()}:${NODE_PORT}`;
    await Promise.all(agents.splice(0).map((agent) => agent.stop(30_000)));
    link.resetStats();
    const pullSpecs = NODE_PORT_IMAGES.map((component) => component.pullSpec);
    await createSet('through-node-port', pullSpecs);
    const waited = runCli(['wait', 'through-node-port', '--timeout', '4m', ...kube()]);
    for (const node of cluster.nodes) agents.push(await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, args: ['--cache-mirror', mirror] }));
    const wait = await waited;
    expect([wait.code, wait.stderr]).toEqual([0, '']);
    for (const node of cluster.nodes) {
      expect(Object.values(await pinState(node, pullSpecs))).toEqual(pullSpecs.map(() => true));
      expect(await readFile(node.crio.logPath, 'utf8')).toContain(`Trying to access \\"${hostAddress()}:${NODE_PORT}/`);
    }
    const unique = uniqueBlobs(NODE_PORT_IMAGES, new Set(uniqueBlobs(IMAGES).keys()));
    const fills = blobGets(link.stats.log).filter((record) => record.range === undefined);
    console.log(`through the NodePort ${hostAddress()}:${NODE_PORT}: ${pullSpecs.length} images x ${cluster.nodes.length} nodes; ${unique.size} new unique blobs (${sum(unique)} B); link: ${fills.length} whole-blob GETs (${bytesOf(fills)} B)`);
    expect(fills.map((record) => record.target.split('/blobs/')[1]).sort()).toEqual([...unique.keys()].sort());
  }, 300_000);

  it('install --apply again keeps the cache; install --no-cache --apply turns it off: no --cache-mirror, the agents remove their drop-in, the cache\'s objects are deleted', async () => {
    const apps = cluster.kubeConfig.makeApiClient(AppsV1Api);
    const daemonSetFlags = async () => cacheMirrorArgsOf(await apps.readNamespacedDaemonSet({ name: AGENT_NAME, namespace: NAMESPACE }) as Parameters<typeof cacheMirrorArgsOf>[0]);
    // The wiring the last `install --cache` gave (the NodePort's), kept as it is.
    const wired = `--cache-mirror=quay.io=$(HOST_IP):${NODE_PORT}`;
    expect(await daemonSetFlags()).toEqual([wired]);
    const kept = await install();
    expect([kept.code, kept.stderr]).toEqual([0, '']);
    expect(kept.stdout).toContain(`agents keep pulling through the cache: ${wired} (install --no-cache --apply turns it off)\n`);
    expect(await daemonSetFlags()).toEqual([wired]);

    const off = await install('--no-cache');
    console.log(`$ prestage install --image ghcr.io/prestage/prestage:test --no-cache --apply\n${off.stdout.split('\n').slice(-6).join('\n')}`);
    expect([off.code, off.stderr]).toEqual([0, '']);
    expect(off.stdout).toContain('deployment/prestage-cache deleted\nservice/prestage-cache deleted\nconfigmap/prestage-cache deleted\n');
    expect(off.stdout).not.toContain('agents pull through the cache');
    expect(await daemonSetFlags()).toEqual([]);
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    await waitFor('the cache pod to go', async () => ((await core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: 'app.kubernetes.io/name=prestage-cache' })).items.length === 0 ? true : undefined), 120_000, 1_000);
    expect(await core.readNamespacedService({ name: 'prestage-cache', namespace: NAMESPACE }).catch((error: { code?: number }) => error.code)).toBe(404);
    // The DaemonSet's pods restart with its new args: here, the agents restart without the flag and take their drop-in out.
    await Promise.all(agents.splice(0).map((agent) => agent.stop(30_000)));
    for (const node of cluster.nodes) agents.push(await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, args: await daemonSetFlags() }));
    for (const node of cluster.nodes) {
      await waitFor(`${node.name}'s cache drop-in to go`, async () => (await readFile(dropInOf(node)).then(() => false, () => true)) || undefined, 30_000, 200);
    }
  }, 300_000);
});
