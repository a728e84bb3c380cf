/**
 * The CLI entry point. `main(argv)` is a plain function (tests call it in-process); the bin
 * files only call it. One catch turns every error into one line and an exit code.
 */
import { basename } from 'node:path';
import yargs from 'yargs';
import { BadInputError, ExitCode, PrestageError } from '../errors.js';
import { createCliLogger, type LogLevel } from '../telemetry/log.js';
import type { CommandContext } from './context.js';
import { bundleCommand } from './bundle.js';
import { planCommand } from './plan.js';
import { agentCommand } from './agent.js';
import { installCommand } from './install.js';
import { applyCommand } from './apply.js';
import { waitCommand } from './wait.js';
import { statusCommand } from './status.js';
import { stageCommand } from './stage.js';

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
    await yargs([...argv])
      .scriptName(scriptName)
      .option('log-level', { choices: ['debug', 'info', 'warn', 'error', 'silent'] as const, default: 'warn' as const, describe: 'Log level (logs go to stderr)' })
      .command(planCommand(ctx))
      .command(bundleCommand(ctx))
      .command(agentCommand(ctx))
      .command(installCommand(ctx))
      .command(applyCommand(ctx, scriptName))
      .command(waitCommand(ctx, scriptName))
      .command(statusCommand(ctx, scriptName))
      .command(stageCommand(ctx, scriptName))
      .demandCommand(1, 'name a command (plan)')
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
