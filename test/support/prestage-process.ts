/**
 * The prestage CLI as its own long-running process (the node agent), in its own process group
 * via the test bed's Daemon, so no agent outlives the test run.
 *
 * It runs the built bin (`bin/prestage.js`, what the DaemonSet runs) when `dist/` is current,
 * as it is under `npm test` (pretest builds it). When a source file is newer than its build
 * output, e.g. `npx vitest run` right after an edit, it runs the same entry on the sources
 * through tsx instead, so a stale build never decides a test.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Daemon, waitFor } from '../cluster/processes.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The sources whose build output is missing or older than they are (tsc's file, or the agent's bundle, which holds most of them). */
export function staleBuildOutputs(): string[] {
  const src = join(ROOT, 'src');
  const agentBundle = join(ROOT, 'dist', 'agent.cjs');
  const bundled = existsSync(agentBundle) ? statSync(agentBundle).mtimeMs : 0;
  return sourceFiles(src).filter((file) => {
    const built = join(ROOT, 'dist', relative(src, file).replace(/\.ts$/, '.js'));
    const changed = statSync(file).mtimeMs;
    return !existsSync(built) || statSync(built).mtimeMs < changed || bundled < changed;
  });
}

export interface PrestageEntry {
  /** Node arguments before the CLI's own. */
  readonly nodeArgs: readonly string[];
  readonly built: boolean;
}

let entry: PrestageEntry | undefined;

export function prestageEntry(): PrestageEntry {
  entry ??= staleBuildOutputs().length === 0
    ? { nodeArgs: [join(ROOT, 'bin', 'prestage.js')], built: true }
    : { nodeArgs: ['--import', 'tsx', join(ROOT, 'test', 'support', 'prestage-src.ts')], built: false };
  return entry;
}

export interface PrestageProcessSpec {
  readonly name: string;
  readonly args: readonly string[];
  readonly logPath: string;
  /** Resolves once the log shows this (rejects with the log's tail if the process exits first). */
  readonly readyWhen?: string | RegExp;
  readonly env?: NodeJS.ProcessEnv;
  /** Node arguments before the CLI's own; default `prestageEntry()`'s. */
  readonly entry?: readonly string[];
}

export async function startPrestageProcess(spec: PrestageProcessSpec): Promise<Daemon> {
  const daemon = Daemon.start({
    name: spec.name,
    command: process.execPath,
    args: [...(spec.entry ?? prestageEntry().nodeArgs), ...spec.args],
    logPath: spec.logPath,
    cwd: ROOT,
    env: spec.env ?? process.env,
  });
  if (spec.readyWhen !== undefined) {
    const ready = spec.readyWhen;
    try {
      await daemon.whileRunning(
        waitFor(`${spec.name} to log ${String(ready)}`, async () => {
          const log = daemon.logSince(0);
          return (typeof ready === 'string' ? log.includes(ready) : ready.test(log)) ? true : undefined;
        }, 60_000, 100),
      );
    } catch (error) {
      await daemon.stop(5_000);
      throw error;
    }
  }
  return daemon;
}

/** `prestage <command> --help` as the process would print it: which flags this build has. */
export async function prestageHelp(command: string): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [...prestageEntry().nodeArgs, command, '--help'], { cwd: ROOT });
  return stdout;
}
