/**
 * Daemons of the test bed (etcd, kube-apiserver, CRI-O, the registry): each runs in its own
 * process group with its output in a log file, and none outlives the test process, even when a
 * test fails or the worker exits early.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, readFileSync, statSync } from 'node:fs';
import { constants } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

const running = new Set<Daemon>();

// 'exit' handlers must be synchronous: SIGKILL every group still alive.
const killAll = () => {
  for (const daemon of running) daemon.killGroupNow();
};
process.on('exit', killAll);
// The daemons sit in their own process groups, so a Ctrl-C or a runner's SIGTERM does not reach
// them: kill them, then die of the signal as if nobody had listened (unless someone else does).
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    killAll();
    if (process.listenerCount(signal) === 0) process.exit(128 + constants.signals[signal]);
  });
}

export interface DaemonSpec {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly logPath: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
}

export class Daemon {
  private exitStatus: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private readonly exited: Promise<void>;

  private constructor(
    readonly spec: DaemonSpec,
    private readonly child: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitStatus = { code, signal };
        running.delete(this);
        resolve();
      });
    });
  }

  static start(spec: DaemonSpec): Daemon {
    const log = openSync(spec.logPath, 'a');
    try {
      const child = spawn(spec.command, spec.args, {
        // Its own process group, so stop() reaches anything it forks (conmon, helpers).
        detached: true,
        stdio: ['ignore', log, log],
        env: spec.env ?? process.env,
        cwd: spec.cwd,
      });
      if (child.pid === undefined) throw new Error(`${spec.name}: cannot start ${spec.command}`);
      const daemon = new Daemon(spec, child);
      running.add(daemon);
      return daemon;
    } finally {
      closeSync(log);
    }
  }

  get pid(): number {
    return this.child.pid as number;
  }

  get alive(): boolean {
    return this.exitStatus === undefined;
  }

  signal(signal: NodeJS.Signals): void {
    if (this.alive) process.kill(this.pid, signal);
  }

  /** SIGTERM the group, then SIGKILL it if it has not exited within the grace period. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.alive) return;
    this.killGroup('SIGTERM');
    const timedOut = await Promise.race([this.exited.then(() => false), sleep(graceMs).then(() => true)]);
    if (timedOut) this.killGroup('SIGKILL');
    await this.exited;
    // Children that ignored SIGTERM while the leader exited are still in the group.
    this.killGroup('SIGKILL');
  }

  /** SIGKILL, as a crash or OOM kill would. */
  async kill(): Promise<void> {
    if (!this.alive) return;
    this.killGroup('SIGKILL');
    await this.exited;
  }

  killGroupNow(): void {
    this.killGroup('SIGKILL');
  }

  /** Rejects with the log's tail if the daemon exits while `until` is pending. */
  async whileRunning<T>(until: Promise<T>): Promise<T> {
    const died = this.exited.then(() => {
      throw new Error(`${this.spec.name} exited (${this.describeExit()}) during startup; log ${this.spec.logPath}:\n${this.logTail()}`);
    });
    return Promise.race([until, died]);
  }

  logSize(): number {
    return statSync(this.spec.logPath).size;
  }

  /** The log written since `offset` bytes. */
  logSince(offset: number): string {
    return readFileSync(this.spec.logPath).subarray(offset).toString('utf8');
  }

  logTail(lines = 40): string {
    return readFileSync(this.spec.logPath, 'utf8').split('\n').slice(-lines).join('\n');
  }

  private describeExit(): string {
    return this.exitStatus?.signal ? `signal ${this.exitStatus.signal}` : `code ${this.exitStatus?.code}`;
  }

  private killGroup(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.pid, signal);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }
}

/** Polls `probe` until it returns a value, or throws the last failure after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000, intervalMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${(lastError as Error).message}` : ''}`);
}
