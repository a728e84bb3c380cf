/**
 * The previous build of prestage beside this one, for benches that report both in one run:
 * `git worktree add` of BENCH_BASELINE (default: the commit before the layered registry
 * transport) into a temp dir, with the dependencies of its own lockfile, compiled with its own tsc.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { lstat, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface Build {
  readonly name: string;
  /** bin/prestage.js of that build. */
  readonly bin: string;
  /** Flags naming a plain-HTTP test registry insecure, as that build spells them. */
  insecure(host: string): string[];
  remove(): Promise<void>;
}

export const CURRENT: Build = {
  name: 'this build',
  bin: join(ROOT, 'bin/prestage.js'),
  insecure: (host) => ['--insecure-registry', host],
  remove: async () => undefined,
};

export async function previousBuild(): Promise<Build> {
  const ref = process.env.BENCH_BASELINE
    ?? `${(await run('git', ['log', '-1', '--format=%H', '--grep=^registry transport in layers'], { cwd: ROOT })).stdout.trim()}^`;
  const { stdout: commit } = await run('git', ['rev-parse', '--short', ref], { cwd: ROOT });
  const dir = join(tmpdir(), `prestage-baseline-${commit.trim()}`);
  // A build with the agent's bundle (dist/agent.cjs, what its bin runs for `agent`) has it built too.
  const bundler = join(dir, 'scripts/agent-bundle.ts');
  if (!existsSync(join(dir, 'dist')) || (existsSync(bundler) && !existsSync(join(dir, 'dist/agent.cjs')))) {
    if (!existsSync(dir)) await run('git', ['worktree', 'add', '--detach', dir, ref], { cwd: ROOT });
    // Its own lockfile's dependencies, not today's: an older build may need a package since
    // dropped (@grpc/grpc-js before the CRI client was written), or an older major. Kept with the
    // worktree, so a second run installs nothing; install scripts are not run (no build needs one).
    // A worktree an earlier bench left with this checkout's node_modules linked in gets its own.
    if ((await lstat(join(dir, 'node_modules')).catch(() => undefined))?.isSymbolicLink()) await unlink(join(dir, 'node_modules'));
    if (!existsSync(join(dir, 'node_modules'))) await run('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: dir, maxBuffer: 64 * 2 ** 20 });
    await run(process.execPath, [join(dir, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: dir });
    if (existsSync(bundler)) await run(process.execPath, ['--import', 'tsx', 'scripts/agent-bundle.ts'], { cwd: dir });
  }
  return {
    name: `previous (${commit.trim()})`,
    bin: join(dir, 'bin/prestage.js'),
    // Before --insecure-registry, one switch for every registry (a later BENCH_BASELINE has the flag).
    insecure: existsSync(join(dir, 'src/registry/scheme.ts')) ? (host) => ['--insecure-registry', host] : () => ['--tls-verify=false'],
    remove: async () => {
      await run('git', ['worktree', 'remove', '--force', dir], { cwd: ROOT });
    },
  };
}
