#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

// The node agent runs its own bundle (scripts/agent-bundle.ts): the agent's code alone, a
// smaller heap on every node; from a tree built by tsc alone, its unbundled entry.
if (process.argv[2] === 'agent') {
  const bundle = fileURLToPath(new URL('../dist/agent.cjs', import.meta.url));
  if (existsSync(bundle)) createRequire(import.meta.url)(bundle);
  else await import('../dist/cli/agent-bin.js');
} else if (process.argv.length === 3 && process.argv[2] === '--version') {
  // Nothing but the version: no yargs, logger or command table (as yargs' --version prints it).
  const { buildInfo } = await import('../dist/version.js');
  process.stdout.write(`${buildInfo().version}\n`);
} else {
  const { runAsBin } = await import('../dist/cli/main.js');
  await runAsBin();
}
