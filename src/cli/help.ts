/**
 * The end of a command's help: the exit codes it can give, and the docs page that walks through
 * it. Apart from commands.ts, which loads the command modules that use it (an import circle otherwise).
 */

/** What every command can exit with. */
const ALWAYS: Readonly<Record<number, string>> = {
  0: 'ok (also when stdout is closed early, e.g. | head)',
  2: 'bad input: flags, files, references, unknown sets',
  70: 'internal error (a bug; PRESTAGE_DEBUG=1 shows the stack)',
  74: 'output could not be written (disk full)',
};

/** What the codes a command may add mean, unless it says otherwise. */
export const EXIT_MEANINGS: Readonly<Record<number, string>> = {
  1: 'a set failed on a node',
  3: 'registry or network failure after retries',
  4: 'Kubernetes API failure or refusal',
  124: 'timeout',
};

/** A command's own exit codes: a code, or a code and what it means for that command. */
export type ExitCodes = ReadonlyArray<number | readonly [number, string]>;

export function exitCodesHelp(own: ExitCodes): string {
  const lines = new Map<number, string>(Object.entries(ALWAYS).map(([code, text]) => [Number(code), text]));
  for (const entry of own) {
    const [code, text] = typeof entry === 'number' ? [entry, EXIT_MEANINGS[entry] ?? ''] : entry;
    lines.set(code, text);
  }
  return ['Exit codes:', ...[...lines].sort(([a], [b]) => a - b).map(([code, text]) => `  ${String(code).padEnd(5)}${text}`)].join('\n');
}

/** `planning.md` → `planning`: what `prestage docs` takes. */
export function docsTopic(page: string): string {
  return page.replace(/\.md$/, '');
}

export function helpEpilogue(exitCodes: string, page: string, scriptName = 'prestage'): string {
  return `${exitCodes}\n\nMore: ${scriptName} docs ${docsTopic(page)}`;
}
