/**
 * Debian's headless Chromium, for the tests that need a real browser to open a file prestage
 * writes (the HTML report): the DOM after parsing, and screenshots. The network is cut off (no
 * name resolves, the proxy is a closed port), so a page that needed anything from outside would
 * show broken instead of fetching it.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/** Debian's package chromium-headless-shell (the browser without its UI), else a full chromium. */
const BINARIES = ['chromium-headless-shell', 'chromium'];
const TIMEOUT_MS = 60_000;
/** Chromium's log is long (D-Bus complaints on every start): its end says why it failed. */
const STDERR_SHOWN = 4_000;

export function chromiumBinary(): string {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  for (const name of BINARIES) {
    for (const dir of dirs) {
      const path = join(dir, name);
      try {
        accessSync(path, constants.X_OK);
        return path;
      } catch {
        // not in this directory
      }
    }
  }
  throw new Error(`no headless Chromium on PATH (looked for ${BINARIES.join(', ')}): install Debian's package chromium-headless-shell (scripts/build-testbed.sh does: apt-get install --no-install-recommends chromium-headless-shell)`);
}

/** Runs Chromium once; its stdout, or an error with its stderr's end. */
function run(binary: string, args: readonly string[]): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    // Its own process group: Debian's binary is a shell wrapper that does not exec, so a timeout
    // must kill the group to reach the browser and its renderers.
    const child = spawn(binary, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const stdout: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-STDERR_SHOWN);
    });
    const failed = (why: string) => new Error(`${binary} ${args.at(-1)}: ${why}\n${stderr}`);
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // exited meanwhile
      }
      reject(failed(`no result in ${TIMEOUT_MS / 1000} s`));
    }, TIMEOUT_MS);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(failed(error.message));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolvePromise(Buffer.concat(stdout).toString());
      else reject(failed(`exited with ${code ?? signal}`));
    });
  });
}

/**
 * `file` as Chromium renders it: its DOM (`--dump-dom`), and with `screenshot` a PNG of the first
 * `width` x `height` pixels (default 1200 x 1400) written there, in a second run.
 */
export async function renderPage(file: string, options: { screenshot?: string; width?: number; height?: number } = {}): Promise<{ dom: string }> {
  const binary = chromiumBinary();
  const url = pathToFileURL(resolve(file)).href;
  const profile = await mkdtemp(join(tmpdir(), 'prestage-chromium-'));
  const common = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--no-first-run',
    `--user-data-dir=${profile}`,
    '--host-resolver-rules=MAP * ~NOTFOUND',
    '--proxy-server=http://127.0.0.1:9',
    '--proxy-bypass-list=<-loopback>',
    '--disable-background-networking',
  ];
  try {
    const dom = await run(binary, [...common, '--dump-dom', url]);
    if (options.screenshot) {
      // Chromium exits non-zero when the page does not load or the file cannot be written.
      await run(binary, [...common, `--screenshot=${resolve(options.screenshot)}`, `--window-size=${options.width ?? 1200},${options.height ?? 1400}`, url]);
    }
    return { dom };
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}
