/**
 * The end of a command's help: the exit codes, and the docs page that walks through it. Apart
 * from commands.ts, which loads the command modules that use it (an import circle otherwise).
 */
export function helpEpilogue(exitCodes: string, page: string): string {
  return `${exitCodes}\n\nMore: docs/${page} in prestage's source tree`;
}
