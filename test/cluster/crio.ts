/**
 * One real CRI-O daemon per test node. Every state path, lock and socket lives under the node's
 * own directory, so several CRI-Os share the machine without seeing each other; nothing under
 * /etc/containers, /var/lib/crio or /var/run/crio is read or written.
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CriClient, type RuntimeVersion } from '../../src/cri/client.js';
import { Daemon, waitFor } from './processes.js';
import type { TestbedBinaries } from './binaries.js';
import { withGoCollector, type GoCollector } from '../harness/go-runtime.js';

const run = promisify(execFile);

/**
 * containers/storage's driver on test-bed nodes: overlay, as on RHCOS. With vfs (the first
 * choice), which copies every parent layer into each child, and Go's default collector, pulling
 * the fixture release cost CRI-O 1.5x the CPU (`npm run bench:testbed`).
 */
export type StorageDriver = 'overlay' | 'vfs';

export interface RegistryConfig {
  /** Source registry → mirror host: `{ 'quay.io': '127.0.0.1:5000' }`. Mirrors are plain http. */
  readonly mirrors: Readonly<Record<string, string>>;
  /** Registries reached over plain http (`127.0.0.1:5000`). */
  readonly insecure: readonly string[];
}

export interface CrioOptions {
  readonly dir: string;
  readonly binaries: TestbedBinaries;
  readonly registries: RegistryConfig;
  /** Size of a tmpfs holding the image store and pull temp files; unlimited (host disk) if absent. */
  readonly imageStoreBytes?: number;
  /**
   * CRI-O's `global_auth_file`: registry credentials it reads itself (OpenShift points it at the
   * kubelet's `/var/lib/kubelet/config.json`). Read at each pull; a missing file means none.
   */
  readonly authFile?: string;
  /** Signature checks CRI-O enforces on every pull; default: accept anything. */
  readonly signatures?: SignatureConfig;
  /** Default overlay; the benchmark compares vfs. */
  readonly storageDriver?: StorageDriver;
  /** Default quiet (`harness/go-runtime.ts`); the benchmark compares Go's own default. */
  readonly goCollector?: GoCollector;
}

/**
 * What a node's containers/image reads to judge signatures: policy.json, and registries.d
 * files (`docker: {<scope>: {use-sigstore-attachments: true}}`, as MCO writes them for the
 * ClusterImagePolicy scopes). CRI-O sets no registries.d path of its own, so containers/image
 * takes `$HOME/.config/containers/registries.d` when it exists: each node's HOME is its own dir.
 */
export interface SignatureConfig {
  readonly policy: object;
  /** File name → YAML text. */
  readonly registriesD: Readonly<Record<string, string>>;
}

export class CrioNode {
  readonly socketPath: string;
  /** The node's `crio.conf.d`: drop-ins here (e.g. `50-pinned-images`) apply on reload. */
  readonly confDir: string;
  /** containers/storage root: where pulled images live. */
  readonly root: string;
  readonly runroot: string;
  readonly logPath: string;
  readonly configPath: string;
  private readonly diskDir: string;
  private daemon: Daemon | undefined;
  private version: RuntimeVersion | undefined;

  private constructor(private readonly options: CrioOptions) {
    const { dir } = options;
    this.socketPath = join(dir, 'crio.sock');
    this.confDir = join(dir, 'crio.conf.d');
    this.configPath = join(dir, 'crio.conf');
    this.diskDir = join(dir, 'disk');
    this.root = join(this.diskDir, 'storage');
    this.runroot = join(dir, 'run', 'storage');
    this.logPath = join(dir, 'crio.log');
  }

  get storageDriver(): StorageDriver {
    return this.options.storageDriver ?? 'overlay';
  }

  static async start(options: CrioOptions): Promise<CrioNode> {
    const node = new CrioNode(options);
    await node.writeConfiguration();
    await node.launch();
    return node;
  }

  /** What the running daemon reported over CRI, e.g. `1.34.0`. */
  get runtimeVersion(): string {
    if (!this.version) throw new Error(`CRI-O for ${this.options.dir} has not started`);
    return this.version.runtimeVersion;
  }

  get pid(): number {
    return this.running().pid;
  }

  /** SIGHUP, as `systemctl reload crio`; resolves once CRI-O has re-read its configuration. */
  async reload(): Promise<void> {
    const daemon = this.running();
    const offset = daemon.logSize();
    daemon.signal('SIGHUP');
    const outcome = await waitFor('CRI-O to finish reloading', async () => {
      const log = daemon.logSince(offset);
      if (log.includes('Configuration reload completed')) return 'ok';
      const failure = /Unable to reload configuration: (.*)/.exec(log);
      return failure ? failure[1] : undefined;
    }, 30_000, 50);
    if (outcome !== 'ok') throw new Error(`CRI-O reload failed: ${outcome}`);
  }

  /**
   * Stop and start with the same configuration and storage, as `systemctl restart crio`: SIGTERM
   * (CRI-O's graceful stop lets calls in flight, pulls included, finish), then SIGKILL if it has
   * not exited within `graceMs` (systemd's TimeoutStopSec, 90 s on a real node).
   */
  async restart(options: { graceMs?: number } = {}): Promise<void> {
    await this.daemon?.stop(options.graceMs ?? 30_000);
    await this.launch();
  }

  /** SIGKILL, as a crash would: the next start sees an unclean shutdown. */
  async kill(): Promise<void> {
    await this.daemon?.kill();
  }

  async stop(): Promise<void> {
    await this.daemon?.stop(30_000);
    // overlay leaves its layer mounts (and containers' roots) behind a stopped CRI-O, and the
    // image store may be a tmpfs: all off before the directory goes.
    await unmountUnder(this.options.dir);
  }

  private running(): Daemon {
    if (!this.daemon?.alive) throw new Error(`CRI-O for ${this.options.dir} is not running`);
    return this.daemon;
  }

  private async launch(): Promise<void> {
    const { dir, binaries } = this.options;
    this.daemon = Daemon.start({
      name: `crio (${dir})`,
      command: binaries.crio,
      args: [
        '--config', this.configPath,
        '--config-dir', this.confDir,
        // Not settable in crio.conf; kept in the daemon's system context across reloads.
        '--registries-conf', join(dir, 'registries.conf'),
        '--registries-conf-dir', join(dir, 'registries.conf.d'),
      ],
      logPath: this.logPath,
      env: withGoCollector({
        PATH: process.env.PATH,
        TMPDIR: join(this.diskDir, 'tmp'),
        // containers/storage reads its defaults from here, not from /etc/containers/storage.conf.
        CONTAINERS_STORAGE_CONF: join(dir, 'storage.conf'),
        HOME: join(dir, 'home'),
      }, this.options.goCollector),
    });
    const daemon = this.daemon;
    this.version = await daemon.whileRunning(
      waitFor(`CRI-O socket ${this.socketPath}`, async () => {
        const client = await CriClient.connect(this.socketPath, { connectTimeoutMs: 1_000 });
        try {
          return await client.version();
        } finally {
          client.close();
        }
      }, 60_000, 100),
    );
  }

  private async writeConfiguration(): Promise<void> {
    const { dir, binaries, registries, imageStoreBytes, authFile } = this.options;
    const path = (...parts: string[]) => join(dir, ...parts);
    await mkdir(this.diskDir, { recursive: true });
    if (imageStoreBytes !== undefined) {
      await run('mount', ['-t', 'tmpfs', '-o', `size=${imageStoreBytes}`, 'prestage-image-store', this.diskDir]).catch((error: Error) => {
        throw new Error(`cannot mount a ${imageStoreBytes}-byte tmpfs for the image store (needs root): ${error.message}`);
      });
    }
    for (const directory of [this.confDir, this.root, this.runroot, path('registries.conf.d'), path('policies'), path('pod-logs'), path('cni', 'net.d'), path('run'), path('lib'), join(this.diskDir, 'tmp')]) {
      await mkdir(directory, { recursive: true });
    }
    const toml = (value: string) => JSON.stringify(value);
    await writeFile(
      this.configPath,
      `# Generated by the prestage test bed for one node.
[crio]
root = ${toml(this.root)}
runroot = ${toml(this.runroot)}
storage_driver = "${this.storageDriver}"
log_dir = ${toml(path('pod-logs'))}
version_file = ${toml(path('run', 'version'))}
version_file_persist = ${toml(path('lib', 'version'))}
clean_shutdown_file = ${toml(path('lib', 'clean.shutdown'))}

[crio.api]
listen = ${toml(this.socketPath)}
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
log_level = "info"
default_runtime = "crun"
# No systemd here: plain cgroupfs, and conmon joins the pod's cgroup.
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
namespaces_dir = ${toml(path('run', 'ns'))}
pinns_path = ${toml(binaries.pinns)}
container_exits_dir = ${toml(path('run', 'exits'))}
container_attach_socket_dir = ${toml(path('run', 'attach'))}
hooks_dir = []
irqbalance_config_restore_file = "disable"

[crio.runtime.runtimes.crun]
runtime_path = ${toml(binaries.crun)}
runtime_root = ${toml(path('run', 'crun'))}
monitor_path = ${toml(binaries.conmon)}
monitor_cgroup = "pod"

[crio.image]
signature_policy = ${toml(path('policy.json'))}
signature_policy_dir = ${toml(path('policies'))}
big_files_temporary_dir = ${toml(join(this.diskDir, 'tmp'))}
${authFile === undefined ? '' : `global_auth_file = ${toml(authFile)}\n`}
[crio.network]
network_dir = ${toml(path('cni', 'net.d'))}
plugin_dirs = [${toml(path('cni', 'bin'))}]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
`,
    );
    await writeFile(
      path('storage.conf'),
      `[storage]\ndriver = "${this.storageDriver}"\nrunroot = ${toml(this.runroot)}\ngraphroot = ${toml(this.root)}\n`,
    );
    await writeFile(path('policy.json'), JSON.stringify(this.options.signatures?.policy ?? { default: [{ type: 'insecureAcceptAnything' }] }));
    const registriesD = path('home', '.config', 'containers', 'registries.d');
    if (this.options.signatures) await mkdir(registriesD, { recursive: true });
    for (const [name, text] of Object.entries(this.options.signatures?.registriesD ?? {})) await writeFile(join(registriesD, name), text);
    await writeFile(path('registries.conf'), registriesConf(registries));
  }
}

/** Every mount below `dir` (the image store's tmpfs, its overlay and shm mounts), deepest first. */
async function unmountUnder(dir: string): Promise<void> {
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  // Field 5 is the mount point, octal-escaped.
  const points = mountinfo.split('\n').map((line) => line.split(' ')[4]?.replace(/\\(\d{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))) ?? '');
  const below = points.filter((point) => point.startsWith(`${dir}/`)).sort((a, b) => b.length - a.length);
  for (const point of below) await run('umount', ['--lazy', point]).catch(() => undefined);
}

/** registries.conf v2: each mirrored registry gets a plain-http `[[registry.mirror]]`. */
export function registriesConf({ mirrors, insecure }: RegistryConfig): string {
  const toml = (value: string) => JSON.stringify(value);
  const plainHttp = new Set([...insecure, ...Object.values(mirrors)]);
  const lines = ['# Generated by the prestage test bed.', 'unqualified-search-registries = []', ''];
  const registry = (location: string) => {
    lines.push('[[registry]]', `prefix = ${toml(location)}`, `location = ${toml(location)}`);
    if (plainHttp.has(location)) lines.push('insecure = true');
    lines.push('');
  };
  for (const [source, mirror] of Object.entries(mirrors)) {
    registry(source);
    lines.push('[[registry.mirror]]', `location = ${toml(mirror)}`, 'insecure = true', '');
  }
  for (const host of plainHttp) if (!(host in mirrors)) registry(host);
  return lines.join('\n');
}
