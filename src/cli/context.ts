import type { Logger } from 'pino';

/** What a command needs from its surroundings: streams and a logger, injectable for tests. */
export interface CommandContext {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly log: Logger;
}
