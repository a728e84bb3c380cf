/**
 * A real forward proxy for tests: Debian's tinyproxy on 127.0.0.1, allowing CONNECT to any
 * port (the harness registries listen on random ones), optionally refusing tunnels to some
 * hosts, with its log read back to count what went through it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './free-port.js';

const TINYPROXY_BIN = '/usr/bin/tinyproxy';
const READY_TIMEOUT_MS = 10_000;

export interface ForwardProxyHandle {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** Targets of the CONNECT and plain requests it has served (`host:port`), in order. */
  targets(): Promise<string[]>;
  stop(): Promise<void>;
}

export interface ForwardProxyOptions {
  /** Basic credentials the proxy demands (`BasicAuth`). */
  readonly credentials?: { readonly username: string; readonly password: string };
}

export async function startForwardProxy(options: ForwardProxyOptions = {}): Promise<ForwardProxyHandle> {
  if (!existsSync(TINYPROXY_BIN)) throw new Error(`${TINYPROXY_BIN} is missing: install the Debian package tinyproxy (apt-get install -y tinyproxy)`);
  const dir = await mkdtemp(join(tmpdir(), 'prestage-tinyproxy-'));
  const port = await freePort();
  const logFile = join(dir, 'tinyproxy.log');
  const config = [
    `Port ${port}`,
    'Listen 127.0.0.1',
    'Timeout 600',
    `LogFile "${logFile}"`,
    'LogLevel Info',
    'MaxClients 200',
    'Allow 127.0.0.1',
    'DisableViaHeader Yes',
    // No ConnectPort line: CONNECT to any port.
    ...(options.credentials ? [`BasicAuth ${options.credentials.username} ${options.credentials.password}`] : []),
  ];
  const configFile = join(dir, 'tinyproxy.conf');
  await writeFile(configFile, `${config.join('\n')}\n`);
  const child: ChildProcess = spawn(TINYPROXY_BIN, ['-d', '-c', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.on('error', (error) => (stderr += String(error)));
  const started = Date.now();
  while (!(await listening(port))) {
    if (child.exitCode !== null || Date.now() - started > READY_TIMEOUT_MS) {
      child.kill('SIGKILL');
      throw new Error(`tinyproxy did not start on port ${port}: ${stderr.trim()}`);
    }
    await sleep(50);
  }
  return {
    url: `http://127.0.0.1:${port}`,
    async targets() {
      const log = await readFile(logFile, 'utf8').catch(() => '');
      return [...log.matchAll(/Request \(file descriptor \d+\): (?:CONNECT (\S+)|\w+ https?:\/\/([^/\s]+))/g)].map((m) => m[1] ?? m[2]!);
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
