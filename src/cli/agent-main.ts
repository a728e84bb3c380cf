/**
 * The node agent's entry of its own (`prestage agent` in the DaemonSet; bin/prestage.js and the
 * single executable route `agent` here, `scripts/agent-bundle.ts` bundles from here): the agent's
 * code alone, without yargs, the command table or any other command. The flags are the ones
 * `cli/agent.ts` declares (one definition), read here with Node's own `util.parseArgs`. What the
 * DaemonSet never asks (--help, a flag this reading refuses) goes to the full CLI, loaded then:
 * its help, its words and exit codes, as for every other command.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { ExitCode, PrestageError } from '../errors.js';
import { formatRate } from '../units.js';
import { agentCommand } from './agent.js';
import { reportError } from './error-line.js';
import type { CommandContext } from './context.js';

/** What `cli/agent.ts`'s builder declares of a flag, as yargs would read it. */
interface FlagSpec {
  readonly type?: 'string' | 'number' | 'boolean';
  readonly array?: boolean;
  readonly alias?: string;
  readonly default?: unknown;
  readonly choices?: readonly string[];
  readonly coerce?: (value: unknown) => unknown;
}

class AgentFlagError extends PrestageError {
  readonly exitCode = ExitCode.badInput;
}

/** The agent's flags: its builder's, recorded, and the CLI's global `--log-level`. */
function agentFlags(ctx: CommandContext): Map<string, FlagSpec> {
  const flags = new Map<string, FlagSpec>([['log-level', { type: 'string', default: 'warn', choices: ['debug', 'info', 'warn', 'error', 'silent'] }]]);
  const recorder = {
    option(name: string, spec: FlagSpec) {
      flags.set(name, spec);
      return recorder;
    },
  };
  (agentCommand(ctx).builder as (y: unknown) => unknown)(recorder);
  return flags;
}

/** argv (after `agent`) → the handler's arguments, as yargs would give them: defaults, numbers, arrays, coerced. */
export function parseAgentArgs(argv: readonly string[], flags: ReadonlyMap<string, FlagSpec>): Record<string, unknown> {
  const options: NonNullable<ParseArgsConfig['options']> = {};
  for (const [name, spec] of flags) {
    const type = spec.type === 'boolean' ? 'boolean' : 'string';
    options[name] = { type, ...(spec.array ? { multiple: true } : {}) };
    if (spec.alias) options[spec.alias] = { type, ...(spec.array ? { multiple: true } : {}) };
  }
  options.help = { type: 'boolean', short: 'h' };
  let values: Record<string, unknown>;
  try {
    ({ values } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false, allowNegative: true }));
  } catch (error) {
    throw new AgentFlagError(`${(error as Error).message.split('\n')[0]}; see prestage agent --help`);
  }
  const args: Record<string, unknown> = { help: values.help === true };
  for (const [name, spec] of flags) {
    let value = values[name] ?? (spec.alias ? values[spec.alias] : undefined);
    if (value === undefined) value = spec.array && spec.default === undefined ? [] : spec.default;
    else if (spec.type === 'number') {
      const number = Number(value);
      if (value === '' || !Number.isFinite(number)) throw new AgentFlagError(`--${name}: ${JSON.stringify(value)} is not a number; see prestage agent --help`);
      value = number;
    }
    if (spec.choices && value !== undefined && !spec.choices.includes(String(value))) throw new AgentFlagError(`--${name}: ${JSON.stringify(value)} is not one of ${spec.choices.join(', ')}`);
    if (spec.coerce && value !== undefined) value = spec.coerce(value);
    args[name] = value;
  }
  return args;
}

/**
 * V8 for a small resident daemon, in the agent's own process only (its entries call this; tests do
 * not): the heap sized and collected for memory, and no optimizing compiler (the agent's CPU is
 * waiting on pulls, not running JavaScript). npm run bench:agent: peak RSS 0.71x and idle 0.82x of
 * the previous build with both, at the same CPU. Set here, not in NODE_OPTIONS, which refuses them.
 */
export function tuneV8ForAgent(): void {
  setFlagsFromString('--optimize-for-size');
  setFlagsFromString('--max-opt=0');
}

/** The full CLI's `prestage agent ARGV`: yargs' help and words for what the lean reading does not answer. */
async function fullCli(argv: readonly string[], io: AgentIO): Promise<number> {
  const { main } = await import('./main.js');
  return main(['agent', ...argv], io);
}

export interface AgentIO {
  readonly stdout?: NodeJS.WritableStream;
  readonly stderr?: NodeJS.WritableStream;
}

/**
 * Runs the agent with `argv` (the words after `agent`); resolves with the exit code. `cli` answers
 * --help and the flags this reading refuses (the full CLI by default; it refuses them in its words,
 * or runs the agent when yargs reads what parseArgs does not, e.g. `--set-status false`).
 */
export async function runAgent(argv: readonly string[], io: AgentIO = {}, cli: (argv: readonly string[], io: AgentIO) => Promise<number> = fullCli): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  // The handler makes its own JSON logger; this one is never used before it.
  const ctx = { stdout, stderr, log: undefined } as unknown as CommandContext;
  let args: Record<string, unknown>;
  try {
    args = parseAgentArgs(argv, agentFlags(ctx));
  } catch (err) {
    // A flag this reading or the flag's own check refuses: the CLI's words for it.
    if (err instanceof PrestageError) return cli(argv, io);
    throw err;
  }
  if (args.help) return cli(argv, io);
  try {
    // As the CLI says it for every command: the cap as understood, in both units.
    if (typeof args['link-rate'] === 'number') stderr.write(`link cap: ${formatRate(args['link-rate'])}\n`);
    await agentCommand(ctx).handler({ _: [], $0: 'prestage agent', ...args });
    return ExitCode.ok;
  } catch (err) {
    return reportError(err, stderr, 'prestage');
  }
}
