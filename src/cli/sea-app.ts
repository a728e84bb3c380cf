/**
 * The single executable's application (scripts/dist.ts bundles from here into a SEA asset that
 * src/cli/sea-main.ts compiles on demand): the CLI and the agent's own entry, each evaluated only
 * when asked for (esbuild turns these imports into lazy initialisers), so that `prestage agent`
 * never evaluates yargs or the command table.
 */
export const cli = () => import('./main.js');
export const agent = () => import('./agent-main.js');
