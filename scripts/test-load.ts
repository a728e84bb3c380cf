/**
 * `npm run test:load`: the suite's verdict on a busy machine, as CI's may be. N processes spin
 * on the CPU (PRESTAGE_LOAD_BUSY, default 8) while the unit suite runs, then a sample of
 * integration files (PRESTAGE_LOAD_FILES, space-separated; default: timing-heavy files of the
 * registry and the cluster projects). Passes only when both pass; prints the load it ran under.
 * Extra arguments go to both vitest runs (e.g. `-- --reporter=verbose`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';

const BUSY = Number(process.env.PRESTAGE_LOAD_BUSY ?? 8);
const FILES = (process.env.PRESTAGE_LOAD_FILES ?? 'test/harness.test.ts test/registry-proxy.test.ts test/agent-pacing.test.ts test/wait-restart.test.ts')
  .split(/\s+/)
  .filter(Boolean);
if (!Number.isInteger(BUSY) || BUSY < 0) {
  console.error(`test:load: PRESTAGE_LOAD_BUSY=${process.env.PRESTAGE_LOAD_BUSY}: use a whole number of busy processes, e.g. 8`);
  process.exit(2);
}

const busy: ChildProcess[] = Array.from({ length: BUSY }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
let running: ChildProcess | undefined;
// Nothing outlives the run: the spinners, and a vitest stopped half-way (its own teardown runs on SIGINT).
process.on('exit', () => {
  for (const child of busy) child.kill('SIGKILL');
  running?.kill('SIGINT');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(130));

function vitest(args: readonly string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', ...args, ...process.argv.slice(2)], { stdio: 'inherit' });
    running = child;
    child.on('exit', (code, signal) => {
      running = undefined;
      resolve(code ?? (signal ? 1 : 0));
    });
  });
}

const started = Date.now();
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');
console.log(`test:load: ${BUSY} busy processes; load average ${load()}`);
const unit = await vitest(['--config', 'vitest.unit.config.ts']);
console.log(`test:load: unit suite exit ${unit}; load average ${load()}`);
const integration = await vitest(FILES);
console.log(`test:load: ${FILES.length} integration files exit ${integration}; load average ${load()}; ${Math.round((Date.now() - started) / 1000)} s with ${BUSY} busy processes`);
console.log(`test:load: ${unit === 0 && integration === 0 ? 'PASS' : 'FAIL'}`);
process.exit(unit === 0 && integration === 0 ? 0 : 1);
