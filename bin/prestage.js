#!/usr/bin/env node
// `agent` runs through the full CLI for now: the agent's own bundle (dist/agent.cjs, measured by
// npm run bench:agent) does not yet word its flag errors and help as the CLI does (issue #39).
if (process.argv.length === 3 && process.argv[2] === '--version') {
  // Nothing but the version: no yargs, logger or command table (as yargs' --version prints it).
  const { buildInfo } = await import('../dist/version.js');
  process.stdout.write(`${buildInfo().version}\n`);
} else {
  const { runAsBin } = await import('../dist/cli/main.js');
  await runAsBin();
}
