/** `bin/prestage.js` on the sources (run with `node --import tsx`): see prestage-process.ts. */
const args = process.argv.slice(2);
// As the bin routes it: the agent's own entry, or the CLI.
process.exitCode = args[0] === 'agent' ? await (await import('../../src/cli/agent-main.js')).runAgent(args.slice(1)) : await (await import('../../src/cli/main.js')).main(args);
