/**
 * The one logger: pino, to stderr, so stdout stays clean for -o json / yaml. The CLI shows
 * people one plain line per record; daemons keep pino's JSON lines.
 */
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { printable } from '../terminal-text.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

const REDACT = { paths: ['authorization', '*.authorization', 'password', '*.password'], censor: '[redacted]' };

export function createLogger(level: LogLevel, destination: NodeJS.WritableStream = process.stderr): Logger {
  return pino({ level, base: undefined, redact: REDACT }, destination);
}

const LEVEL_NAMES: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warning', 50: 'error', 60: 'fatal' };

/** `<name>: warning: message key=value` lines for a terminal user. */
export function createCliLogger(level: LogLevel, name: string, destination: NodeJS.WritableStream): Logger {
  const lines = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue;
        const { level: n, msg, time: _time, ...fields } = JSON.parse(line) as Record<string, unknown>;
        const extra = Object.entries(fields).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
        // Messages carry registries' and nodes' words: escaped, so they stay one inert line.
        destination.write(`${name}: ${LEVEL_NAMES[n as number] ?? 'log'}: ${printable(`${String(msg ?? '')}${extra ? ` ${extra}` : ''}`)}\n`);
      }
      done();
    },
  });
  return pino({ level, base: undefined, redact: REDACT }, lines);
}
