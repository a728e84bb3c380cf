/**
 * `npm run bench:dist`: the single executable (`npm run dist`, the host's target) beside the
 * previous build's executable (BENCH_BASELINE, a git ref, default the commit before the tiny SEA
 * main; built from git into a temp dir in the same run) and `node bin/prestage.js` of this
 * checkout: start-up (`--version`, `--help`, completion, `agent --help`) against the floors any
 * run pays (`node -e 0`, and a one-line SEA built the same way), and a plan of the fixture release
 * from the real registry behind a proxy with a 20 ms round trip. Medians of BENCH_RUNS (default 9)
 * runs, rotating which goes first. Ratios: this executable / the previous one, / node -e 0.
 */
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { startFaultProxy, startRegistry } from '../test/harness/index.js';
import { median } from './median.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../', import.meta.url));
const RUNS = Number(process.env.BENCH_RUNS ?? 9);
const RTT_MS = Number(process.env.BENCH_RTT_MS ?? 20);
const target = `linux-${process.arch === 'x64' ? 'amd64' : process.arch}`;
const git = (args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

const work = await mkdtemp(join(tmpdir(), 'prestage-bench-dist-'));
const dist = (checkout: string, out: string) =>
  execFileSync(process.execPath, [join(ROOT, 'node_modules/tsx/dist/cli.mjs'), join(checkout, 'scripts/dist.ts'), '--out', out, '--targets', target], { stdio: ['ignore', 'ignore', 'ignore'] });
dist(ROOT, join(work, 'dist'));
execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'ignore' });

const baselineRef = process.env.BENCH_BASELINE ?? `${git(['log', '-1', '--format=%H', '--grep=^dist: a tiny SEA main'])}^`;
const baselineCommit = git(['rev-parse', '--short', baselineRef]);
const baselineTree = join(work, 'baseline-tree');
git(['worktree', 'add', '--detach', baselineTree, baselineRef]);
let floorSea: string;
try {
  execFileSync('ln', ['-s', join(ROOT, 'node_modules'), join(baselineTree, 'node_modules')]);
  dist(baselineTree, join(work, 'baseline'));
  floorSea = oneLineSea();
} finally {
  git(['worktree', 'remove', '--force', baselineTree]);
}

/** A SEA whose main is one line, built as scripts/dist.ts builds (no code cache): the floor of any. */
function oneLineSea(): string {
  writeFileSync(join(work, 'one-line.cjs'), 'process.stdout.write("0\\n");\n');
  writeFileSync(join(work, 'one-line.json'), JSON.stringify({ main: 'one-line.cjs', output: 'one-line.blob', disableExperimentalSEAWarning: true }));
  execFileSync(process.execPath, ['--experimental-sea-config', 'one-line.json'], { cwd: work, stdio: 'ignore' });
  const file = join(work, 'one-line');
  copyFileSync(process.execPath, file);
  execFileSync(process.execPath, [join(ROOT, 'node_modules/postject/dist/cli.js'), file, 'NODE_SEA_BLOB', join(work, 'one-line.blob'), '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'], { stdio: 'ignore' });
  return file;
}

const fixture = buildReleaseFixture();
const registry = await startRegistry({ storageDir: join(work, 'storage') });
await pushFixture(registry.url, fixture);
const proxy = await startFaultProxy({ upstream: registry.url });
proxy.setLatency(RTT_MS);
const release = `quay.io/${fixture.truth.releaseRepository}:${fixture.truth.release.tag}`;

async function ms(argv: readonly string[]): Promise<number> {
  const start = process.hrtime.bigint();
  await run(argv[0]!, argv.slice(1), { maxBuffer: 256 * 1024 * 1024 }).catch((error: { code?: unknown }) => {
    // `agent --help` and the like exit 0; anything else is a broken build, not a figure.
    throw new Error(`${argv.join(' ')}: exit ${String(error.code)}`);
  });
  return Number(process.hrtime.bigint() - start) / 1e6;
}

const SIDES = ['this', 'previous', 'node'] as const;
type Side = (typeof SIDES)[number];
/** A program under `name` (a plugin name is a link beside the executable). */
const program = (side: Side, name = 'prestage'): string[] =>
  side === 'node' ? [process.execPath, join(ROOT, 'bin/prestage.js')] : [join(work, side === 'this' ? 'dist' : 'baseline', target, name)];

const cases: Array<[string, (side: Side) => string[] | undefined]> = [
  ['--version', (side) => [...program(side), '--version']],
  ['--help', (side) => [...program(side), '--help']],
  ['completion bash', (side) => [...program(side), 'completion', 'bash']],
  // kubectl's plugin completion runs the link by its name: bin/prestage.js has no such name.
  ['kubectl_complete st', (side) => (side === 'node' ? undefined : [...program(side, 'kubectl_complete-prestage'), 'st'])],
  ['agent --help', (side) => [...program(side), 'agent', '--help']],
  [`plan at ${RTT_MS} ms RTT`, (side) => [...program(side), 'plan', release, '--mirror', `quay.io=${proxy.host}`, '--insecure-registry', proxy.host, '-o', 'json']],
];
const cell = (value: number | undefined, width = 6) => (value === undefined ? '-' : value.toFixed(0)).padStart(width);
try {
  const floors = { node: [] as number[], sea: [] as number[] };
  for (let i = 0; i < RUNS; i++) {
    floors.node.push(await ms([process.execPath, '-e', '0']));
    floors.sea.push(await ms([floorSea]));
  }
  const floor = median(floors.node);
  const size = (file: string) => (statSync(file).size / 2 ** 20).toFixed(1);
  console.log(`bench:dist  ${target}, Node.js ${process.versions.node}; executable ${size(program('this')[0]!)} MiB (previous ${size(program('previous')[0]!)} MiB); median of ${RUNS} runs each, rotating; node -e 0: ${floor.toFixed(0)} ms, a one-line SEA: ${median(floors.sea).toFixed(0)} ms`);
  console.log(`${''.padEnd(21)}   this  previous (${baselineCommit})  node bin/prestage.js   this / previous   this / node -e 0   previous / node -e 0`);
  for (const [name, argv] of cases) {
    const times: Record<Side, number[]> = { this: [], previous: [], node: [] };
    for (let i = 0; i < RUNS; i++) {
      for (let k = 0; k < SIDES.length; k++) {
        const side = SIDES[(i + k) % SIDES.length]!;
        const command = argv(side);
        if (command) times[side].push(await ms(command));
      }
    }
    const [t, p, n] = SIDES.map((side) => (times[side].length ? median(times[side]) : undefined)) as [number, number, number | undefined];
    console.log(`${name.padEnd(21)} ${cell(t)} ms ${cell(p, 10)} ms ${cell(n, 12)} ms ${(t / p).toFixed(2).padStart(17)} ${(t / floor).toFixed(2).padStart(18)} ${(p / floor).toFixed(2).padStart(22)}`);
  }
} finally {
  await proxy.stop();
  await registry.stop();
  await rm(work, { recursive: true, force: true });
}
