/** The single executable's entry (scripts/dist.ts bundles from here): the bin files' one call. */
import { runAsBin } from './main.js';

void runAsBin();
