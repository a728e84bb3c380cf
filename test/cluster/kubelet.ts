/**
 * Real kubelets (v1.34) on the test bed's nodes, each on its node's CRI-O, several on one host.
 *
 * What a node needs that the plain test bed lacks, and why:
 * - CRI-O runs containers with runc (Debian's crun 1.8.1 rejects the OCI spec version CRI-O 1.34
 *   writes: "unknown version specified") through a shim that drops what this VM cannot grant:
 *   a negative oom_score_adj and CAP_SYS_RESOURCE (not in the bounding set) and hugepage limits
 *   (no hugetlb cgroup hierarchy). The pause image is a busybox `sleep` from a test registry.
 *   A loopback-only CNI network makes CRI-O report NetworkReady, so the Node goes Ready.
 * - Optionally the node directory is bind-mounted onto itself as rshared: CRI-O gives hostPath
 *   volumes that contain its storage root HostToContainer propagation, which needs a shared or
 *   slave source mount (systemd makes / shared on real nodes; / is private here).
 * - Each kubelet has its own cgroup root (`cgroupRoot`, made in every cgroup v1 hierarchy before it
 *   starts, which the kubelet requires): with the default `/`, two kubelets on one host share
 *   `/kubepods`, and each one's orphaned-pod cleanup kills the other's pods' cgroups. The kubelet's
 *   port is a free one, its healthz and read-only ports off, its root and pod-log dirs its node's.
 *
 * The kubelet authenticates as the node (`system:node:<name>`, a client certificate from the test
 * bed's CA), so the Node authorizer and NodeRestriction judge it as on a real cluster.
 */
import { execFile } from 'node:child_process';
import { copyFile, chmod, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { dir, file, link, pushImage } from '../support/built-images.js';
import { kubeconfig as kubeconfigFor } from './control-plane.js';
import type { TestCluster, TestNode } from './index.js';
import { holdHost } from './host-lock.js';
import { freePorts } from './ports.js';
import { Daemon, waitFor } from './processes.js';

const run = promisify(execFile);
const CGROUP_V1 = '/sys/fs/cgroup';

/** A busybox `sleep infinity` as the pause image (no route to registry.k8s.io); returns its digest reference. */
export async function pushPauseImage(host: string, busyboxPath: string): Promise<string> {
  const busybox = await readFile(busyboxPath);
  return pushImage(host, 'pause', [[dir('bin/'), file('bin/busybox', busybox, 0o755), link('bin/sleep', 'busybox')]], { Entrypoint: ['/bin/sleep', 'infinity'] });
}

/** A pod network for one node: a Linux bridge (at most 15 characters) and the node's pod subnet (`10.244.1.0/24`). */
export interface PodNetwork {
  readonly bridge: string;
  readonly subnet: string;
}

export interface Kubelet {
  readonly node: TestNode;
  /** `--root-dir`: pods/, their volumes. */
  readonly rootDir: string;
  /** Its cgroupfs root (`cgroupRoot`). */
  readonly cgroupRoot: string;
  readonly logPath: string;
}

export class KubeletBed {
  private readonly kubelets: Array<{ kubelet: Kubelet; daemon: Daemon }> = [];
  private readonly controllers: Daemon[] = [];
  /** Run in reverse order by stop(), after the kubelets. */
  private readonly cleanups: Array<() => Promise<unknown>> = [];
  private shim: string | undefined;
  /** Held from the first node made to run containers until stop(): see host-lock.ts. */
  private releaseHost: (() => Promise<void>) | undefined;

  constructor(private readonly cluster: TestCluster) {}

  /**
   * Makes `node`'s CRI-O able to run containers (runc shim, `pauseImage`, loopback CNI) and
   * restarts it: its pid changes, so start what signals it (agents) after this.
   */
  async runContainers(node: TestNode, options: { pauseImage: string; sharedMount?: boolean; podNetwork?: PodNetwork }): Promise<void> {
    this.releaseHost ??= await holdHost();
    const nodeDir = dirname(node.crio.confDir);
    const { binaries } = this.cluster;
    if (options.sharedMount) {
      // Before CRI-O pins any namespace under it (a later bind would hide those pins).
      await run('mount', ['--rbind', nodeDir, nodeDir]);
      this.cleanups.push(() => run('umount', ['--recursive', '--lazy', nodeDir]).catch(() => undefined));
      await run('mount', ['--make-rshared', nodeDir]);
    }
    const shim = await this.runcShim();
    const toml = JSON.stringify;
    await writeFile(join(node.crio.confDir, '05-testbed-run-containers.conf'), `[crio.runtime]
default_runtime = "runc"
[crio.runtime.runtimes.runc]
runtime_path = ${toml(shim)}
runtime_root = ${toml(join(nodeDir, 'run', 'runc'))}
monitor_path = ${toml(binaries.conmon)}
monitor_cgroup = "pod"
[crio.image]
pause_image = ${toml(options.pauseImage)}
pause_command = ""
`);
    await mkdir(join(nodeDir, 'cni', 'bin'), { recursive: true });
    for (const plugin of options.podNetwork ? ['loopback', 'bridge', 'host-local'] : ['loopback']) {
      await copyFile(join(binaries.cniPlugins, plugin), join(nodeDir, 'cni', 'bin', plugin));
      await chmod(join(nodeDir, 'cni', 'bin', plugin), 0o755);
    }
    if (options.podNetwork) {
      const { bridge, subnet } = options.podNetwork;
      // Pods get an address on a bridge of the host, which routes to them: the host (kubelet
      // probes, kube-proxy's DNAT of a ClusterIP, the API server's service proxy) reaches them,
      // and they reach the host's own addresses through the bridge's (gateway) address.
      await writeFile(join(nodeDir, 'cni', 'net.d', '10-bridge.conflist'), JSON.stringify({
        cniVersion: '1.0.0',
        name: 'testbed-bridge',
        plugins: [{ type: 'bridge', bridge, isGateway: true, ipMasq: false, ipam: { type: 'host-local', ranges: [[{ subnet }]], routes: [{ dst: '0.0.0.0/0' }], dataDir: join(nodeDir, 'cni', 'ipam') } }],
      }));
      this.cleanups.push(() => run('ip', ['link', 'delete', bridge]).catch(() => undefined));
    } else {
      await writeFile(join(nodeDir, 'cni', 'net.d', '10-loopback.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: 'testbed-loopback', plugins: [{ type: 'loopback' }] }));
    }
    await node.crio.restart();
    // After the containers are gone: what the kubelet and CRI-O mounted under the node's
    // directory and left (the kubelet's bind of its root dir, pinned namespaces, sandbox shm).
    this.cleanups.push(() => unmountBelow(nodeDir));
    this.cleanups.push(() => removeContainers(binaries.runc, join(nodeDir, 'run', 'runc')));
  }

  /** Starts a kubelet for `node` (after runContainers) and resolves once it reports the Node Ready itself. */
  async start(node: TestNode): Promise<Kubelet> {
    const { cluster } = this;
    const nodeDir = dirname(node.crio.confDir);
    const pki = join(cluster.dir, 'control-plane', 'pki');
    const kubeletDir = join(nodeDir, 'kubelet');
    const rootDir = join(kubeletDir, 'root');
    await mkdir(rootDir, { recursive: true });
    const cgroupRoot = `/${basename(cluster.dir)}-${node.name}`;
    await makeCgroupRoot(cgroupRoot);
    // The first kubelet on a host writes its firewall chains; if this bed's is that one, they go with it.
    if (this.kubelets.length === 0 && !(await hasKubeletRules())) this.cleanups.push(removeKubeletRules);
    // Last (cleanups run in reverse): the kubelet's (now empty) cgroups; rmdir refuses anything still in use.
    this.cleanups.unshift(() => removeCgroupRoot(cgroupRoot));
    const kubeconfig = await clientCertKubeconfig(cluster, kubeletDir, 'node', `/O=system:nodes/CN=system:node:${node.name}`);
    const [port] = await freePorts(1);
    await writeFile(join(kubeletDir, 'config.yaml'), yaml.dump({
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      address: '127.0.0.1',
      port,
      readOnlyPort: 0,
      healthzPort: 0,
      cgroupDriver: 'cgroupfs',
      cgroupRoot,
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
    const logPath = join(kubeletDir, 'kubelet.log');
    const daemon = Daemon.start({
      name: `kubelet (${node.name})`,
      command: cluster.binaries.kubelet,
      args: [`--config=${join(kubeletDir, 'config.yaml')}`, `--kubeconfig=${kubeconfig}`, `--root-dir=${rootDir}`, `--hostname-override=${node.name}`, '--v=1'],
      logPath,
    });
    const kubelet: Kubelet = { node, rootDir, cgroupRoot, logPath };
    this.kubelets.push({ kubelet, daemon });
    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    // The test bed registered the Node as Ready with an empty bootID; the kubelet's own status has its host's.
    await waitFor(`the kubelet to report ${node.name} Ready`, async () => {
      const status = (await core.readNode({ name: node.name })).status;
      const ready = status?.conditions?.find((condition) => condition.type === 'Ready');
      return ready?.status === 'True' && ready.reason === 'KubeletReady' && status?.nodeInfo?.bootID && status.nodeInfo.kubeletVersion === cluster.binaries.versions['kube-apiserver'] ? true : undefined;
    }, 120_000, 500);
    return kubelet;
  }

    /**
   * The controllers that turn Deployments and DaemonSets into bound pods: kube-controller-manager
   * (every controller) and kube-scheduler, with the admin credentials; stopped before the kubelets.
   */
  startControllers(): void {
    const { cluster } = this;
    const pki = join(cluster.dir, 'control-plane', 'pki');
    const admin = cluster.kubeconfigPath;
    const start = (name: string, command: string, args: string[]) => {
      this.controllers.push(Daemon.start({ name, command, args: [`--kubeconfig=${admin}`, `--authentication-kubeconfig=${admin}`, `--authorization-kubeconfig=${admin}`, '--leader-elect=false', '--secure-port=0', ...args], logPath: join(cluster.dir, `${name}.log`) }));
    };
    start('kube-controller-manager', cluster.binaries['kube-controller-manager'], [`--root-ca-file=${join(pki, 'ca.crt')}`, `--service-account-private-key-file=${join(pki, 'sa.key')}`, '--controllers=*']);
    start('kube-scheduler', cluster.binaries['kube-scheduler'], []);
  }

  /** Stops the controllers and kubelets, removes their containers, unmounts, removes their cgroups. */
  async stop(): Promise<void> {
    for (const daemon of this.controllers.splice(0).reverse()) await daemon.stop().catch(() => undefined);
    for (const { daemon } of this.kubelets.splice(0).reverse()) await daemon.stop().catch(() => undefined);
    for (const cleanup of this.cleanups.splice(0).reverse()) await cleanup();
    await this.releaseHost?.();
    this.releaseHost = undefined;
  }

  private async runcShim(): Promise<string> {
    if (this.shim) return this.shim;
    const shim = join(this.cluster.dir, 'runc-shim');
    await writeFile(shim, `#!/bin/bash
# See test/cluster/kubelet.ts: drop what this VM cannot grant from the bundle's config.json.
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
exec ${this.cluster.binaries.runc} "$@"
`);
    await chmod(shim, 0o755);
    this.shim = shim;
    return shim;
  }
}

/**
 * A kubeconfig in `dir` for a client certificate the test bed's CA signs for `subject`
 * (`/O=group/CN=user`), as kubeadm issues them to kubelets and kube-proxy; returns its path.
 */
export async function clientCertKubeconfig(cluster: TestCluster, dir: string, name: string, subject: string): Promise<string> {
  const pki = join(cluster.dir, 'control-plane', 'pki');
  await run('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2',
    '-CA', join(pki, 'ca.crt'), '-CAkey', join(pki, 'ca.key'), '-keyout', join(dir, `${name}.key`), '-out', join(dir, `${name}.crt`),
    '-subj', subject, '-addext', 'basicConstraints=critical,CA:FALSE', '-addext', 'extendedKeyUsage=clientAuth',
  ]);
  const ca = await readFile(join(pki, 'ca.crt'));
  const path = join(dir, `${name}.kubeconfig`);
  await writeFile(path, yaml.dump(kubeconfigFor(cluster.apiServerUrl, ca, { 'client-certificate': join(dir, `${name}.crt`), 'client-key': join(dir, `${name}.key`) })));
  return path;
}

/** The cgroup v1 hierarchies mounted here (cpu, memory, ..., name=systemd), not the cgroup2 one. */
async function hierarchies(): Promise<string[]> {
  const names = await readdir(CGROUP_V1);
  const found: string[] = [];
  for (const name of names) {
    if (name === 'unified') continue;
    const path = join(CGROUP_V1, name);
    if ((await stat(path).catch(() => undefined))?.isDirectory()) found.push(path);
  }
  return found;
}

/** The kubelet checks its cgroupRoot exists in every hierarchy; cpuset needs its cpus and mems set. */
async function makeCgroupRoot(root: string): Promise<void> {
  for (const hierarchy of await hierarchies()) {
    const path = join(hierarchy, root);
    await mkdir(path, { recursive: true });
    if (basename(hierarchy) === 'cpuset') {
      for (const key of ['cpuset.cpus', 'cpuset.mems']) await writeFile(join(path, key), await readFile(join(hierarchy, key)));
    }
  }
}

async function removeCgroupRoot(root: string): Promise<void> {
  const paths = (await hierarchies()).map((hierarchy) => join(hierarchy, root));
  await run('sh', ['-c', `for p in "$@"; do [ -d "$p" ] && find "$p" -depth -type d -exec rmdir {} + 2>/dev/null; done; true`, 'sh', ...paths]).catch(() => undefined);
}

/** Lazily unmounts every mount below `dir`, deepest first. */
/** The host firewall chains a kubelet writes (filter, nat, mangle; IPv4 and IPv6). */
const KUBELET_CHAINS: ReadonlyArray<readonly [table: string, chain: string]> = [
  ['filter', 'KUBE-FIREWALL'], ['filter', 'KUBE-KUBELET-CANARY'], ['nat', 'KUBE-KUBELET-CANARY'], ['mangle', 'KUBE-KUBELET-CANARY'], ['mangle', 'KUBE-IPTABLES-HINT'],
];

async function hasKubeletRules(): Promise<boolean> {
  return run('iptables', ['-w', '-t', 'filter', '-S', 'KUBE-FIREWALL']).then(() => true, () => false);
}

/** Once the kubelets stopped: their chains and the INPUT/OUTPUT jumps to KUBE-FIREWALL, which drops non-loopback sources to 127.0.0.0/8. */
async function removeKubeletRules(): Promise<void> {
  for (const tool of ['iptables', 'ip6tables']) {
    for (const hook of ['INPUT', 'OUTPUT']) await run(tool, ['-w', '-t', 'filter', '-D', hook, '-j', 'KUBE-FIREWALL']).catch(() => undefined);
    for (const [table, chain] of KUBELET_CHAINS) {
      await run(tool, ['-w', '-t', table, '-F', chain]).catch(() => undefined);
      await run(tool, ['-w', '-t', table, '-X', chain]).catch(() => undefined);
    }
  }
}

async function unmountBelow(dir: string): Promise<void> {
  const mountInfo = await readFile('/proc/self/mountinfo', 'utf8');
  // Field 5 is the mount point, with spaces and such octal-escaped.
  const points = mountInfo
    .split('\n')
    .map((line) => line.split(' ')[4]?.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))))
    .filter((point): point is string => !!point && point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const point of points) await run('umount', ['--lazy', point]).catch(() => undefined);
}

/** Containers outlive a stopped kubelet and CRI-O: remove them (and so their conmons). */
async function removeContainers(runc: string, root: string): Promise<void> {
  const listed = await run(runc, ['--root', root, 'list', '-q']).catch(() => ({ stdout: '' }));
  for (const id of listed.stdout.split('\n').filter(Boolean)) await run(runc, ['--root', root, 'delete', '--force', id]).catch(() => undefined);
}
