/**
 * The test bed's binaries, as scripts/build-testbed.sh reports them. The script reuses its
 * cache, so asking is cheap; on a cold machine it builds everything first (minutes), with its
 * progress on this process's stderr.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BUILD_SCRIPT = fileURLToPath(new URL('../../scripts/build-testbed.sh', import.meta.url));

/** A cold build of kube-apiserver and CRI-O takes this long on two cores, with margin. */
export const COLD_BUILD_TIMEOUT_MS = 60 * 60_000;

export interface TestbedBinaries {
  readonly etcd: string;
  readonly 'kube-apiserver': string;
  readonly crio: string;
  readonly pinns: string;
  /** The distribution registry v3 (`registry serve CONFIG`): the in-cluster cache's engine in proxy mode. */
  readonly distribution: string;
  readonly conmon: string;
  readonly crun: string;
  /** The DaemonSet test's real node: kubelet, the controllers that turn a DaemonSet into a bound pod, runc, CNI plugins. */
  readonly kubelet: string;
  readonly 'kube-controller-manager': string;
  readonly 'kube-scheduler': string;
  /** The cache test's service proxy (iptables mode): host-network clients reach ClusterIPs. */
  readonly 'kube-proxy': string;
  /** The GitOps test: a real kubectl (`wait --for=condition=Ready`), and kstatus / Argo CD Lua under Go (tools/testbed/gitops-check). */
  readonly kubectl: string;
  readonly 'gitops-check': string;
  /** The OLM test: OLM v0's catalog operator (operator-lifecycle-manager's cmd/catalog), its resolver as a cluster runs it (tools/testbed/olm-catalog). */
  readonly 'olm-catalog': string;
  readonly runc: string;
  /** Directory of the CNI plugins (`loopback`, ...). */
  readonly cniPlugins: string;
  /** A static busybox: the test images' only binary. */
  readonly busybox: string;
  /** OpenShift's CRD folders from github.com/openshift/api, per release branch of the module. */
  readonly openshiftApi: { readonly 'release-4.16': string; readonly 'release-4.21': string; readonly main: string };
  /** OLM's CRD files: github.com/operator-framework/api's crds/ (v0) and operator-controller's (v1: ClusterExtension, ClusterCatalog). */
  readonly olmCrds: { readonly api: string; readonly operatorController: string };
  readonly versions: { readonly etcd: string; readonly 'kube-apiserver': string; readonly crio: string; readonly distribution: string };
}

let binaries: Promise<TestbedBinaries> | undefined;

export function testbedBinaries(): Promise<TestbedBinaries> {
  binaries ??= buildOrReuse().catch((error: unknown) => {
    binaries = undefined;
    throw error;
  });
  return binaries;
}

function buildOrReuse(): Promise<TestbedBinaries> {
  return new Promise((resolve, reject) => {
    const script = spawn('bash', [BUILD_SCRIPT, '--json'], { stdio: ['ignore', 'pipe', 'inherit'], timeout: COLD_BUILD_TIMEOUT_MS });
    let stdout = '';
    script.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    script.once('error', reject);
    script.once('close', (code, signal) => {
      if (code === 0) resolve(JSON.parse(stdout) as TestbedBinaries);
      else reject(new Error(`scripts/build-testbed.sh failed (${signal ?? `exit ${code}`}); its output is above`));
    });
  });
}
