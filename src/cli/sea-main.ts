/**
 * The single executable's entry (scripts/dist.ts bundles from here): the bin files' one call.
 * `--version` alone answers from the inlined build identity before the CLI is even evaluated
 * (esbuild initialises a dynamically imported module only when it is imported): no yargs, no
 * logger, no command table, as `oc version --client` does no work it does not need.
 */
import { buildInfo } from '../version.js';

const args = process.argv.slice(2);
if (args.length === 1 && args[0] === '--version') process.stdout.write(`${buildInfo().version}\n`);
else void import('./main.js').then(({ runAsBin }) => runAsBin());
