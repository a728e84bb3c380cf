/**
 * The `--dry-run` words main reads before any command loads, apart from dry-run.ts, whose
 * suffixes come from install/apply.ts (and with it the Kubernetes client): a command that
 * changes no cluster (`plan`) loads none of it.
 */
export const DRY_RUN_MODES = ['none', 'client', 'server'] as const;

/**
 * A bare `--dry-run` means `client`, as in kubectl; the next word is its value only when it is
 * one of the modes (`apply plan.json --dry-run server` keeps working), so `pause --dry-run SET`
 * pauses nothing and names SET.
 */
export function normalizeDryRun(argv: readonly string[]): string[] {
  return argv.map((word, i) => (word === '--dry-run' && !(DRY_RUN_MODES as readonly string[]).includes(argv[i + 1] ?? '') ? '--dry-run=client' : word));
}
