/** `bin/prestage.js` on the sources (run with `node --import tsx`): see prestage-process.ts. */
import { main } from '../../src/cli/main.js';

process.exitCode = await main(process.argv.slice(2));
