/** `npm run docs:cli`: write docs/cli.md from the commands' own help (src/cli/cli-reference.ts). */
import { writeFileSync } from 'node:fs';
import { renderCliReference } from '../src/cli/cli-reference.js';

const target = new URL('../docs/cli.md', import.meta.url);
writeFileSync(target, await renderCliReference());
process.stdout.write(`wrote ${target.pathname}\n`);
