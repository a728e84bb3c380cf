/**
 * The CLI entry point. `main(argv)` is a plain function (tests call it in-process); the bin
 * files only call it. One catch turns every error into one line and an exit code.
 */
import { basename } from 'node:path';
import yargs from 'yargs';
import { BadInputError, ExitCode, PrestageError } from '../errors.js';
import { createCliLogger, type LogLevel } from '../telemetry/log.js';
import type { CommandContext } from './context.js';
import type { CommandModule } from 'yargs';

type CommandFactory = (ctx: CommandContext, scriptName: string) => CommandModule<any, any>;

/**
 * Commands load on demand: the cluster client and gRPC cost over a second and ~100 MiB at
 * start, which `plan` and `bundle` never need. Only the named command is loaded; help and
 * unknown input load them all.
 */
const COMMANDS: Record<string, () => Promise<CommandFactory>> = {
  plan: async () => (await import('./plan.js')).planCommand,
  bundle: async () => (await import('./bundle.js')).bundleCommand,
  install: async () => (await import('./install.js')).installCommand,
  apply: async () => (await import('./apply.js')).applyCommand,
  wait: async () => (await import('./wait.js')).waitCommand,
  status: async () => (await import('./status.js')).statusCommand,
  stage: async () => (await import('./stage.js')).stageCommand,
  agent: async () => (await import('./agent.js')).agentCommand,
};

async function commandsFor(argv: readonly string[], ctx: CommandContext, scriptName: string): Promise<CommandModule<any, any>[]> {
  const named = argv.find((a) => !a.startsWith('-'));
  const names = named !== undefined && named in COMMANDS ? [named] : Object.keys(COMMANDS);
  return Promise.all(names.map(async (name) => (await COMMANDS[name]!())(ctx, scriptName)));
}

export interface MainIO {
  readonly stdout?: NodeJS.WritableStream;
  readonly stderr?: NodeJS.WritableStream;
  /** How the user invoked us: `prestage`, `oc prestage`, `kubectl prestage`. */
  readonly scriptName?: string;
}

export function scriptNameFor(binPath: string | undefined): string {
  const bin = basename(binPath ?? 'prestage').replace(/\.js$/, '');
  if (bin === 'oc-prestage') return 'oc prestage';
  if (bin === 'kubectl-prestage') return 'kubectl prestage';
  return 'prestage';
}

export async function main(argv: readonly string[], io: MainIO = {}): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const scriptName = io.scriptName ?? scriptNameFor(process.argv[1]);
  const level = logLevelFrom(argv);
  const ctx: CommandContext = { stdout, stderr, log: createCliLogger(level, scriptName, stderr) };
  let exitCode: number = ExitCode.ok;
  try {
    const cli = yargs([...argv])
      .scriptName(scriptName)
      .option('log-level', { choices: ['debug', 'info', 'warn', 'error', 'silent'] as const, default: 'warn' as const, describe: 'Log level (logs go to stderr)' });
    for (const command of await commandsFor(argv, ctx, scriptName)) cli.command(command);
    await cli
      .demandCommand(1, `name a command (${Object.keys(COMMANDS).join(', ')})`)
      .strict()
      .exitProcess(false)
      .wrap(Math.min(120, (stdout as { columns?: number }).columns ?? 100))
      .fail((msg, err) => {
        throw err ?? new BadInputError(`${msg}; see ${scriptName} --help`);
      })
      .help()
      .version()
      .parseAsync();
  } catch (err) {
    exitCode = report(err, stderr, scriptName);
  }
  return exitCode;
}

function report(err: unknown, stderr: NodeJS.WritableStream, scriptName: string): number {
  if (err instanceof PrestageError) {
    stderr.write(`${scriptName}: error: ${err.message}\n`);
    return err.exitCode;
  }
  // Anything else is a bug in prestage: still one line, the stack only on request.
  const message = err instanceof Error ? err.message : String(err);
  stderr.write(`${scriptName}: internal error: ${message}${process.env.PRESTAGE_DEBUG ? `\n${(err as Error).stack ?? ''}` : ' (set PRESTAGE_DEBUG=1 for a stack trace)'}\n`);
  return 70;
}

function logLevelFrom(argv: readonly string[]): LogLevel {
  const i = argv.findIndex((a) => a === '--log-level' || a.startsWith('--log-level='));
  if (i < 0) return 'warn';
  const v = argv[i]!.includes('=') ? argv[i]!.split('=')[1] : argv[i + 1];
  return (['debug', 'info', 'warn', 'error', 'silent'] as const).find((l) => l === v) ?? 'warn';
}
