/** The one logger: pino, to stderr, so stdout stays clean for -o json / yaml. */
import { pino, type Logger } from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

export function createLogger(level: LogLevel, destination: NodeJS.WritableStream = process.stderr): Logger {
  return pino({ level, base: undefined, redact: { paths: ['authorization', '*.authorization', 'password', '*.password'], censor: '[redacted]' } }, destination);
}
