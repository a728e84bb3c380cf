#!/usr/bin/env node
import { createRequire } from 'node:module';

const args = process.argv.slice(2);
if (args.length === 1 && args[0] === '--version') {
  // Nothing but the version: no yargs, logger or command table (as yargs' --version prints it).
  const { buildInfo } = await import('../dist/version.js');
  process.stdout.write(`${buildInfo().version}\n`);
} else if (args[0] === 'agent') {
  // The DaemonSet's command, on every node: the agent's own bundle, without the CLI's code (docs/node-agent.md).
  // As the CLI's runAsBin: a closed stderr leaves no one to tell.
  process.stderr.on('error', () => undefined);
  const { runAgent, tuneV8ForAgent } = createRequire(import.meta.url)('../dist/agent.cjs');
  tuneV8ForAgent();
  process.exitCode = await runAgent(args.slice(1));
} else {
  const { runAsBin } = await import('../dist/cli/main.js');
  await runAsBin();
}
