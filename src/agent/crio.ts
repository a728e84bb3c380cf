/**
 * CRI-O as an ImageRuntime: images over CRI, pins in ONE `[crio.image] pinned_images` drop-in.
 *
 * CRI-O reads crio.conf, then every file in `crio.conf.d` in name order, and the LAST list of
 * `pinned_images` replaces the earlier ones. Other writers exist (MCO owns `50-pinned-images`),
 * so prestage's drop-in sorts last (`99-...`) and carries the union of every other file's pins
 * besides its own: neither side unpins the other. It is written outside the scanned directory
 * and renamed in; a reload that fails puts the previous file back. A reload is trusted only once
 * ListImages reports the pins, and repeated when the file is right but CRI-O does not show it.
 */
import { execFile } from 'node:child_process';
import { readdir, readFile, rm, statfs } from 'node:fs/promises';
import { basename, dirname, join, normalize, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { parse as parseToml } from 'smol-toml';
import { writeFileAtomic } from '../atomic-file.js';
import { CriClient, type RuntimeImage } from '../cri/client.js';
import { ClusterError } from '../errors.js';
import { imageNames, type ImageFilesystem, type ImageRuntime, type RuntimePullOptions } from './runtime.js';
import { DEFAULT_PIN_DROP_IN } from '../api/names.js';
import { oneLine } from './one-line.js';

const run = promisify(execFile);

export const DEFAULT_CRIO_SOCKET = '/var/run/crio/crio.sock';

/** How CRI-O is told to re-read its configuration. */
export type CrioReload = () => Promise<void>;

/**
 * `systemctl reload crio` in the HOST's mount namespace. Run inside a hostPID container without
 * nsenter, systemctl sees /proc/1/root differ from its own root, takes itself to be in a chroot
 * and ignores the verb while exiting 0.
 */
export const reloadWithSystemctl: CrioReload = async () => {
  await run('nsenter', ['--target', '1', '--mount', '--', 'systemctl', 'reload', 'crio'], { timeout: 60_000 });
};

/** SIGHUP to a pid: what `systemctl reload crio` does (ExecReload=kill -HUP $MAINPID). */
export function reloadWithSignal(pid: () => number | Promise<number>): CrioReload {
  return async () => {
    process.kill(await pid(), 'SIGHUP');
  };
}

/**
 * SIGHUP to the CRI-O process that reads `confDir`, found afresh in /proc on every reload (CRI-O
 * restarts with a new pid). Works from a pod with `hostPID: true` and no capability: /proc shows
 * the host's processes, and their `comm` and `cmdline` are world-readable (their `root` and `cwd`
 * would need CAP_SYS_PTRACE); a signal from uid 0 to CRI-O (uid 0) needs no CAP_KILL.
 */
export function reloadCrioFoundInProc(confDir: string, proc = '/proc'): CrioReload {
  return reloadWithSignal(() => findCrioPid(confDir, proc));
}

/** CRI-O's drop-in directory when its command line names none (CRI-O's default). */
export const CRIO_DEFAULT_CONFIG_DIR = '/etc/crio/crio.conf.d';

/**
 * The pid of the `crio` whose `--config-dir` (from its command line, else CRI-O's default) is
 * `confDir` as a path: the DaemonSet mounts the drop-in directory at its host path, so the two
 * name it alike. When no command line matches and exactly one crio runs, that one (its
 * directory may come from CONTAINER_CONFIG_DIR, which /proc/<pid>/environ would show only with
 * ptrace); the pins confirmed in ListImages catch a CRI-O that reads another directory.
 */
export async function findCrioPid(confDir: string, proc = '/proc'): Promise<number> {
  const ours = normalize(resolve(confDir)).replace(/\/+$/, '');
  const candidates: number[] = [];
  for (const entry of await readdir(proc)) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const comm = await readFile(join(proc, entry, 'comm'), 'utf8').catch(() => '');
    if (comm.trim() !== 'crio') continue;
    candidates.push(pid);
    const args = (await readFile(join(proc, entry, 'cmdline'), 'utf8').catch(() => '')).split('\0');
    const configDir = flagValue(args, '--config-dir') ?? flagValue(args, '-d') ?? CRIO_DEFAULT_CONFIG_DIR;
    // A relative --config-dir is relative to CRI-O's cwd, which only ptrace reveals: no match.
    if (configDir.startsWith('/') && normalize(configDir).replace(/\/+$/, '') === ours) return pid;
  }
  if (candidates.length === 1) return candidates[0] as number;
  const hint = candidates.length === 0 ? 'no crio process is visible: the agent pod needs hostPID: true' : `crio pids ${candidates.join(', ')} name other --config-dir directories`;
  throw new ClusterError(`cannot find the CRI-O process that reads ${confDir} in ${proc} (${hint}); or pass --reload=systemctl|pidfile:<path>`);
}

function flagValue(args: readonly string[], flag: string): string | undefined {
  for (let index = 0; index < args.length; index++) {
    const arg = args[index] as string;
    if (arg === flag) return args[index + 1];
    if (arg.startsWith(`${flag}=`)) return arg.slice(flag.length + 1);
  }
  return undefined;
}

/**
 * One at a time: the agent's writes into a directory CRI-O scans, and its reloads, so no reload
 * of this agent reads a half-written temp file.
 */
export class ConfigLock {
  private tail: Promise<void> = Promise.resolve();
  run<T>(work: () => Promise<T>): Promise<T> {
    const turn = this.tail.then(work);
    this.tail = turn.then(
      () => undefined,
      () => undefined,
    );
    return turn;
  }
}

/** `reload` holding `lock`. */
export function lockedReload(lock: ConfigLock, reload: CrioReload): CrioReload {
  return () => lock.run(reload);
}

export interface CrioRuntimeOptions {
  readonly socketPath?: string;
  /** The drop-in prestage owns; default `/etc/crio/crio.conf.d/99-prestage-pinned-images`. */
  readonly dropInPath?: string;
  /** crio.conf, whose pins the drop-in carries too; default: `crio.conf` beside the drop-in directory. */
  readonly configPath?: string;
  /**
   * Where the new drop-in is staged: the same mount as the drop-in (rename across mounts fails).
   * Default: the drop-in's own directory, under a dot name; CRI-O reads every file there, so the
   * write holds `lock`, which every reload of this agent holds too.
   */
  readonly stagingDir?: string;
  /** Shared with the reloads (pass the same lock to `lockedReload`); default: one of its own. */
  readonly lock?: ConfigLock;
  /** Default: SIGHUP to the CRI-O found in /proc that reads the drop-in's directory. */
  readonly reload?: CrioReload;
  /** How long a reload may take to show in ListImages before it is sent again. */
  readonly pinSettleMs?: number;
}

export class CrioRuntime implements ImageRuntime {
  readonly dropInPath: string;
  private readonly configPath: string;
  private readonly stagingDir: string;
  private readonly reload: CrioReload;
  private readonly settleMs: number;
  private readonly lock: ConfigLock;

  private constructor(private readonly cri: CriClient, options: CrioRuntimeOptions) {
    this.dropInPath = options.dropInPath ?? DEFAULT_PIN_DROP_IN;
    this.configPath = options.configPath ?? join(dirname(dirname(this.dropInPath)), 'crio.conf');
    this.stagingDir = options.stagingDir ?? dirname(this.dropInPath);
    this.lock = options.lock ?? new ConfigLock();
    this.reload = options.reload ?? lockedReload(this.lock, reloadCrioFoundInProc(dirname(this.dropInPath)));
    this.settleMs = options.pinSettleMs ?? 10_000;
  }

  static async connect(options: CrioRuntimeOptions = {}): Promise<CrioRuntime> {
    return new CrioRuntime(await CriClient.connect(options.socketPath ?? DEFAULT_CRIO_SOCKET), options);
  }

  listImages(): Promise<RuntimeImage[]> {
    return this.cri.listImages();
  }

  async pull(image: string, options: RuntimePullOptions = {}): Promise<void> {
    await this.cri.pullImage(image, { auth: options.auth, timeoutMs: options.timeoutMs, ...(options.signal ? { signal: options.signal } : {}) });
  }

  async imageFilesystem(): Promise<ImageFilesystem> {
    const info = await this.cri.imageFsInfo();
    const mountpoint = info.imageFilesystems[0]?.mountpoint;
    if (!mountpoint) throw new ClusterError(`CRI-O on ${this.cri.socketPath} reports no image filesystem`);
    const fs = await statfs(mountpoint);
    // bavail: what an unprivileged writer may still use, as the runtime will see it.
    return { mountpoint, capacityBytes: fs.blocks * fs.bsize, freeBytes: fs.bavail * fs.bsize };
  }

  /** The pins of crio.conf and the other drop-ins, which this file must carry so none is lost. */
  async otherPins(): Promise<Map<string, string[]>> {
    const directory = dirname(this.dropInPath);
    const ours = basename(this.dropInPath);
    const names = (await readdir(directory).catch(() => [] as string[])).filter((name) => name !== ours && !name.startsWith('.')).sort();
    const pins = new Map<string, string[]>();
    for (const path of [this.configPath, ...names.map((name) => join(directory, name))]) {
      const text = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT' || error.code === 'EISDIR') return undefined;
        throw error;
      });
      if (text === undefined) continue;
      let list: unknown;
      try {
        list = (parseToml(text) as { crio?: { image?: { pinned_images?: unknown } } }).crio?.image?.pinned_images;
      } catch (error) {
        throw new ClusterError(`cannot read the pins of ${path}: ${oneLine((error as Error).message, Infinity)}; CRI-O would refuse it too`);
      }
      if (list === undefined) continue;
      if (basename(path) > ours && dirname(path) === directory) {
        throw new ClusterError(`${path} sets pinned_images and sorts after ${ours}, so CRI-O would drop prestage's pins; rename it, or pass --drop-in with a name that sorts after it`);
      }
      if (!Array.isArray(list) || list.some((item) => typeof item !== 'string')) throw new ClusterError(`${path}: pinned_images is not a list of strings`);
      if (list.length > 0) pins.set(path, list as string[]);
    }
    return pins;
  }

  async pin(images: readonly string[]): Promise<void> {
    const carried = await this.otherPins();
    const wanted = images.length > 0 ? renderPinDropIn(images, carried) : null;
    const previous = await readFile(this.dropInPath, 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return null;
      throw error;
    });
    if (previous !== wanted) {
      await this.install(wanted);
      try {
        await this.reload();
      } catch (error) {
        await this.install(previous);
        await this.reload().catch(() => undefined);
        throw new ClusterError(`CRI-O reload failed, previous pin list restored: ${oneLine((error as Error).message, Infinity)}`, { cause: error });
      }
    }
    // Ours no longer wanted, unless another file's pattern keeps it pinned: these must unpin.
    const kept = [...carried.values()].flat();
    const wantedNow = new Set(images);
    const released = pinsOf(previous).filter((image) => !wantedNow.has(image) && !kept.some((pattern) => pinPatternMatches(pattern, image)));
    await this.confirmPins(images, released, previous !== wanted);
  }

  close(): void {
    this.cri.close();
  }

  /**
   * Waits until ListImages reports every stored image of `pinned` pinned and of `released` not.
   * A reload returns once the signal is sent, not once CRI-O re-read its files; and a file can be
   * right while CRI-O never read it (an agent that died before reloading, a CRI-O restarted from
   * an older copy). So: reload again when the pins do not show, then give up naming an image.
   */
  private async confirmPins(pinned: readonly string[], released: readonly string[], reloaded: boolean): Promise<void> {
    for (let reloads = reloaded ? 1 : 0; ; reloads++) {
      const wrong = await this.wrongPinsAfter(pinned, released, reloads > 0 ? this.settleMs : 0);
      if (wrong === undefined) return;
      if (reloads === 2) throw new ClusterError(`CRI-O does not report image ${wrong} after ${reloads} reloads: does it read ${dirname(this.dropInPath)}?`);
      await this.reload();
    }
  }

  /** The first image CRI-O still reports wrongly once `ms` has passed, or undefined once all are right. */
  private async wrongPinsAfter(pinned: readonly string[], released: readonly string[], ms: number): Promise<string | undefined> {
    const deadline = Date.now() + ms;
    for (;;) {
      const state = pinStates(await this.cri.listImages());
      const wrong = pinned.find((image) => state.get(image) === false)?.concat(' pinned') ?? released.find((image) => state.get(image) === true)?.concat(' unpinned');
      if (wrong === undefined || Date.now() >= deadline) return wrong;
      await sleep(200);
    }
  }

  private install(content: string | null): Promise<void> {
    return this.lock.run(async () => {
      // A temp left by an agent killed mid-write: CRI-O would read it at its next start.
      const stale = `.${basename(this.dropInPath)}.`;
      for (const name of await readdir(this.stagingDir).catch(() => [] as string[])) {
        if (name.startsWith(stale) && name.endsWith('.tmp')) await rm(join(this.stagingDir, name), { force: true });
      }
      if (content === null) await rm(this.dropInPath, { force: true });
      else await writeFileAtomic(this.dropInPath, content, this.stagingDir);
    });
  }
}

/** Every name of every stored image, and whether CRI-O reports it pinned. */
function pinStates(stored: readonly RuntimeImage[]): Map<string, boolean> {
  const states = new Map<string, boolean>();
  for (const image of stored) for (const name of imageNames(image)) states.set(name, image.pinned);
  return states;
}

/** The pinned_images of a drop-in prestage wrote (null: none). */
function pinsOf(dropIn: string | null): string[] {
  if (dropIn === null) return [];
  const list = (parseToml(dropIn) as { crio?: { image?: { pinned_images?: unknown } } }).crio?.image?.pinned_images;
  return Array.isArray(list) ? list.filter((item): item is string => typeof item === 'string') : [];
}

/** CRI-O's pattern forms: the whole name, a trailing `*` glob, or a `*keyword*`. */
export function pinPatternMatches(pattern: string, name: string): boolean {
  if (pattern.length > 1 && pattern.startsWith('*') && pattern.endsWith('*')) return name.includes(pattern.slice(1, -1));
  if (pattern.endsWith('*')) return name.startsWith(pattern.slice(0, -1));
  return pattern === name;
}

/**
 * The drop-in for a pin list and the pins it carries from other files: each group sorted and
 * deduplicated (equal inputs give equal bytes), every pattern once.
 */
export function renderPinDropIn(images: readonly string[], carried: ReadonlyMap<string, readonly string[]> = new Map()): string {
  const seen = new Set<string>();
  const group = (list: readonly string[]) => [...new Set(list)].filter((image) => !seen.has(image) && seen.add(image)).sort();
  const lines = ['# Written by the prestage node agent: images kubelet garbage collection must keep.'];
  if (carried.size > 0) lines.push('# It sorts last, so it also carries the pins of the files before it, which CRI-O would otherwise drop.');
  lines.push('[crio.image]', 'pinned_images = [', ...group(images).map((image) => `  ${JSON.stringify(image)},`));
  for (const [path, list] of [...carried].sort(([a], [b]) => a.localeCompare(b))) {
    const rest = group(list);
    if (rest.length > 0) lines.push(`  # from ${path}`, ...rest.map((image) => `  ${JSON.stringify(image)},`));
  }
  lines.push(']', '');
  return lines.join('\n');
}

