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
  timeout: 124,
} as const;

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
