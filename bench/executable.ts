/**
 * `npm run bench:dist`: the single executable (`npm run dist`, the host's target) beside
 * `node bin/prestage.js` of the same checkout, in the same run: start-up (`--version`, `--help`,
 * and `node -e 0` as the floor any Node.js program pays), and a plan of the fixture release from
 * the real registry behind a proxy with a 20 ms round trip. Medians of BENCH_RUNS (default 9)
 * runs, alternating which goes first; ratios are executable / node. Also the file's size.
 */
import { execFile, execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { startFaultProxy, startRegistry } from '../test/harness/index.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../', import.meta.url));
const RUNS = Number(process.env.BENCH_RUNS ?? 9);
const RTT_MS = Number(process.env.BENCH_RTT_MS ?? 20);
const target = `linux-${process.arch === 'x64' ? 'amd64' : process.arch}`;

const work = await mkdtemp(join(tmpdir(), 'prestage-bench-dist-'));
execFileSync(process.execPath, [join(ROOT, 'node_modules/tsx/dist/cli.mjs'), join(ROOT, 'scripts/dist.ts'), '--out', join(work, 'dist'), '--targets', target], { stdio: 'inherit' });
execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'ignore' });
const executable = join(work, 'dist', target, 'prestage');
const sides = { executable: [executable], node: [process.execPath, join(ROOT, 'bin/prestage.js')] } as const;

const fixture = buildReleaseFixture();
const registry = await startRegistry({ storageDir: join(work, 'storage') });
await pushFixture(registry.url, fixture);
const proxy = await startFaultProxy({ upstream: registry.url });
proxy.setLatency(RTT_MS);
const release = `quay.io/${fixture.truth.releaseRepository}:${fixture.truth.release.tag}`;

async function ms(argv: readonly string[]): Promise<number> {
  const start = process.hrtime.bigint();
  await run(argv[0]!, argv.slice(1), { maxBuffer: 256 * 1024 * 1024 });
  return Number(process.hrtime.bigint() - start) / 1e6;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const cases: Record<string, readonly string[]> = {
  '--version': ['--version'],
  '--help': ['--help'],
  [`plan at ${RTT_MS} ms RTT`]: ['plan', release, '--mirror', `quay.io=${proxy.host}`, '--insecure-registry', proxy.host, '-o', 'json'],
};
try {
  const floor: number[] = [];
  for (let i = 0; i < RUNS; i++) floor.push(await ms([process.execPath, '-e', '0']));
  console.log(`bench:dist  ${target}, Node.js ${process.versions.node}; executable ${(statSync(executable).size / 2 ** 20).toFixed(1)} MiB; median of ${RUNS} runs each, alternating; node -e 0: ${median(floor).toFixed(0)} ms`);
  for (const [name, args] of Object.entries(cases)) {
    const times = { executable: [] as number[], node: [] as number[] };
    for (let i = 0; i < RUNS; i++) {
      for (const side of i % 2 ? (['node', 'executable'] as const) : (['executable', 'node'] as const)) times[side].push(await ms([...sides[side], ...args]));
    }
    const [e, n] = [median(times.executable), median(times.node)];
    console.log(`${name.padEnd(20)} executable ${e.toFixed(0).padStart(5)} ms   node bin/prestage.js ${n.toFixed(0).padStart(5)} ms   ratio ${(e / n).toFixed(2)}   executable / node -e 0 ${(e / median(floor)).toFixed(2)}`);
  }
} finally {
  await proxy.stop();
  await registry.stop();
  await rm(work, { recursive: true, force: true });
}
