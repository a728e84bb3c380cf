/**
 * Real registries for integration tests: Debian's docker-registry (distribution 2.8) on
 * 127.0.0.1, filesystem storage, anonymous, htpasswd (Basic) or token (Bearer) auth, with
 * or without TLS. Registries can share one storage directory, so content pushed once to an
 * anonymous registry is also served by authenticated ones.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, rmSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';
import { createServerCertificate, type ServerCertificate } from './certificates.js';
import { freePort } from './free-port.js';
import { withGoCollector, type GoCollector } from './go-runtime.js';
import { startTokenIssuer, type TokenIssuerHandle } from './token-issuer.js';

const REGISTRY_BIN = '/usr/bin/docker-registry';
const HTPASSWD_BIN = '/usr/bin/htpasswd';
/** The `service` of token auth: the audience tokens must name. */
export const TOKEN_SERVICE = 'prestage-test-registry';
const READY_TIMEOUT_MS = 15_000;
const STOP_GRACE_MS = 5_000;

export type RegistryAuth = 'none' | 'basic' | 'token';

export interface RegistryOptions {
  /** Share storage with another registry; default: a fresh directory removed on stop. */
  storageDir?: string;
  auth?: RegistryAuth;
  tls?: boolean;
  /** Token issuer settings (auth 'token' only); both can also be changed on the handle. */
  token?: { expiresIn?: number; quayMode?: boolean };
  /** Default quiet (`go-runtime.ts`); the benchmark compares Go's own default. */
  goCollector?: GoCollector;
}

export interface RegistryHandle {
  /** `127.0.0.1:PORT`, the registry part of image references. */
  readonly host: string;
  /** `http(s)://127.0.0.1:PORT`. */
  readonly url: string;
  readonly storageDir: string;
  /** Credentials for 'basic' and 'token' registries (random per start). */
  readonly username?: string;
  readonly password?: string;
  /** The test CA that signed the registry's (and its token realm's) certificate. */
  readonly caFile?: string;
  readonly tokenIssuer?: TokenIssuerHandle;
  /** The registry's own log (stdout and stderr). */
  readonly logFile: string;
  /** The registry process (a bench reads its CPU from /proc). */
  readonly pid: number | undefined;
  stop(): Promise<void>;
}

export async function startRegistry(options: RegistryOptions = {}): Promise<RegistryHandle> {
  const auth = options.auth ?? 'none';
  const workDir = await mkdtemp(join(tmpdir(), 'prestage-registry-'));
  removeOnExit(workDir);
  const storageDir = options.storageDir ?? join(workDir, 'storage');
  const logFile = join(workDir, 'registry.log');
  const credentials = auth === 'none' ? undefined : { username: 'prestage', password: randomBytes(12).toString('hex') };
  const certificate = options.tls ? await createServerCertificate(workDir) : undefined;

  let tokenIssuer: TokenIssuerHandle | undefined;
  let registry: RunningRegistry | undefined;
  const stop = async (): Promise<void> => {
    await registry?.stop();
    await tokenIssuer?.stop();
    await rm(workDir, { recursive: true, force: true });
    workDirs.delete(workDir);
  };

  try {
    let authConfig: object | undefined;
    if (auth === 'basic' && credentials) {
      const htpasswdFile = join(workDir, 'htpasswd');
      await writeFile(htpasswdFile, await htpasswdLine(credentials.username, credentials.password));
      authConfig = { htpasswd: { realm: 'prestage-test', path: htpasswdFile } };
    } else if (auth === 'token' && credentials) {
      tokenIssuer = await startTokenIssuer({
        dir: workDir,
        service: TOKEN_SERVICE,
        ...credentials,
        ...options.token,
        ...(certificate && { tls: certificate }),
      });
      authConfig = {
        token: {
          realm: tokenIssuer.realm,
          service: TOKEN_SERVICE,
          issuer: tokenIssuer.issuer,
          rootcertbundle: tokenIssuer.certFile,
        },
      };
    }
    registry = await launch({ workDir, storageDir, logFile, certificate, authConfig, goCollector: options.goCollector });
    const scheme = certificate ? 'https' : 'http';
    return {
      host: registry.host,
      url: `${scheme}://${registry.host}`,
      storageDir,
      ...credentials,
      ...(certificate && { caFile: certificate.caFile }),
      ...(tokenIssuer && { tokenIssuer }),
      logFile,
      pid: registry.pid,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

interface LaunchSettings {
  readonly workDir: string;
  readonly storageDir: string;
  readonly logFile: string;
  readonly certificate: ServerCertificate | undefined;
  readonly authConfig: object | undefined;
  readonly goCollector: GoCollector | undefined;
}

interface RunningRegistry {
  readonly host: string;
  readonly pid: number | undefined;
  stop(): Promise<void>;
}

/** Spawns the registry on a free port; tries again if another process took the port first. */
async function launch(settings: LaunchSettings): Promise<RunningRegistry> {
  for (let attempt = 1; ; attempt++) {
    const host = `127.0.0.1:${await freePort()}`;
    const configFile = join(settings.workDir, 'config.yml');
    await writeFile(configFile, dump(registryConfig(host, settings)));
    const child = spawnTracked(REGISTRY_BIN, ['serve', configFile], settings.logFile, settings.goCollector);
    try {
      await waitUntilServing(child, host, settings.certificate?.caFile);
      return { host, pid: child.pid, stop: () => terminate(child) };
    } catch (error) {
      await terminate(child);
      const logTail = await tail(settings.logFile);
      if (attempt < 3 && logTail.includes('address already in use')) continue;
      throw new Error(`docker-registry did not start on ${host}: ${(error as Error).message}\n--- registry log (tail) ---\n${logTail}`);
    }
  }
}

function registryConfig(host: string, settings: LaunchSettings): object {
  return {
    version: 0.1,
    log: { level: 'info' },
    storage: {
      filesystem: { rootdirectory: settings.storageDir },
      delete: { enabled: true },
      // Registries sharing storage must not purge each other's uploads.
      maintenance: { uploadpurging: { enabled: false } },
    },
    http: {
      addr: host,
      // Upload state is HMAC-signed with this; fixed per registry so it never warns.
      secret: randomBytes(16).toString('hex'),
      ...(settings.certificate && {
        tls: { certificate: settings.certificate.certFile, key: settings.certificate.keyFile },
      }),
    },
    ...(settings.authConfig && { auth: settings.authConfig }),
  };
}

async function htpasswdLine(username: string, password: string): Promise<string> {
  // distribution's htpasswd backend accepts bcrypt entries only.
  const { stdout } = await promisify(execFile)(HTPASSWD_BIN, ['-Bbn', username, password]);
  return stdout.trim() + '\n';
}

/** Any HTTP answer on /v2/ (200 or 401) means the registry is serving. */
async function waitUntilServing(child: ChildProcess, host: string, caFile: string | undefined): Promise<void> {
  const ca = caFile ? await readFile(caFile) : undefined;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`it exited (${child.exitCode ?? child.signalCode})`);
    }
    if (await answersHttp(`${ca ? 'https' : 'http'}://${host}/v2/`, ca)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no answer on /v2/ within ${READY_TIMEOUT_MS} ms`);
}

function answersHttp(url: string, ca: Buffer | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const request = ca ? httpsRequest(url, { ca, agent: false }) : httpRequest(url, { agent: false });
    request.setTimeout(1_000, () => request.destroy());
    request.once('response', (response) => {
      response.resume();
      resolve(true);
    });
    request.once('error', () => resolve(false));
    request.end();
  });
}

async function tail(file: string, lines = 30): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

// Child process hygiene: registries must not outlive the test process, however it ends.

const running = new Set<ChildProcess>();
const workDirs = new Set<string>();
let exitHookInstalled = false;

/** On an exit without stop(), kill what still runs and remove its files. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const orphan of running) orphan.kill('SIGKILL');
    for (const dir of workDirs) rmSync(dir, { recursive: true, force: true });
  });
}

function removeOnExit(workDir: string): void {
  installExitHook();
  workDirs.add(workDir);
}

function spawnTracked(command: string, args: string[], logFile: string, goCollector: GoCollector | undefined): ChildProcess {
  const log = openSync(logFile, 'a');
  const child = spawn(command, args, { stdio: ['ignore', log, log], env: withGoCollector(withoutRegistryOverrides(process.env), goCollector) });
  closeSync(log);
  installExitHook();
  running.add(child);
  child.once('exit', () => running.delete(child));
  // 'exit' hooks do not run when the test process is killed; a watchdog that holds a pipe
  // from us sees EOF then, and kills the registry.
  if (child.pid !== undefined) {
    const watchdog = spawn('/bin/sh', ['-c', 'read _; kill -9 "$0" 2>/dev/null', String(child.pid)], {
      stdio: ['pipe', 'ignore', 'ignore'],
      detached: true,
    });
    watchdog.unref();
    watchdog.stdin?.on('error', () => undefined);
    (watchdog.stdin as unknown as { unref(): void } | null)?.unref();
    child.once('exit', () => watchdog.kill('SIGKILL'));
  }
  return child;
}

/**
 * distribution reads every `REGISTRY_*` variable as a config override; containers tools use
 * `REGISTRY_AUTH_FILE` for credentials, and with it set the registry refuses its config.
 */
function withoutRegistryOverrides(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith('REGISTRY_')));
}

/** SIGTERM, then SIGKILL after a grace period. */
async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}
