/**
 * The agent as deployed: `prestage install` applied to the test bed, and its DaemonSet pod run by a
 * REAL kubelet (v1.34, on one node's CRI-O, with a real kube-controller-manager and kube-scheduler
 * turning the DaemonSet into a bound pod). The pod mounts exactly the host paths it uses (CRI
 * socket, crio.conf's directory read-only, the drop-in directory, the kubelet pull secret,
 * registries.conf and its directory, the image store), runs as root without any capability (no
 * SYS_PTRACE, no /proc/1/root), authenticates with its pod-bound ServiceAccount token (whose
 * node-name claim the admission policies check), and pulls and pins a PinnedImageSet's image.
 *
 * What the test bed changes, and why (everything else is what `prestage install` renders):
 * - every host path the DaemonSet names (hostPath source, mount point and flag alike: it mounts
 *   each at its own path) is the node's own copy under its directory (every simulated node shares
 *   one host); crio.conf's directory is the node's directory, read-only;
 *   the reload is the default one (SIGHUP to the CRI-O whose command line names the drop-in
 *   directory; here several CRI-Os run, one per simulated node); `hostNetwork: true` and
 *   KUBERNETES_SERVICE_HOST/PORT, because there is no pod network or kube-proxy to reach the API
 *   server and the registry, which listen on 127.0.0.1.
 * - The kubelet and what its node's CRI-O needs to run containers (runc through a shim, a busybox
 *   pause image, a loopback CNI network, an rshared bind of the node directory, its own cgroup
 *   root): test/cluster/kubelet.ts, which says why for each.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { BatchV1Api, CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type V1Job } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION, type NodePinnedImages } from '../src/api/prestage.js';
import { PAUSED_ANNOTATION } from '../src/api/staging.js';
import type { Plan } from '../src/plan/types.js';
import { gateAccess, gateJob, type GitOpsOptions } from '../src/render/gitops-layout.js';
import { applyServerSide, waitForCrdsEstablished, type Manifest } from '../src/install/apply.js';
import { installManifests } from '../src/install/manifests.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { KubeletBed, pushPauseImage } from './cluster/kubelet.js';
import { waitFor } from './cluster/processes.js';
import { startRegistry, type RegistryHandle } from './harness/registry.js';
import { dir, file, link, pushedSizes, pushImage, type Entry } from './support/built-images.js';
import { runCli } from './support/cli.js';
import { AGENT_NAME, NODE_PATHS } from '../src/api/names.js';
import { CRDS } from '../src/api/prestage-crds.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../', import.meta.url));
const NAMESPACE = 'prestage';

let registry: RegistryHandle;
let cluster: TestCluster;
let node: TestNode;
let nodeDir: string;
let kubeletRoot: string;
let kubelets: KubeletBed;

beforeAll(async () => {
  registry = await startRegistry();
  cluster = await startCluster({ workers: 1, insecureRegistries: [registry.host] });
  node = cluster.nodes.find((candidate) => candidate.role === 'worker') as TestNode;
  nodeDir = dirname(node.crio.confDir);
  const { binaries } = cluster;

  kubelets = new KubeletBed(cluster);
  // Shared: the DaemonSet's hostPath volume holds CRI-O's storage root.
  await kubelets.runContainers(node, { pauseImage: await pushPauseImage(registry.host, binaries.busybox), sharedMount: true });

  kubelets.startControllers();
  kubeletRoot = (await kubelets.start(node)).rootDir;
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await kubelets?.stop();
  await cluster?.stop();
  await registry?.stop();
}, 120_000);

describe('the DaemonSet prestage install renders, on a real kubelet', () => {
  it('runs the agent pod, which authenticates with its pod-bound token and pulls and pins a set on its node', async () => {
    // Built as users build it: `prestage image push` appends prestage's layer to a Node.js base.
    const base = await pushNodeBase(registry.host, cluster.binaries.busybox);
    const built = await runCli(['image', 'push', `${registry.host}/prestage:test`, '--base', base, '--insecure-registry', registry.host]);
    expect(built.code, built.stderr).toBe(0);
    const agentImage = built.stdout.trim();
    expect(agentImage).toMatch(new RegExp(`^${registry.host}/prestage:test@sha256:[0-9a-f]{64}$`));
    // Every platform of the base, each its base layers plus the same prestage layer, under one index.
    const index = (await (await fetch(`http://${registry.host}/v2/prestage/manifests/test`, { headers: { accept: 'application/vnd.docker.distribution.manifest.list.v2+json' } })).json()) as { manifests: Array<{ digest: string; platform: { architecture: string } }> };
    expect(index.manifests.map((entry) => entry.platform.architecture)).toEqual(['amd64', 'arm64']);
    const appLayers = new Set<string>();
    for (const entry of index.manifests) {
      const manifest = (await (await fetch(`http://${registry.host}/v2/prestage/manifests/${entry.digest}`, { headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' } })).json()) as { config: { digest: string }; layers: Array<{ digest: string }> };
      expect(manifest.layers).toHaveLength(2);
      appLayers.add(manifest.layers[1]!.digest);
      const config = (await (await fetch(`http://${registry.host}/v2/prestage/blobs/${manifest.config.digest}`)).json()) as { architecture: string; config: { Entrypoint: string[]; WorkingDir: string } };
      expect(config).toMatchObject({ architecture: entry.platform.architecture, config: { Entrypoint: ['node', '/app/bin/prestage.js'], WorkingDir: '/app' } });
    }
    expect(appLayers.size).toBe(1);
    // This node's CRI-O keeps its store under the test bed's dir: what `install --image-store` is for.
    const manifests = installManifests({ namespace: NAMESPACE, image: agentImage, agentArgs: ['--log-level=debug'], imageStore: node.crio.root });
    const daemonSet = testbedDaemonSet(manifests);
    await applyServerSide(cluster.kubeConfig, manifests.filter((manifest) => manifest.kind === 'CustomResourceDefinition'));
    await waitForCrdsEstablished(cluster.kubeConfig, CRDS.map((crd) => crd.metadata.name));
    await applyServerSide(cluster.kubeConfig, manifests.filter((manifest) => manifest.kind !== 'CustomResourceDefinition'));

    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    let seen = '';
    const pod = await waitFor('the DaemonSet pod on the worker to run', async () => {
      const pods = await core.listNamespacedPod({ namespace: NAMESPACE, fieldSelector: `spec.nodeName=${node.name}` });
      seen = JSON.stringify(pods.items.map((candidate) => candidate.status));
      const running = pods.items.find((candidate) => candidate.status?.containerStatuses?.[0]?.state?.running);
      return running;
    }, 180_000, 1_000).catch(async (error: Error) => {
      const events = await core.listNamespacedEvent({ namespace: NAMESPACE });
      throw new Error(`${error.message}; pods: ${seen}; events: ${events.items.map((event) => `${event.reason}: ${event.message}`).join(' | ')}`);
    });
    expect(pod.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'DaemonSet', name: AGENT_NAME });
    expect(daemonSet.spec.template.spec.containers[0].image).toBe(agentImage);

    // The kubelet's projected token: bound to this pod, carrying its node's name.
    const claims = tokenClaims(await findProjectedToken(pod.metadata?.uid as string));
    expect(claims['kubernetes.io']).toMatchObject({ namespace: NAMESPACE, node: { name: node.name }, pod: { name: pod.metadata?.name }, serviceaccount: { name: AGENT_NAME } });

    const pushed = await pushImage(registry.host, 'pin-me', [[file('payload.txt', Buffer.from(`pin me ${Date.now()}`))]], { Cmd: ['/bin/true'] });
    await applyServerSide(cluster.kubeConfig, [{
      apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name: 'workers' },
      spec: { pinnedImages: [{ name: pushed }], nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } } },
    } as Manifest]);
    // Written by the agent under the admission policy, which admits only a token whose
    // `${NODE_NAME_EXTRA}` extra names this node.
    const status = await waitFor('the agent to pin the set on its node', async () => {
      const set = await nodeSetEntry('workers');
      return set && set.currentGeneration === set.desiredGeneration && set.images?.[0]?.state === 'Pinned' ? set : undefined;
    }, 120_000, 1_000);
    expect(status.images?.map((image) => image.name)).toEqual([pushed]);
    expect(await readFile(join(node.crio.confDir, '99-prestage-pinned-images'), 'utf8')).toContain(JSON.stringify(pushed));
    // As rendered: the default reload (CRI-O found by its command line), not privileged (root without any
    // capability, no SYS_PTRACE), no path to the host's root, nothing written outside its mounts.
    expect(daemonSet.spec.template.spec.containers[0].args.some((arg: string) => arg.startsWith('--reload'))).toBe(false);
    expect(daemonSet.spec.template.spec.containers[0].securityContext).toEqual({ runAsUser: 0, privileged: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] }, seLinuxOptions: { type: 'spc_t' } });
    expect(JSON.stringify(daemonSet)).not.toContain('/proc/1');
    // The pod's process has no capability at all (CapEff 0), yet it signalled CRI-O and wrote the drop-in.
    expect(await effectiveCapabilities(node.crio.socketPath)).toBe('0000000000000000');
    expect(readdirSync(node.crio.confDir).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    const after = await core.readNamespacedPod({ namespace: NAMESPACE, name: pod.metadata?.name as string });
    expect(after.status?.containerStatuses?.[0]?.restartCount).toBe(0);
  }, 600_000);

  it('runs the single executable (npm run dist) as the agent, on a base without Node.js: it pins a set too', async () => {
    const dist = mkdtempSync(join(tmpdir(), 'prestage-daemonset-dist-'));
    try {
      await run(process.execPath, [join(ROOT, 'node_modules/tsx/dist/cli.mjs'), join(ROOT, 'scripts/dist.ts'), '--out', dist], { cwd: ROOT });
      const base = await pushNodeBase(registry.host, cluster.binaries.busybox, { node: false });
      const built = await runCli(['image', 'push', `${registry.host}/prestage:exe`, '--executable', dist, '--base', base, '--insecure-registry', registry.host]);
      expect(built.code, built.stderr).toBe(0);
      const agentImage = built.stdout.trim();
      const manifests = installManifests({ namespace: NAMESPACE, image: agentImage, agentArgs: ['--log-level=debug'], imageStore: node.crio.root });
      testbedDaemonSet(manifests);
      await applyServerSide(cluster.kubeConfig, manifests.filter((manifest) => manifest.kind !== 'CustomResourceDefinition'));

      const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
      // The control-plane node's pod never runs (no kubelet there): it is the one unavailable pod the
      // rolling update allows, so the update never replaces the worker's. Replaced by hand, as with OnDelete.
      for (const old of (await core.listNamespacedPod({ namespace: NAMESPACE, fieldSelector: `spec.nodeName=${node.name}` })).items) {
        await core.deleteNamespacedPod({ namespace: NAMESPACE, name: old.metadata!.name!, gracePeriodSeconds: 0 });
      }
      const pod = await waitFor('the executable\'s pod on the worker to run', async () => {
        const pods = await core.listNamespacedPod({ namespace: NAMESPACE, fieldSelector: `spec.nodeName=${node.name}` });
        return pods.items.find((candidate) => candidate.spec?.containers[0]?.image === agentImage && candidate.status?.containerStatuses?.[0]?.state?.running);
      }, 180_000, 1_000);

      const pushed = await pushImage(registry.host, 'pin-me-too', [[file('payload.txt', Buffer.from(`pin me too ${Date.now()}`))]], { Cmd: ['/bin/true'] });
      await applyServerSide(cluster.kubeConfig, [{
        apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name: 'workers-executable' },
        spec: { pinnedImages: [{ name: pushed }], nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } } },
      } as Manifest]);
      await waitFor('the executable agent to pin the set on its node', async () => {
        const set = await nodeSetEntry('workers-executable');
        return set && set.currentGeneration === set.desiredGeneration && set.images?.[0]?.state === 'Pinned' ? set : undefined;
      }, 120_000, 1_000);
      expect(await readFile(join(node.crio.confDir, '99-prestage-pinned-images'), 'utf8')).toContain(JSON.stringify(pushed));
      const after = await core.readNamespacedPod({ namespace: NAMESPACE, name: pod.metadata?.name as string });
      expect(after.status?.containerStatuses?.[0]?.restartCount).toBe(0);
    } finally {
      rmSync(dist, { recursive: true, force: true });
    }
  }, 600_000);

  it('runs the GitOps gate Job (plan --gitops) under the kubelet: it completes only once the agent has staged its set', async () => {
    // The image the gate runs: the executable agent image the test before pushed (its entrypoint is prestage).
    const gateImage = `${registry.host}/prestage:exe`;
    const pushed = await pushImage(registry.host, 'gate-me', [[file('payload.txt', Buffer.from(`gate me ${Date.now()}`))]], { Cmd: ['/bin/true'] });
    // Paused: the agent pulls nothing until it is resumed, so the gate has something to wait for.
    await applyServerSide(cluster.kubeConfig, [{
      apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name: 'gated', annotations: { [PAUSED_ANNOTATION]: new Date().toISOString() } },
      spec: { pinnedImages: [{ name: pushed }], nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } } },
    } as Manifest]);
    // gateJob reads only the release's version and the sets' names from the plan.
    const plan = { release: { version: '4.16.3' }, sets: [{ name: 'gated' }] } as unknown as Plan;
    const options: GitOpsOptions = { tool: 'argocd', gateImage, namespace: 'prestage-gate', fluxPath: '.', fluxSource: 'flux-system' };
    const job = gateJob(plan, 'prestage', options) as V1Job;
    // The test bed's differences only: no pod network (the API server listens on 127.0.0.1), one node with a kubelet.
    const pod = job.spec!.template.spec!;
    pod.hostNetwork = true;
    pod.nodeName = node.name;
    pod.containers[0]!.env = [{ name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' }, { name: 'KUBERNETES_SERVICE_PORT', value: new URL(cluster.apiServerUrl).port }];
    // The access in its order (the Namespace first); the Job as a controller creates it (prestage
    // applies only the kinds it installs; a gate Job is the GitOps controller's to apply).
    await applyServerSide(cluster.kubeConfig, gateAccess('prestage-gate', 'prestage') as Manifest[]);
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    const jobName = job.metadata!.name!;
    const gatePods = async () => (await core.listNamespacedPod({ namespace: 'prestage-gate', labelSelector: `job-name=${jobName}` })).items;
    const batch = cluster.kubeConfig.makeApiClient(BatchV1Api);
    await batch.createNamespacedJob({ namespace: 'prestage-gate', body: job });

    await waitFor('the gate pod to run', async () => (await gatePods()).find((candidate) => candidate.status?.containerStatuses?.[0]?.state?.running), 180_000, 1_000);
    await waitFor('the agent to report the set paused', async () => ((await nodeSetEntry('gated'))?.waiting ? true : undefined), 120_000, 1_000);
    // Not staged yet: the gate still runs (neither succeeded nor failed).
    const waiting = await batch.readNamespacedJob({ namespace: 'prestage-gate', name: jobName });
    expect([waiting.status?.succeeded ?? 0, waiting.status?.failed ?? 0, waiting.status?.active]).toEqual([0, 0, 1]);

    await cluster.kubeConfig.makeApiClient(CustomObjectsApi).patchClusterCustomObject({ group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS, name: 'gated', body: { metadata: { annotations: { [PAUSED_ANNOTATION]: null } } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    const done = await waitFor('the gate Job to end', async () => {
      const current = await batch.readNamespacedJob({ namespace: 'prestage-gate', name: jobName });
      return current.status?.succeeded === 1 || (current.status?.failed ?? 0) > 0 ? current : undefined;
    }, 240_000, 1_000);
    const gatePod = (await gatePods())[0]!;
    const log = await core.readNamespacedPodLog({ namespace: 'prestage-gate', name: gatePod.metadata!.name!, container: 'wait' }).catch((error: Error) => error.message);
    expect([done.status?.succeeded, done.status?.failed ?? 0], log).toEqual([1, 0]);
    expect(await readFile(join(node.crio.confDir, '99-prestage-pinned-images'), 'utf8')).toContain(JSON.stringify(pushed));
  }, 600_000);
});

/** The worker's NodePinnedImages entry for `set`, as its agent last reported it (none yet: undefined). */
async function nodeSetEntry(set: string) {
  const custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
  const object = (await custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: node.name }).catch(() => undefined)) as NodePinnedImages | undefined;
  return object?.status?.pinnedImageSets?.find((candidate) => candidate.name === set);
}

/**
 * The rendered DaemonSet, changed only where the test bed differs from a node (see the top): each
 * host path it names (volume source, mount point and flag alike, as the DaemonSet mounts every host
 * path at its own path) becomes the node's own copy under its directory.
 */
function testbedDaemonSet(manifests: Manifest[]) {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const daemonSet = manifests.find((manifest) => manifest.kind === 'DaemonSet') as any;
  const spec = daemonSet.spec.template.spec;
  const nodePaths: Record<string, string> = {
    [NODE_PATHS.crioSocket]: node.crio.socketPath,
    // Read-only: the node directory holds crio.conf (and, unlike /etc/crio, the rest of the node's files).
    [NODE_PATHS.crioConfigDir]: nodeDir,
    [NODE_PATHS.crioDropInDir]: node.crio.confDir,
    [NODE_PATHS.kubeletPullSecret]: join(nodeDir, 'kubelet', 'config.json'),
    [NODE_PATHS.registriesConf]: join(nodeDir, 'registries.conf'),
    [NODE_PATHS.registriesConfDir]: join(nodeDir, 'registries.conf.d'),
    [node.crio.root]: node.crio.root,
  };
  const mapped = (path: string, what: string): string => {
    const found = Object.keys(nodePaths).filter((hostPath) => path === hostPath || path.startsWith(`${hostPath}/`)).sort((a, b) => b.length - a.length)[0];
    if (found === undefined) throw new Error(`the DaemonSet names a new host path ${path} (${what}): map it here`);
    return `${nodePaths[found]}${path.slice(found.length)}`;
  };
  for (const volume of spec.volumes) volume.hostPath.path = mapped(volume.hostPath.path, `volume ${volume.name}`);
  const container = spec.containers[0];
  for (const mount of container.volumeMounts) mount.mountPath = mapped(mount.mountPath, `mount ${mount.name}`);
  container.args = container.args.map((arg: string) => {
    const match = /^(--[a-z-]+=)(\/.*)$/.exec(arg);
    return match ? `${match[1]}${mapped(match[2] as string, arg)}` : arg;
  });
  spec.hostNetwork = true;
  container.env.push({ name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' }, { name: 'KUBERNETES_SERVICE_PORT', value: new URL(cluster.apiServerUrl).port });
  return daemonSet;
}

/** CapEff of the agent's process on this host: the node process whose command line runs `prestage agent` with this socket. */
async function effectiveCapabilities(socketPath: string): Promise<string> {
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    const cmdline = await readFile(join('/proc', pid, 'cmdline'), 'utf8').catch(() => '');
    if (!cmdline.includes('\0agent\0') || !cmdline.includes(`--cri-socket=${socketPath}\0`)) continue;
    const status = await readFile(join('/proc', pid, 'status'), 'utf8').catch(() => '');
    const capEff = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    if (capEff !== undefined) return capEff;
  }
  throw new Error(`no prestage agent process for ${socketPath} in /proc`);
}

async function findProjectedToken(podUid: string): Promise<string> {
  const volumes = join(kubeletRoot, 'pods', podUid, 'volumes', 'kubernetes.io~projected');
  const [volume] = readdirSync(volumes).filter((name) => name.startsWith('kube-api-access-'));
  return readFile(join(volumes, volume as string, 'token'), 'utf8');
}

function tokenClaims(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString('utf8')) as Record<string, unknown>;
}

// --- images built in code ---------------------------------------------------------------

/**
 * A stand-in for docker.io/library/node:20-bookworm-slim (no route to Docker Hub here): `node`
 * with its shared libraries and busybox, as an index of two platforms (the same bytes labelled
 * arm64 too: `image push` must build every platform the base offers). Returns `host/node-base:20`.
 */
async function pushNodeBase(host: string, busyboxPath: string, options: { node: boolean } = { node: true }): Promise<string> {
  const name = options.node ? 'node-base' : 'libc-base';
  const runtime: Entry[] = [
    dir('bin/'), dir('etc/'), dir('proc/'), dir('sys/'), dir('dev/'), dir('tmp/', 0o1777), dir('usr/'), dir('usr/lib/'), dir('usr/lib/x86_64-linux-gnu/'), dir('usr/lib64/'), dir('usr/local/'), dir('usr/local/bin/'),
    link('lib', 'usr/lib'), link('lib64', 'usr/lib64'),
    file('bin/busybox', readFileSync(busyboxPath), 0o755), link('bin/sh', 'busybox'),
    // Without Node.js: what the single executable needs (the C and C++ libraries node links against).
    ...(options.node ? [file('usr/local/bin/node', readFileSync(process.execPath), 0o755)] : []),
  ];
  const { stdout: ldd } = await run('ldd', [process.execPath]);
  for (const [, path] of ldd.matchAll(/(\/\S+\.so[.\d]*)/g)) {
    const real = realpathSync(path as string);
    runtime.push(file(real.slice(1), readFileSync(real), 0o755));
    const base = (path as string).split('/').pop() as string;
    if ((path as string).startsWith('/lib64/')) runtime.push(link(`usr/lib64/${base}`, real));
    else if (`/usr/lib/x86_64-linux-gnu/${base}` !== real) runtime.push(link(`usr/lib/x86_64-linux-gnu/${base}`, real.split('/').pop() as string));
  }
  const config = options.node ? { Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'NODE_VERSION=20'], Cmd: ['node'] } : { Env: ['PATH=/usr/local/bin:/usr/bin:/bin'], Cmd: ['sh'] };
  const platforms = [];
  for (const architecture of ['amd64', 'arm64']) {
    const pushed = await pushImage(host, name, [runtime], config, architecture);
    platforms.push({ mediaType: 'application/vnd.docker.distribution.manifest.v2+json', digest: pushed.slice(pushed.indexOf('@') + 1), size: pushedSizes.get(pushed) as number, platform: { architecture, os: 'linux' } });
  }
  const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.list.v2+json', manifests: platforms }));
  const response = await fetch(`http://${host}/v2/${name}/manifests/20`, { method: 'PUT', headers: { 'content-type': 'application/vnd.docker.distribution.manifest.list.v2+json' }, body: index });
  if (response.status !== 201) throw new Error(`manifest list PUT ${name}: HTTP ${response.status}`);
  return `${host}/${name}:20`;
}
