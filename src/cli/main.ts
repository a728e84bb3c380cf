/**
 * The CLI entry point. `main(argv)` is a plain function (tests call it in-process); the bin
 * files only call `runAsBin()`. One catch turns every error into one line and an exit code.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, extname, join, relative, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import type { Argv } from 'yargs';
import { BadInputError, EXIT_CODES_HELP, ExitCode, OutputError, PrestageError, systemErrorText } from '../errors.js';
import { reportError } from './error-line.js';
import { createCliLogger, type LogLevel } from '../telemetry/log.js';
import { buildInfo } from '../version.js';
import { COMMANDS } from './commands.js';
import { normalizeDryRun } from './dry-run-flag.js';
import { formatRate } from '../units.js';
import { didYouMean } from './did-you-mean.js';
import { exitCodesHelp, helpEpilogue } from './help.js';
import { normalizeOutputFlag } from './output-flag.js';
import { completionCandidates, completionScript, COMPLETION_SHELLS, shellFromEnv, type CompletionShell } from './completion.js';
import type { CommandContext } from './context.js';

/** The command the user named: the first word that is one (after the script name when the shell asks for completions). */
function namedCommand(argv: readonly string[]): string | undefined {
  const words = argv[0] === '--get-yargs-completions' ? argv.slice(2) : argv;
  return words.find((word) => Object.hasOwn(COMMANDS, word));
}

/** The command as help knows it: with its subcommand (`bundle create`) when the word after it names one. */
function helpTopic(argv: readonly string[], named: string): string {
  const next = argv[argv.indexOf(named) + 1];
  return next !== undefined && COMMANDS[named]!.subcommands?.includes(next) ? `${named} ${next}` : named;
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

/** stdout was closed by its reader (`| head`): not an error, nothing to say. */
class StdoutClosed extends PrestageError {
  readonly exitCode = ExitCode.ok;
}

function stdoutFailure(error: NodeJS.ErrnoException): PrestageError {
  return error.code === 'EPIPE' ? new StdoutClosed('stdout closed') : new OutputError(`cannot write the output to stdout: ${systemErrorText(error)}`);
}

export async function main(argv: readonly string[], io: MainIO = {}): Promise<number> {
  const words = normalizeOutputFlag(helpAsFlag(argv));
  return run(words, io, asksForHelp(words));
}

/** `help` and `help CMD [SUB]` as kubectl's: the same as `--help` and `CMD [SUB] --help`. */
function helpAsFlag(argv: readonly string[]): readonly string[] {
  return argv[0] === 'help' ? [...argv.slice(1), '--help'] : argv;
}

/** `Unknown argument: plna` with what was probably meant, from the command names or the named command's flags. */
function withSuggestion(msg: string, argv: readonly string[], named: string | undefined, flags: readonly string[]): string {
  const unknown = /^Unknown arguments?: (.*)$/s.exec(msg)?.[1]?.split(', ');
  if (!unknown) return msg;
  // `bundle verfy DIR`: yargs names DIR; the word that went wrong is the subcommand.
  const subcommands = named === undefined ? undefined : COMMANDS[named as keyof typeof COMMANDS]?.subcommands;
  const sub = named === undefined ? undefined : argv[argv.indexOf(named) + 1];
  if (subcommands && sub !== undefined && !sub.startsWith('-') && !subcommands.includes(sub)) {
    const meantSub = didYouMean(sub, subcommands);
    return `Unknown ${named} command: ${sub}${meantSub === undefined ? ` (${named} commands: ${subcommands.join(', ')})` : ` (did you mean ${named} ${meantSub}?)`}`;
  }
  if (unknown.length !== 1) return msg;
  const word = unknown[0]!;
  const asFlag = argv.some((a) => a === `-${word}` || a === `--${word}` || a.startsWith(`--${word}=`));
  const meant = asFlag ? didYouMean(word, flags.filter((f) => f.length > 1)) : named === undefined ? didYouMean(word, Object.keys(COMMANDS)) : undefined;
  return meant === undefined ? msg : `${msg} (did you mean ${asFlag ? '--' : ''}${meant}?)`;
}

async function run(argv: readonly string[], io: MainIO, fullYargs: boolean): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  const scriptName = io.scriptName ?? scriptNameFor(process.argv[1]);
  const level = logLevelFrom(argv);
  const ctx: CommandContext = { stdout, stderr, log: createCliLogger(level, scriptName, stderr) };
  const named = namedCommand(argv);
  // Completing a word: a half-typed value (`--to 4.1`) is not an error to print into the terminal.
  const completing = argv[0] === '--get-yargs-completions';
  // `oc prestage completion`: a script for a name with a space cannot work; the plugin completion does.
  if (argv[0] === 'completion' && scriptName.includes(' ')) {
    const tool = scriptName.split(' ')[0]!;
    stdout.write(`# ${scriptName} completes through ${tool}'s plugin completion (kubectl 1.26+), not a script: put ${tool}_complete-prestage (installed beside ${tool}-prestage) on the PATH.\n`);
    return ExitCode.ok;
  }
  // A failing stdout ends the command: a full disk or a reader that went away is not worth waiting on.
  const outputFailed = new Promise<never>((_, reject) => stdout.on('error', (error: NodeJS.ErrnoException) => reject(stdoutFailure(error))));
  outputFailed.catch(() => undefined); // raced below; a failure before the race must not go unhandled
  let exitCode: number = ExitCode.ok;
  let started = false;
  const flagError = (msg: string): BadInputError => new BadInputError(`${msg.replace(/\s*\n\s*/g, ' ')}; see ${scriptName}${named ? ` ${helpTopic(argv, named)}` : ''} --help`);
  try {
    const yargs = await yargsFor(fullYargs);
    const cli = yargs(normalizeDryRun(argv))
      .scriptName(scriptName)
      // One spelling per flag: camelCase copies would make strict mode report each unknown flag twice.
      .parserConfiguration({ 'camel-case-expansion': false })
      .option('log-level', { choices: ['debug', 'info', 'warn', 'error', 'silent'] as const, default: 'warn' as const, describe: 'Log level (logs go to stderr)' });
    // yargs renders the running command's whole help after starting its handler, for a later
    // showHelp() that prestage never makes: 100-200 ms of CPU per run. --help is unaffected.
    (cli as unknown as { getInternalMethods(): { getUsageInstance(): { cacheHelpMessage(): void } } }).getInternalMethods().getUsageInstance().cacheHelpMessage = () => undefined;
    for (const [name, descriptor] of Object.entries(COMMANDS)) {
      // Help and completion list every command; only the named one is loaded.
      const command = name === named ? (await descriptor.load())(ctx, scriptName) : undefined;
      cli.command({
        command: descriptor.usage,
        describe: descriptor.describe,
        builder: (y: Argv): Argv => {
          const withExamples = descriptor.examples.reduce((acc, [line, what]) => acc.example(`# ${what}\n${line}`, ''), y).epilogue(helpEpilogue(exitCodesHelp(descriptor.exitCodes), descriptor.docs, scriptName));
          // Every command's builder is synchronous.
          if (typeof command?.builder === 'function') return command.builder(withExamples) as Argv;
          return command?.builder ? withExamples.options(command.builder) : withExamples;
        },
        handler: async (args) => {
          if (!command) throw new Error(`command ${name} ran without being loaded`);
          started = true;
          // The cap as understood, in both units: 40Mbps and 40MB/s differ eightfold.
          if (typeof args['link-rate'] === 'number') stderr.write(`link cap: ${formatRate(args['link-rate'])}\n`);
          await command.handler(args);
        },
      });
    }
    const parsed = cli
      // The hidden yargs command answers --get-yargs-completions; `completion SHELL` prints the scripts.
      .completion('__complete', false, (current: string, _argv: unknown, candidates: (onCompleted: (err: Error | null, found: string[] | undefined) => void) => void, done: (found: string[]) => void) => candidates((_err, found) => done(completionCandidates(current, found ?? []))))
      .command({
        command: 'completion [shell]',
        describe: `Print a shell completion script (${COMPLETION_SHELLS.join(', ')}), e.g. ${scriptName} completion bash >> ~/.bashrc`,
        builder: (y: Argv) => y.positional('shell', { type: 'string', choices: COMPLETION_SHELLS, describe: 'The shell to complete in [default: the one $SHELL names]' }).epilogue(exitCodesHelp([])),
        handler: (args) => void stdout.write(completionScript((args.shell as CompletionShell | undefined) ?? shellFromEnv(process.env.SHELL), scriptName)),
      })
      .demandCommand(1, `name a command (${Object.keys(COMMANDS).join(', ')})`)
      .strict()
      .exitProcess(false)
      .wrap(Math.min(120, (stdout as { columns?: number }).columns ?? 100))
      .fail((msg, err) => {
        // A handler's error passes through. yargs' own (a YError, also wrapping a flag's coerce
        // check) is bad input, on one line ("Invalid values:\n  Argument: ..." spans lines).
        throw err && err.name !== 'YError' ? err : flagError(withSuggestion(msg ?? err.message, argv, named, Object.keys((cli as unknown as { getOptions(): { key: Record<string, unknown> } }).getOptions().key)));
      })
      .epilogue(EXIT_CODES_HELP)
      .help()
      .alias('help', 'h')
      .version(buildInfo().version)
      .parseAsync();
    await Promise.race([parsed, outputFailed]);
    // A synchronous write (a file, a pipe) reports its error on the next tick, after the command returned.
    const failedWrite = (stdout as Partial<Writable>).errored;
    if (failedWrite) throw stdoutFailure(failedWrite);
  } catch (caught) {
    // An asynchronous coerce's YError reaches here without passing .fail() (yargs swallows
    // what .fail() throws for it): the same one line.
    const err = caught instanceof Error && caught.name === 'YError' ? flagError(caught.message) : caught;
    // Help yargs renders before any command starts: once more, with its renderer.
    if (err instanceof HelpRendererNeeded && !started && !fullYargs) return run(argv, io, true);
    exitCode = completing ? ExitCode.ok : report(err, stderr, scriptName);
  }
  return exitCode;
}

/**
 * The bin files' entry. A command a closed stdout cut short (a watch, open sockets) must not
 * keep the process alive; a closed stderr leaves no one to tell.
 */
export async function runAsBin(): Promise<void> {
  // Installed as kubectl_complete-prestage (oc_complete-prestage): kubectl's plugin completion.
  const completing = PLUGIN_COMPLETION.exec(basename(process.argv[1] ?? ''));
  if (completing) {
    process.exitCode = await completePlugin(process.argv.slice(2), `${completing[1]} prestage`);
    return;
  }
  const named = namedCommand(process.argv.slice(2));
  // Only a process of its own: tests call main() in-process.
  const args = process.argv.slice(2);
  const heavy = (COMMANDS[named ?? '']?.notBriefWith ?? []).some((flag) => args.some((arg) => arg === flag || arg.startsWith(`${flag}=`)));
  if (named !== undefined && COMMANDS[named]!.brief && !heavy) setFlagsFromString('--max-opt=1');
  let outputFailed = false;
  process.stdout.on('error', () => (outputFailed = true));
  process.stderr.on('error', () => undefined);
  process.exitCode = await main(process.argv.slice(2));
  if (outputFailed) process.exit();
}

const PLUGIN_COMPLETION = /^(kubectl|oc)_complete-prestage(?:\.js)?$/;

/**
 * kubectl (1.26+) completes a plugin's words by running `kubectl_complete-<plugin>` with them, the
 * last one being completed, and reads Cobra's answer: one candidate per line, then
 * `:<directive>`. The candidates are yargs' own, as `prestage completion` gives them.
 */
export async function completePlugin(words: readonly string[], scriptName: string, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  // yargs prints the candidates with console.log, and answers zsh with `word:description`;
  // Cobra's format is bash's plain words.
  const lines: string[] = [];
  const log = console.log;
  const shell = process.env.SHELL;
  console.log = (...args: unknown[]) => void lines.push(args.join(' '));
  process.env.SHELL = '/bin/bash';
  try {
    await main(['--get-yargs-completions', 'prestage', ...(words.length ? words : [''])], { scriptName });
  } finally {
    console.log = log;
    if (shell === undefined) delete process.env.SHELL;
    else process.env.SHELL = shell;
  }
  const current = words.at(-1) ?? '';
  const candidates = lines.flatMap((line) => line.split('\n')).filter((line) => line.trim() !== '' && line.startsWith(current));
  // 4: these words only; 0 (none found, e.g. a path argument): kubectl completes file names.
  out.write(`${[...candidates, candidates.length ? ':4' : ':0'].join('\n')}\n`);
  return ExitCode.ok;
}

function report(err: unknown, stderr: NodeJS.WritableStream, scriptName: string): number {
  if (err instanceof StdoutClosed) return err.exitCode;
  return reportError(err, stderr, scriptName);
}

type Yargs = typeof import('yargs').default;

/** Whether the arguments may ask for help (`--help`, `-h`, or `-h` in a group of short flags). */
function asksForHelp(argv: readonly string[]): boolean {
  return argv.some((a) => a === '--help' || a.startsWith('--help=') || /^-[^-]*h/.test(a));
}

/**
 * yargs, without its help renderer unless the arguments may ask for help: cliui and two
 * copies of string-width build ICU emoji sets and an Intl.Segmenter when imported, about a
 * tenth of a second of CPU in every run, and only help text uses them. The light instance is
 * yargs' own factory with the platform shim its ESM entry builds, minus those two (which throw
 * if help is rendered after all: then main runs again with the whole of yargs). Any trouble
 * loading it (another yargs layout) falls back to the whole of yargs.
 */
async function yargsFor(full: boolean): Promise<Yargs> {
  if (!full) {
    try {
      return await lightYargs();
    } catch {
      // another yargs layout: the whole of it
    }
  }
  return (await import('yargs')).default;
}

class HelpRendererNeeded extends Error {}
const Y18N = 'y18n';

/** Inlined by scripts/dist.ts in the single executable, where yargs is bundled rather than resolved. */
declare const __PRESTAGE_BUILD__: string | undefined;
/**
 * The specifiers of yargs' factory, its argv helper and y18n, defined as string literals by
 * scripts/dist.ts so that esbuild bundles them (yargs' package exports do not name the first two:
 * the build resolves them by path). Never read outside the executable.
 */
declare const __PRESTAGE_YARGS_FACTORY__: string;
declare const __PRESTAGE_YARGS_ARGV__: string;
declare const __PRESTAGE_Y18N__: string;

interface YargsParts {
  readonly YargsFactory: (shim: object) => Yargs;
  readonly getProcessArgvBin: () => string;
  readonly Parser: unknown;
  readonly y18n: (opts: { directory: string; updateFiles: boolean }) => object;
  readonly findUp: unknown;
  /** yargs' index.mjs, where it is a file. */
  readonly indexPath: string | undefined;
  readonly require: NodeJS.Require;
}

/** yargs' factory and what its ESM entry gives it: resolved from node_modules, or bundled. */
async function yargsParts(): Promise<YargsParts> {
  if (typeof __PRESTAGE_BUILD__ === 'string') {
    const [factory, argv, parser, y18n, findUp, getCallerFile] = await Promise.all([
      import(__PRESTAGE_YARGS_FACTORY__) as Promise<{ YargsFactory: YargsParts['YargsFactory'] }>,
      import(__PRESTAGE_YARGS_ARGV__) as Promise<{ getProcessArgvBin: () => string }>,
      import('yargs-parser'),
      import(__PRESTAGE_Y18N__) as Promise<{ default: YargsParts['y18n'] }>,
      import('escalade/sync'),
      import('get-caller-file'),
    ]);
    const bundled = ((id: string) => {
      if (id === 'get-caller-file') return getCallerFile.default;
      throw new Error(`${id}: not in the single executable`);
    }) as NodeJS.Require;
    return { YargsFactory: factory.YargsFactory, getProcessArgvBin: argv.getProcessArgvBin, Parser: parser.default, y18n: y18n.default, findUp: findUp.default, indexPath: undefined, require: bundled };
  }
  const index = import.meta.resolve('yargs');
  const [{ YargsFactory }, { getProcessArgvBin }, { default: Parser }, { default: y18n }, { default: findUp }] = await Promise.all([
    import(new URL('./build/lib/yargs-factory.js', index).href) as Promise<{ YargsFactory: YargsParts['YargsFactory'] }>,
    import(new URL('./build/lib/utils/process-argv.js', index).href) as Promise<{ getProcessArgvBin: () => string }>,
    import('yargs-parser'),
    // y18n ships no types.
    import(Y18N) as Promise<{ default: YargsParts['y18n'] }>,
    import('escalade/sync'),
  ]);
  return { YargsFactory, getProcessArgvBin, Parser, y18n, findUp, indexPath: fileURLToPath(index), require: createRequire(index) };
}

async function lightYargs(): Promise<Yargs> {
  const { YargsFactory, getProcessArgvBin, Parser, y18n, findUp, indexPath, require } = await yargsParts();
  const { notStrictEqual, strictEqual } = await import('node:assert');
  const noRenderer = (): never => {
    throw new HelpRendererNeeded('help rendered without cliui');
  };
  // As yargs/lib/platform-shims/esm.mjs builds it.
  return YargsFactory({
    assert: { notStrictEqual, strictEqual },
    cliui: noRenderer,
    findUp,
    getEnv: (key: string) => process.env[key],
    inspect,
    getProcessArgvBin,
    mainFilename: indexPath?.substring(0, indexPath.lastIndexOf('node_modules')) || process.cwd(),
    Parser,
    path: { basename, dirname, extname, relative, resolve, join },
    process: {
      argv: () => process.argv,
      cwd: process.cwd,
      emitWarning: (warning: string, type: string) => process.emitWarning(warning, type),
      execPath: () => process.execPath,
      exit: (code: number) => process.exit(code),
      nextTick: process.nextTick,
      stdColumns: typeof process.stdout.columns !== 'undefined' ? process.stdout.columns : null,
    },
    readFileSync,
    readdirSync,
    require,
    getCallerFile: () => {
      const callerFile = (require('get-caller-file') as (position: number) => string)(3);
      return /^file:\/\//.test(callerFile) ? fileURLToPath(callerFile) : callerFile;
    },
    stringWidth: noRenderer,
    // The executable carries no locale files: yargs' messages are their English keys.
    y18n: y18n({ directory: indexPath ? join(dirname(indexPath), 'locales') : '/nonexistent', updateFiles: false }),
  });
}

function logLevelFrom(argv: readonly string[]): LogLevel {
  const i = argv.findIndex((a) => a === '--log-level' || a.startsWith('--log-level='));
  if (i < 0) return 'warn';
  const v = argv[i]!.includes('=') ? argv[i]!.split('=')[1] : argv[i + 1];
  return (['debug', 'info', 'warn', 'error', 'silent'] as const).find((l) => l === v) ?? 'warn';
}
