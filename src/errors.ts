/**
 * The error family. Every failure a user can cause or meet is one of these; the CLI's single
 * top-level catch turns it into one line on stderr and its exit code.
 */
export const ExitCode = {
  ok: 0,
  /** wait: a set failed on some node. */
  failed: 1,
  badInput: 2,
  registry: 3,
  cluster: 4,
  /** A bug in prestage (sysexits EX_SOFTWARE). */
  internal: 70,
  /** The output could not be written: disk full, an unwritable file (sysexits EX_IOERR). */
  output: 74,
  timeout: 124,
} as const;

/** What `--help` and the docs list. */
export const EXIT_CODES_HELP = [
  'Exit codes:',
  '  0    ok (also when stdout is closed early, e.g. | head)',
  '  1    a set failed on a node (wait, stage, agent --once); NOT READY (ready); NOT VERIFIED (verify)',
  '  2    bad input: flags, files, references, unknown sets',
  '  3    registry or network failure after retries',
  '  4    Kubernetes API failure or refusal',
  '  70   internal error (a bug; PRESTAGE_DEBUG=1 shows the stack)',
  '  74   output could not be written (disk full)',
  '  124  timeout (wait, stage); verify: a targeted node did not answer',
].join('\n');

export abstract class PrestageError extends Error {
  abstract readonly exitCode: number;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Bad flags, files, references or content: the user can fix it. Exit 2. */
export class BadInputError extends PrestageError {
  readonly exitCode = ExitCode.badInput;
}

/** The registry or network failed after retries, or refused access. Exit 3. */
export class RegistryError extends PrestageError {
  readonly exitCode = ExitCode.registry;
}

/** Content from a registry did not match its digest (corruption, truncation, a lying proxy). Exit 3. */
export class DigestMismatchError extends RegistryError {}

/** The Kubernetes API failed or refused. Exit 4. */
export class ClusterError extends PrestageError {
  readonly exitCode = ExitCode.cluster;
}

/** Output could not be written (disk full, a failing stdout). Exit 74. */
export class OutputError extends PrestageError {
  readonly exitCode = ExitCode.output;
}

/** `no space left on device (ENOSPC)` from Node's `ENOSPC: no space left on device, write`. */
export function systemErrorText(error: NodeJS.ErrnoException): string {
  const text = error.message.replace(/^[A-Z]+: /, '').replace(/, \w+( '.*')?$/, '');
  return error.code && !text.includes(error.code) ? `${text} (${error.code})` : text;
}
