/**
 * `--dry-run=none|client|server`, as kubectl reads it, on every command that changes a cluster:
 * `client` sends nothing that changes anything (reads only), `server` sends each change with
 * `dryRun=All` so the API server checks it and persists nothing. A habit from kubectl must
 * never act: before this flag, `prune --dry-run=server` was read as a boolean and deleted.
 */
import type { Argv } from 'yargs';
import { dryRunWords, type DryRunMode } from '../install/apply.js';
import { DRY_RUN_MODES } from './dry-run-flag.js';

export type DryRun = DryRunMode;

export function withDryRun<T>(y: Argv<T>, changes: string) {
  return y.option('dry-run', withDryRunOption(changes));
}

/** The option itself, for a builder whose chain already fixed its type. */
export function withDryRunOption(changes: string) {
  return {
    type: 'string',
    choices: DRY_RUN_MODES,
    default: 'none' as DryRun,
    describe: `client: show what would change, send nothing that changes; server: the API server checks each change and persists nothing; none: ${changes}. A bare --dry-run is client`,
  } as const;
}

/** What ends each output line of a dry run. */
export function dryRunSuffix(mode: DryRun): string {
  return dryRunWords(mode);
}

/** The closing line of a dry run's output, or nothing. */
export function dryRunClosing(mode: DryRun): string {
  if (mode === 'client') return 'Dry run (client): nothing sent to the cluster but reads; nothing changed.\n';
  if (mode === 'server') return 'Dry run (checked by the API server): nothing changed.\n';
  return '';
}

/** The mode as a backend's apply takes it: true sends `dryRun=All`, 'client' sends no write. */
export function backendDryRun(mode: DryRun): boolean | 'client' {
  return mode === 'client' ? 'client' : mode === 'server';
}
