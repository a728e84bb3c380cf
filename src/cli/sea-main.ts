/**
 * The single executable's entry (scripts/dist.ts): the SEA main script, kept tiny because Node.js
 * compiles it whole before it runs. `--version` answers from the inlined build identity; anything
 * else compiles the application (sea-app.ts, bundled as the `app.cjs` asset: one function, the
 * CommonJS wrapper around the bundle) with the V8 code cache the build recorded after running
 * help and completion (the `app.cache` asset, when there is one; scripts/sea-warm.cjs), so that
 * the code those run is deserialized rather than compiled.
 */
import { basename, dirname } from 'node:path';
import { getAsset } from 'node:sea';
import { Script } from 'node:vm';
import { buildInfo } from '../version.js';
import type * as App from './sea-app.js';

function loadApp(): typeof App {
  let cachedData: Buffer | undefined;
  try {
    cachedData = Buffer.from(getAsset('app.cache'));
  } catch {
    // --reproducible, or another architecture's executable: V8 compiles as it goes.
  }
  const script = new Script(getAsset('app.cjs', 'utf8'), { filename: process.execPath, cachedData });
  const module = { exports: {} as typeof App };
  // The bundle requires nothing but Node.js's built-ins, which the SEA's own require resolves.
  (script.runInThisContext() as (...args: unknown[]) => void)(module.exports, require, module, process.execPath, dirname(process.execPath));
  return module.exports;
}

async function run(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.length === 1 && args[0] === '--version') {
    process.stdout.write(`${buildInfo().version}\n`);
    return;
  }
  const app = loadApp();
  // The agent's own entry (no yargs, no command table) runs the DaemonSet's agent, and hands its
  // help and refused flags to the CLI itself; kubectl's plugin completion of `agent ...` is the CLI's.
  if (args[0] === 'agent' && !basename(process.argv[1] ?? '').includes('_complete-')) {
    const { runAgent, tuneV8ForAgent } = await app.agent();
    tuneV8ForAgent();
    process.exitCode = await runAgent(args.slice(1));
  } else await (await app.cli()).runAsBin();
}

void run();
