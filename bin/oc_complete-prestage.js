#!/usr/bin/env node
import { runAsBin } from '../dist/cli/main.js';

await runAsBin();
