/** Run the CLI in-process (fast, same code path as the bin) or as a real process (exit codes). */
import { execFile } from 'node:child_process';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { main } from '../../src/cli/main.js';

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function collector(): { stream: Writable; text: () => string } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(Buffer.from(chunk));
      done();
    },
  });
  return { stream, text: () => Buffer.concat(chunks).toString('utf8') };
}

export async function runCli(args: readonly string[], scriptName = 'prestage'): Promise<CliResult> {
  return startCli(args, scriptName).done;
}

/** The CLI in-process, with what it printed so far readable while it runs (a wait's first events). */
export function startCli(args: readonly string[], scriptName = 'prestage'): { done: Promise<CliResult>; stdout: () => string } {
  const out = collector();
  const err = collector();
  const done = main(args, { stdout: out.stream, stderr: err.stream, scriptName }).then((code) => ({ code, stdout: out.text(), stderr: err.text() }));
  return { done, stdout: out.text };
}

export const BIN_DIR = fileURLToPath(new URL('../../bin/', import.meta.url));

/** The built bin as a child process; `npm test` builds dist/ first (pretest). */
export function runBin(bin: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [`${BIN_DIR}${bin}.js`, ...args], { env, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
