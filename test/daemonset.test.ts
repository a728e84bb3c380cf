/**
 * The agent as deployed: `prestage install` applied to the test bed, and its DaemonSet pod run by a
 * REAL kubelet (v1.34, on one node's CRI-O, with a real kube-controller-manager and kube-scheduler
 * turning the DaemonSet into a bound pod). The pod mounts the CRI socket, /etc/crio, /etc/containers
 * and the kubelet pull secret from the host, authenticates with its pod-bound ServiceAccount token
 * (whose node-name claim the admission policy checks), and pulls and pins a PinnedImageSet's image.
 *
 * What the test bed changes, and why (everything else is what `prestage install` renders):
 * - hostPath sources, and the host files read through /proc/1/root, point at the node's own
 *   directories (every simulated node shares one host);
 *   the reload is the default one (SIGHUP to the CRI-O that /proc shows reading the mounted
 *   drop-in directory; here several CRI-Os run, one per simulated node); `hostNetwork: true` and
 *   KUBERNETES_SERVICE_HOST/PORT, because there is no pod network or kube-proxy to reach the API
 *   server and the registry, which listen on 127.0.0.1.
 * - CRI-O runs containers with runc (Debian's crun 1.8.1 rejects the OCI spec version CRI-O 1.34
 *   writes: "unknown version specified") through a shim that drops what this VM cannot grant:
 *   a negative oom_score_adj and CAP_SYS_RESOURCE (not in the bounding set) and hugepage limits
 *   (no hugetlb cgroup hierarchy). The pause image is a busybox `sleep` from the test registry.
 *   A loopback-only CNI network makes CRI-O report NetworkReady, so the Node goes Ready.
 * - The node directory is bind-mounted onto itself as rshared: CRI-O gives hostPath volumes that
 *   contain its storage root HostToContainer propagation, which needs a shared or slave source
 *   mount (systemd makes / shared on real nodes; / is private here).
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { pack } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, CRDS, GROUP, NODE_PINNED_IMAGES, VERSION, type NodePinnedImages } from '../src/api/prestage.js';
import { applyServerSide, waitForCrdsEstablished, type Manifest } from '../src/install/apply.js';
import { AGENT_NAME, installManifests } from '../src/install/manifests.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { kubeconfig as kubeconfigFor } from './cluster/control-plane.js';
import { Daemon, waitFor } from './cluster/processes.js';
import { freePorts } from './cluster/ports.js';
import { startRegistry, type RegistryHandle } from './harness/registry.js';
import { finishedTar, sha256 } from './cluster/registry.js';
import { runCli } from './support/cli.js';

const run = promisify(execFile);
const NAMESPACE = 'prestage';

let registry: RegistryHandle;
let cluster: TestCluster;
let node: TestNode;
let nodeDir: string;
let kubeletRoot: string;
const daemons: Daemon[] = [];
const cleanups: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  registry = await startRegistry();
  cluster = await startCluster({ workers: 1, insecureRegistries: [registry.host] });
  node = cluster.nodes.find((candidate) => candidate.role === 'worker') as TestNode;
  nodeDir = dirname(node.crio.confDir);
  const { binaries } = cluster;

  // Before CRI-O pins any namespace under it (a later bind would hide those pins).
  await run('mount', ['--rbind', nodeDir, nodeDir]);
  cleanups.push(() => run('umount', ['--recursive', '--lazy', nodeDir]).catch(() => undefined));
  await run('mount', ['--make-rshared', nodeDir]);

  const busybox = await readFile(binaries.busybox);
  const pause = await pushImage(registry.host, 'pause', [[
    dir('bin/'), file('bin/busybox', busybox, 0o755), link('bin/sleep', 'busybox'),
  ]], { Entrypoint: ['/bin/sleep', 'infinity'] });

  const shim = join(cluster.dir, 'runc-shim');
  await writeFile(shim, `#!/bin/bash
# See test/daemonset.test.ts: drop what this VM cannot grant from the bundle's config.json.
args=("$@"); bundle=""
for ((i = 0; i < \${#args[@]}; i++)); do
  case "\${args[i]}" in --bundle|-b) bundle="\${args[i+1]}";; --bundle=*) bundle="\${args[i]#--bundle=}";; esac
done
if [[ -n $bundle && -f $bundle/config.json ]]; then
  jq '(if (.process.oomScoreAdj // 0) < 0 then .process.oomScoreAdj = 0 else . end)
    | (if .linux.resources.hugepageLimits then del(.linux.resources.hugepageLimits) else . end)
    | (if .process.capabilities then .process.capabilities |= map_values(map(select(. != "CAP_SYS_RESOURCE"))) else . end)' \\
    "$bundle/config.json" > "$bundle/config.json.shim" && mv "$bundle/config.json.shim" "$bundle/config.json"
fi
exec ${binaries.runc} "$@"
`);
  await chmod(shim, 0o755);
  const toml = JSON.stringify;
  await writeFile(join(node.crio.confDir, '05-testbed-run-containers.conf'), `[crio.runtime]
default_runtime = "runc"
[crio.runtime.runtimes.runc]
runtime_path = ${toml(shim)}
runtime_root = ${toml(join(nodeDir, 'run', 'runc'))}
monitor_path = ${toml(binaries.conmon)}
monitor_cgroup = "pod"
[crio.image]
pause_image = ${toml(pause)}
pause_command = ""
`);
  await mkdir(join(nodeDir, 'cni', 'bin'), { recursive: true });
  await run('cp', [join(binaries.cniPlugins, 'loopback'), join(nodeDir, 'cni', 'bin')]);
  await writeFile(join(nodeDir, 'cni', 'net.d', '10-loopback.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: 'testbed-loopback', plugins: [{ type: 'loopback' }] }));
  await node.crio.restart();
  cleanups.push(() => removeContainers(binaries.runc, join(nodeDir, 'run', 'runc')));
  // Last: the kubelet's (now empty) cgroupfs hierarchy; rmdir refuses anything still in use.
  cleanups.unshift(() => run('sh', ['-c', 'find /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods -depth -type d -exec rmdir {} + 2>/dev/null; true']));

  const pki = join(cluster.dir, 'control-plane', 'pki');
  const admin = cluster.kubeconfigPath;
  const controllers = (name: string, command: string, args: string[]) => {
    const daemon = Daemon.start({ name, command, args: [`--kubeconfig=${admin}`, `--authentication-kubeconfig=${admin}`, `--authorization-kubeconfig=${admin}`, '--leader-elect=false', '--secure-port=0', ...args], logPath: join(cluster.dir, `${name}.log`) });
    daemons.push(daemon);
  };
  controllers('kube-controller-manager', binaries['kube-controller-manager'], [`--root-ca-file=${join(pki, 'ca.crt')}`, `--service-account-private-key-file=${join(pki, 'sa.key')}`, '--controllers=*']);
  controllers('kube-scheduler', binaries['kube-scheduler'], []);

  // The kubelet authenticates as the node (system:node:<name>), so the Node authorizer and
  // NodeRestriction judge it as on a real cluster.
  const kubeletDir = join(nodeDir, 'kubelet');
  kubeletRoot = join(kubeletDir, 'root');
  await mkdir(kubeletRoot, { recursive: true });
  await run('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2',
    '-CA', join(pki, 'ca.crt'), '-CAkey', join(pki, 'ca.key'), '-keyout', join(kubeletDir, 'node.key'), '-out', join(kubeletDir, 'node.crt'),
    '-subj', `/O=system:nodes/CN=system:node:${node.name}`, '-addext', 'basicConstraints=critical,CA:FALSE', '-addext', 'extendedKeyUsage=clientAuth',
  ]);
  const ca = await readFile(join(pki, 'ca.crt'));
  await writeFile(join(kubeletDir, 'kubeconfig'), yaml.dump(kubeconfigFor(cluster.apiServerUrl, ca, { 'client-certificate': join(kubeletDir, 'node.crt'), 'client-key': join(kubeletDir, 'node.key') })));
  const [kubeletPort] = await freePorts(1);
  await writeFile(join(kubeletDir, 'config.yaml'), yaml.dump({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: '127.0.0.1',
    port: kubeletPort,
    readOnlyPort: 0,
    healthzPort: 0,
    cgroupDriver: 'cgroupfs',
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${node.crio.socketPath}`,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: false }, x509: { clientCAFile: join(pki, 'ca.crt') } },
    authorization: { mode: 'AlwaysAllow' },
    podLogsDir: join(kubeletDir, 'pod-logs'),
    resolvConf: '',
    oomScoreAdj: 0,
    evictionHard: {},
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
  }));
  daemons.push(Daemon.start({
    name: 'kubelet',
    command: binaries.kubelet,
    args: [`--config=${join(kubeletDir, 'config.yaml')}`, `--kubeconfig=${join(kubeletDir, 'kubeconfig')}`, `--root-dir=${kubeletRoot}`, `--hostname-override=${node.name}`, '--v=1'],
    logPath: join(kubeletDir, 'kubelet.log'),
  }));
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  await waitFor(`the kubelet to report ${node.name} Ready`, async () => {
    const status = (await core.readNode({ name: node.name })).status;
    const ready = status?.conditions?.find((condition) => condition.type === 'Ready');
    return ready?.status === 'True' && ready.reason === 'KubeletReady' && status?.nodeInfo?.kubeletVersion === cluster.binaries.versions['kube-apiserver'] ? true : undefined;
  }, 120_000, 500);
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  for (const daemon of daemons.reverse()) await daemon.stop().catch(() => undefined);
  for (const cleanup of cleanups.reverse()) await cleanup();
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
    const pod = await waitFor('the DaemonSet pod on the worker to run', async () => {
      const pods = await core.listNamespacedPod({ namespace: NAMESPACE, fieldSelector: `spec.nodeName=${node.name}` });
      const running = pods.items.find((candidate) => candidate.status?.containerStatuses?.[0]?.state?.running);
      return running;
    }, 180_000, 1_000);
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
    const custom = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    // Written by the agent under the admission policy, which admits only a token whose
    // `${NODE_NAME_EXTRA}` extra names this node.
    const status = await waitFor('the agent to pin the set on its node', async () => {
      const object = (await custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: node.name }).catch(() => undefined)) as NodePinnedImages | undefined;
      const set = object?.status?.pinnedImageSets?.find((candidate) => candidate.name === 'workers');
      return set && set.currentGeneration === set.desiredGeneration && set.images?.[0]?.state === 'Pinned' ? set : undefined;
    }, 120_000, 1_000);
    expect(status.images?.map((image) => image.name)).toEqual([pushed]);
    expect(await readFile(join(node.crio.confDir, '99-prestage-pinned-images'), 'utf8')).toContain(JSON.stringify(pushed));
    // As rendered: the default reload, not privileged (root with SYS_PTRACE only), nothing written outside its mounts.
    expect(daemonSet.spec.template.spec.containers[0].args.some((arg: string) => arg.startsWith('--reload'))).toBe(false);
    expect(daemonSet.spec.template.spec.containers[0].securityContext).toMatchObject({ privileged: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'], add: ['SYS_PTRACE'] } });
    const after = await core.readNamespacedPod({ namespace: NAMESPACE, name: pod.metadata?.name as string });
    expect(after.status?.containerStatuses?.[0]?.restartCount).toBe(0);
  }, 600_000);
});

/** The rendered DaemonSet, changed only where the test bed differs from a node (see the top). */
function testbedDaemonSet(manifests: Manifest[]) {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const daemonSet = manifests.find((manifest) => manifest.kind === 'DaemonSet') as any;
  const spec = daemonSet.spec.template.spec;
  const sources: Record<string, string> = {
    'crio-socket': node.crio.socketPath,
    'crio-config': nodeDir, // holds crio.conf.d/ (the drop-in dir)
    'image-store': node.crio.root,
  };
  for (const volume of spec.volumes) {
    if (!(volume.name in sources)) throw new Error(`the DaemonSet has a new hostPath volume ${volume.name}: map it here`);
    volume.hostPath.path = sources[volume.name];
  }
  const container = spec.containers[0];
  // Host files read through the host's root: this node's copies sit in its directory.
  const hostFiles: Record<string, string> = {
    '/var/lib/kubelet/config.json': join(nodeDir, 'kubelet', 'config.json'),
    '/etc/containers/registries.conf': join(nodeDir, 'registries.conf'),
    '/etc/containers/registries.conf.d': join(nodeDir, 'registries.conf.d'),
  };
  container.args = container.args.map((arg: string) => {
    const match = /^(--[a-z-]+=\/proc\/1\/root)(\/.*)$/.exec(arg);
    if (!match) return arg;
    if (!((match[2] as string) in hostFiles)) throw new Error(`the DaemonSet reads a new host file ${match[2]}: map it here`);
    return `${match[1]}${hostFiles[match[2] as string]}`;
  });
  spec.hostNetwork = true;
  container.env.push({ name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' }, { name: 'KUBERNETES_SERVICE_PORT', value: new URL(cluster.apiServerUrl).port });
  return daemonSet;
}


async function findProjectedToken(podUid: string): Promise<string> {
  const volumes = join(kubeletRoot, 'pods', podUid, 'volumes', 'kubernetes.io~projected');
  const [volume] = readdirSync(volumes).filter((name) => name.startsWith('kube-api-access-'));
  return readFile(join(volumes, volume as string, 'token'), 'utf8');
}

function tokenClaims(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** Containers outlive a stopped kubelet and CRI-O: remove them (and so their conmons). */
async function removeContainers(runc: string, root: string): Promise<void> {
  const listed = await run(runc, ['--root', root, 'list', '-q']).catch(() => ({ stdout: '' }));
  for (const id of listed.stdout.split('\n').filter(Boolean)) await run(runc, ['--root', root, 'delete', '--force', id]).catch(() => undefined);
}

// --- images built in code ---------------------------------------------------------------

interface Entry { readonly name: string; readonly type: 'file' | 'directory' | 'symlink'; readonly mode?: number; readonly content?: Buffer; readonly linkname?: string }
const file = (name: string, content: Buffer, mode = 0o644): Entry => ({ name, type: 'file', mode, content });
const dir = (name: string, mode = 0o755): Entry => ({ name, type: 'directory', mode });
const link = (name: string, linkname: string): Entry => ({ name, type: 'symlink', linkname });

/**
 * A stand-in for docker.io/library/node:20-bookworm-slim (no route to Docker Hub here): `node`
 * with its shared libraries and busybox, as an index of two platforms (the same bytes labelled
 * arm64 too: `image push` must build every platform the base offers). Returns `host/node-base:20`.
 */
async function pushNodeBase(host: string, busyboxPath: string): Promise<string> {
  const runtime: Entry[] = [
    dir('bin/'), dir('etc/'), dir('proc/'), dir('sys/'), dir('dev/'), dir('tmp/', 0o1777), dir('usr/'), dir('usr/lib/'), dir('usr/lib/x86_64-linux-gnu/'), dir('usr/lib64/'), dir('usr/local/'), dir('usr/local/bin/'),
    link('lib', 'usr/lib'), link('lib64', 'usr/lib64'),
    file('bin/busybox', readFileSync(busyboxPath), 0o755), link('bin/sh', 'busybox'),
    file('usr/local/bin/node', readFileSync(process.execPath), 0o755),
  ];
  const { stdout: ldd } = await run('ldd', [process.execPath]);
  for (const [, path] of ldd.matchAll(/(\/\S+\.so[.\d]*)/g)) {
    const real = realpathSync(path as string);
    runtime.push(file(real.slice(1), readFileSync(real), 0o755));
    const base = (path as string).split('/').pop() as string;
    if ((path as string).startsWith('/lib64/')) runtime.push(link(`usr/lib64/${base}`, real));
    else if (`/usr/lib/x86_64-linux-gnu/${base}` !== real) runtime.push(link(`usr/lib/x86_64-linux-gnu/${base}`, real.split('/').pop() as string));
  }
  const config = { Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'NODE_VERSION=20'], Cmd: ['node'] };
  const platforms = [];
  for (const architecture of ['amd64', 'arm64']) {
    const pushed = await pushImage(host, 'node-base', [runtime], config, architecture);
    platforms.push({ mediaType: 'application/vnd.docker.distribution.manifest.v2+json', digest: pushed.slice(pushed.indexOf('@') + 1), size: pushedSizes.get(pushed) as number, platform: { architecture, os: 'linux' } });
  }
  const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.list.v2+json', manifests: platforms }));
  const response = await fetch(`http://${host}/v2/node-base/manifests/20`, { method: 'PUT', headers: { 'content-type': 'application/vnd.docker.distribution.manifest.list.v2+json' }, body: index });
  if (response.status !== 201) throw new Error(`manifest list PUT node-base: HTTP ${response.status}`);
  return `${host}/node-base:20`;
}

/** Manifest sizes by pushed reference, for the index. */
const pushedSizes = new Map<string, number>();

/** Docker schema2, one gzip layer per entry list; returns `host/repository@digest`. */
async function pushImage(host: string, repository: string, layers: Entry[][], config: object, architecture = 'amd64'): Promise<string> {
  const tars = await Promise.all(layers.map((entries) => tarOf([...new Map(entries.map((entry) => [entry.name, entry])).values()])));
  const blobs = tars.map((tar) => gzipSync(tar, { level: 1 }));
  const configBlob = Buffer.from(JSON.stringify({ architecture, os: 'linux', config, rootfs: { type: 'layers', diff_ids: tars.map(sha256) } }));
  for (const blob of [...blobs, configBlob]) {
    const opened = await fetch(`http://${host}/v2/${repository}/blobs/uploads/`, { method: 'POST' });
    const url = new URL(opened.headers.get('location') as string, `http://${host}`);
    url.searchParams.set('digest', sha256(blob));
    const put = await fetch(url, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: blob });
    if (put.status !== 201) throw new Error(`blob PUT ${repository}: HTTP ${put.status}`);
  }
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: configBlob.length, digest: sha256(configBlob) },
    layers: blobs.map((blob) => ({ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: blob.length, digest: sha256(blob) })),
  }));
  const response = await fetch(`http://${host}/v2/${repository}/manifests/${sha256(manifest)}`, { method: 'PUT', headers: { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' }, body: manifest });
  if (response.status !== 201) throw new Error(`manifest PUT ${repository}: HTTP ${response.status}`);
  const reference = `${host}/${repository}@${sha256(manifest)}`;
  pushedSizes.set(reference, manifest.length);
  return reference;
}

function tarOf(entries: Entry[]): Promise<Buffer> {
  const archive = pack();
  for (const entry of entries) {
    if (entry.type === 'file') archive.entry({ name: entry.name, mode: entry.mode }, entry.content ?? Buffer.alloc(0));
    else archive.entry({ name: entry.name, mode: entry.mode ?? 0o755, type: entry.type, linkname: entry.linkname });
  }
  return finishedTar(archive);
}
