/**
 * How a command's failure reaches the user, for the CLI (`main.ts`) and the agent's own entry
 * (`agent-main.ts`) alike: one line on stderr and the error's exit code; anything that is not a
 * PrestageError is a bug in prestage, still one line, the stack only on request.
 */
import { ExitCode, PrestageError } from '../errors.js';
import { printable } from '../terminal-text.js';

/** Writes `err` as its one line; returns the exit code. */
export function reportError(err: unknown, stderr: NodeJS.WritableStream, scriptName: string): number {
  if (err instanceof PrestageError) {
    stderr.write(`${scriptName}: error: ${printable(err.message)}\n`);
    return err.exitCode;
  }
  const message = err instanceof Error ? err.message : String(err);
  stderr.write(`${scriptName}: internal error: ${printable(message)}${process.env.PRESTAGE_DEBUG ? `\n${(err as Error).stack ?? ''}` : ' (set PRESTAGE_DEBUG=1 for a stack trace)'}\n`);
  return ExitCode.internal;
}
