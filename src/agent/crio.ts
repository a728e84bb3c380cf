/**
 * CRI-O as an ImageRuntime: images over CRI, pins in ONE `[crio.image] pinned_images` drop-in.
 * CRI-O reads every file in `crio.conf.d` in name order on reload (SIGHUP), so the drop-in is
 * written in a directory CRI-O does not scan and renamed in; a reload that fails puts the
 * previous file back, so a bad pin list never stays in force.
 */
import { execFile } from 'node:child_process';
import { readFile, rm, statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import { writeFileAtomic } from '../atomic-file.js';
import { CriClient, type RuntimeImage } from '../cri/client.js';
import { ClusterError } from '../errors.js';
import type { ImageFilesystem, ImageRuntime, RuntimePullOptions } from './runtime.js';

const run = promisify(execFile);

export const DEFAULT_CRIO_SOCKET = '/var/run/crio/crio.sock';
export const DEFAULT_PIN_DROP_IN = '/etc/crio/crio.conf.d/50-prestage-pinned-images';

/** How CRI-O is told to re-read its configuration. */
export type CrioReload = () => Promise<void>;

/** `systemctl reload crio` (= SIGHUP to its main PID), as on an RHCOS node. */
export const reloadWithSystemctl: CrioReload = async () => {
  await run('systemctl', ['reload', 'crio'], { timeout: 60_000 });
};

/** SIGHUP to a known pid: for a CRI-O not run by systemd, or an agent without systemd access. */
export function reloadWithSignal(pid: () => number | Promise<number>): CrioReload {
  return async () => {
    process.kill(await pid(), 'SIGHUP');
  };
}

export interface CrioRuntimeOptions {
  readonly socketPath?: string;
  /** The drop-in prestage owns; default `/etc/crio/crio.conf.d/50-prestage-pinned-images`. */
  readonly dropInPath?: string;
  /** Where the new drop-in is staged: same filesystem, NOT the scanned directory. Default: its parent. */
  readonly stagingDir?: string;
  readonly reload?: CrioReload;
}

export class CrioRuntime implements ImageRuntime {
  readonly dropInPath: string;
  private readonly stagingDir: string;
  private readonly reload: CrioReload;

  private constructor(private readonly cri: CriClient, options: CrioRuntimeOptions) {
    this.dropInPath = options.dropInPath ?? DEFAULT_PIN_DROP_IN;
    this.stagingDir = options.stagingDir ?? dirname(dirname(this.dropInPath));
    this.reload = options.reload ?? reloadWithSystemctl;
  }

  static async connect(options: CrioRuntimeOptions = {}): Promise<CrioRuntime> {
    return new CrioRuntime(await CriClient.connect(options.socketPath ?? DEFAULT_CRIO_SOCKET), options);
  }

  listImages(): Promise<RuntimeImage[]> {
    return this.cri.listImages();
  }

  async pull(image: string, options: RuntimePullOptions = {}): Promise<void> {
    await this.cri.pullImage(image, { auth: options.auth, timeoutMs: options.timeoutMs });
  }

  async imageFilesystem(): Promise<ImageFilesystem> {
    const info = await this.cri.imageFsInfo();
    const mountpoint = info.imageFilesystems[0]?.mountpoint;
    if (!mountpoint) throw new ClusterError(`CRI-O on ${this.cri.socketPath} reports no image filesystem`);
    const fs = await statfs(mountpoint);
    // bavail: what an unprivileged writer may still use, as the runtime will see it.
    return { mountpoint, capacityBytes: fs.blocks * fs.bsize, freeBytes: fs.bavail * fs.bsize };
  }

  async pin(images: readonly string[]): Promise<void> {
    const wanted = images.length > 0 ? renderPinDropIn(images) : null;
    const previous = await readFile(this.dropInPath, 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return null;
      throw error;
    });
    if (previous === wanted) return;
    await this.install(wanted);
    try {
      await this.reload();
    } catch (error) {
      await this.install(previous);
      await this.reload().catch(() => undefined);
      throw new ClusterError(`CRI-O reload failed, previous pin list restored: ${(error as Error).message}`, { cause: error });
    }
  }

  close(): void {
    this.cri.close();
  }

  private async install(content: string | null): Promise<void> {
    if (content === null) await rm(this.dropInPath, { force: true });
    else await writeFileAtomic(this.dropInPath, content, this.stagingDir);
  }
}

/** The drop-in for a pin list: sorted and deduplicated, so equal lists give equal bytes. */
export function renderPinDropIn(images: readonly string[]): string {
  const sorted = [...new Set(images)].sort();
  return [
    '# Written by the prestage node agent: images kubelet garbage collection must keep.',
    '[crio.image]',
    'pinned_images = [',
    ...sorted.map((image) => `  ${JSON.stringify(image)},`),
    ']',
    '',
  ].join('\n');
}
