/**
 * A real kube-proxy (v1.34, iptables mode) on the test bed's host: it writes the host's nat rules
 * that send a Service's ClusterIP (and NodePorts) to its endpoints, as on a node. Every simulated
 * node shares this host's network namespace, so one kube-proxy serves them all: CRI-O pulls from
 * the host network, and reaches a ClusterIP only through these rules.
 *
 * It authenticates as `system:kube-proxy` (a client certificate from the test bed's CA), which the
 * API server's bootstrap binding `system:node-proxier` authorizes. Its nat rules are taken out at
 * stop (`kube-proxy --cleanup`), so nothing outlives the test.
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { TestCluster } from './index.js';
import { holdHost } from './host-lock.js';
import { clientCertKubeconfig } from './kubelet.js';
import { freePorts } from './ports.js';
import { Daemon, waitFor } from './processes.js';

const run = promisify(execFile);

export class KubeProxy {
  private constructor(
    private readonly binary: string,
    private readonly daemon: Daemon,
    readonly logPath: string,
    private readonly releaseHost: () => Promise<void>,
  ) {}

  /**
   * Starts it for `nodeName`, with the pods' `clusterCidr`, and resolves once it has written its
   * rules. Start it after that node's kubelet has reported the Node's addresses: kube-proxy waits
   * 30 s for them at start, and exits when they change later.
   */
  static async start(cluster: TestCluster, options: { nodeName: string; clusterCidr: string }): Promise<KubeProxy> {
    const releaseHost = await holdHost();
    try {
      const dir = join(cluster.dir, 'kube-proxy');
      await mkdir(dir, { recursive: true });
      const kubeconfig = await clientCertKubeconfig(cluster, dir, 'kube-proxy', '/CN=system:kube-proxy');
      const [healthz, metrics] = await freePorts(2);
      const logPath = join(dir, 'kube-proxy.log');
      const binary = cluster.binaries['kube-proxy'];
      const daemon = Daemon.start({
        name: 'kube-proxy',
        command: binary,
        args: [
          `--kubeconfig=${kubeconfig}`, '--proxy-mode=iptables', `--hostname-override=${options.nodeName}`, `--cluster-cidr=${options.clusterCidr}`,
          `--healthz-bind-address=127.0.0.1:${healthz}`, `--metrics-bind-address=127.0.0.1:${metrics}`,
          // The host's conntrack table and OOM score are not kube-proxy's to set on a shared test host.
          '--conntrack-max-per-core=0', '--conntrack-tcp-timeout-established=0', '--conntrack-tcp-timeout-close-wait=0', '--oom-score-adj=0',
          '--iptables-min-sync-period=0s', '--v=2',
        ],
        logPath,
      });
      const proxy = new KubeProxy(binary, daemon, logPath, releaseHost);
      await waitFor('kube-proxy to write its nat rules', async () => {
        const log = await readFile(logPath, 'utf8');
        if (!daemon.alive) throw new Error(`kube-proxy exited; see ${logPath}:\n${log.slice(-2000)}`);
        return log.includes('"SyncProxyRules complete" ipFamily="IPv4"') ? true : undefined;
      }, 60_000, 250);
      return proxy;
    } catch (error) {
      await releaseHost();
      throw error;
    }
  }

  /** Resolves once the host's rules send `clusterIP:port` somewhere (the Service has ready endpoints). */
  async routes(clusterIP: string, port: number): Promise<void> {
    await waitFor(`kube-proxy to route ${clusterIP}:${port}`, async () => {
      const { stdout } = await run('iptables', ['-w', '-t', 'nat', '-S', 'KUBE-SERVICES']);
      return stdout.split('\n').some((rule) => rule.includes(`-d ${clusterIP}/32`) && rule.includes(`--dport ${port}`) && rule.includes('-j KUBE-SVC-')) ? true : undefined;
    }, 60_000, 250);
  }

  /** Resolves once the host's rules answer `port` on its own addresses (a NodePort Service with ready endpoints). */
  async routesNodePort(port: number): Promise<void> {
    await waitFor(`kube-proxy to route NodePort ${port}`, async () => {
      const { stdout } = await run('iptables', ['-w', '-t', 'nat', '-S', 'KUBE-NODEPORTS']);
      return stdout.split('\n').some((rule) => rule.includes(`--dport ${port}`) && rule.includes('-j KUBE-EXT-')) ? true : undefined;
    }, 60_000, 250);
  }

  async stop(): Promise<void> {
    await this.daemon.stop().catch(() => undefined);
    await run(this.binary, ['--cleanup', '--proxy-mode=iptables']).catch(() => undefined);
    await this.releaseHost();
  }
}
