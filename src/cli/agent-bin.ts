/** The agent bundle's entry (scripts/agent-bundle.ts): `prestage agent ...` with the agent's code alone. */
import { runAgent } from './agent-main.js';

void runAgent(process.argv.slice(process.argv[2] === 'agent' ? 3 : 2)).then((code) => {
  process.exitCode = code;
});
