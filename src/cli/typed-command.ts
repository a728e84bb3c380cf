/**
 * A command's builder and handler, the handler's flags typed by what its builder declares
 * (yargs' own inference): a flag read in the handler must be one the builder defines.
 */
import type { ArgumentsCamelCase, Argv, CommandModule } from 'yargs';

export interface TypedCommand<U> {
  /** Set for a subcommand (`bundle create <source>`); a top-level command's comes from commands.ts. */
  readonly command?: string;
  readonly describe?: string;
  readonly builder: (y: Argv) => Argv<U>;
  readonly handler: (args: ArgumentsCamelCase<U>) => void | Promise<void>;
}

export function typedCommand<U>(command: TypedCommand<U>): CommandModule {
  // yargs calls the handler with what this builder parsed; CommandModule cannot name that type
  // for a table of commands, so it is erased here, once, after the two were checked together.
  return command as unknown as CommandModule;
}
