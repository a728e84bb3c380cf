/**
 * Kubeconfig for the CLI commands that talk to a cluster (apply, wait, status, stage), read the
 * way kubectl reads it, without @kubernetes/client-node: that library costs ~70 MiB of RSS,
 * which `wait` cannot afford next to 1000 nodes (see `npm run bench:wait`).
 *
 * Covered: a KUBECONFIG list merged by kubectl's rules (the first file to name a cluster, user,
 * context or current-context wins), `~/.kube/config`, in-cluster ServiceAccount config,
 * CA / client certificates inline or as files (relative to their kubeconfig), bearer tokens
 * and token files (re-read, as bound tokens rotate), basic auth, TLS skip-verify and server
 * name, and exec credential plugins (`oc login` with SSO, EKS, GKE). The rare rest (`proxy-url`,
 * legacy `auth-provider`) is handed to client-node, loaded only then.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path';
import yaml from 'js-yaml';
import { BadInputError } from '../errors.js';

/** What KubeClient needs from a kubeconfig; client-node's KubeConfig has the same shape. */
export interface ClusterCredentials {
  getCurrentCluster(): { readonly server: string; readonly proxyUrl?: string | undefined } | null;
  /** Adds CA, client certificate and Authorization to one request; may refresh credentials. */
  applyToHTTPSOptions(options: RequestOptions): Promise<void>;
}

export interface KubeconfigSelection {
  /** `--kubeconfig`: this file only. */
  readonly kubeconfig?: string | undefined;
  /** `--context`. */
  readonly context?: string | undefined;
}

/** Where things are; tests point them elsewhere. */
export interface KubeconfigEnvironment {
  readonly KUBECONFIG?: string | undefined;
  readonly home?: string;
  readonly KUBERNETES_SERVICE_HOST?: string | undefined;
  readonly KUBERNETES_SERVICE_PORT?: string | undefined;
  readonly serviceAccountDir?: string;
}

interface NamedCluster {
  server?: string;
  'certificate-authority'?: string;
  'certificate-authority-data'?: string;
  'insecure-skip-tls-verify'?: boolean;
  'tls-server-name'?: string;
  'proxy-url'?: string;
}

interface ExecConfig {
  command: string;
  args?: string[];
  env?: Array<{ name: string; value: string }> | null;
  apiVersion?: string;
  provideClusterInfo?: boolean;
}

interface NamedUser {
  token?: string;
  tokenFile?: string;
  'client-certificate'?: string;
  'client-certificate-data'?: string;
  'client-key'?: string;
  'client-key-data'?: string;
  username?: string;
  password?: string;
  exec?: ExecConfig;
  'auth-provider'?: unknown;
}

interface NamedContext {
  cluster?: string;
  user?: string;
}

interface KubeconfigFile {
  'current-context'?: string;
  clusters?: Array<{ name: string; cluster: NamedCluster }> | null;
  users?: Array<{ name: string; user: NamedUser }> | null;
  contexts?: Array<{ name: string; context: NamedContext }> | null;
}

/** A cluster and a user, with file paths made absolute against the file that named them. */
interface Resolved {
  readonly cluster: NamedCluster;
  readonly user: NamedUser;
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** client-go re-reads token files about this often. */
const TOKEN_FILE_TTL_MS = 60_000;

/**
 * `--kubeconfig`, else $KUBECONFIG (a list), else ~/.kube/config, else in-cluster config.
 * Bad or missing input is a BadInputError naming it and the fix.
 */
export async function loadKubeconfig(selection: KubeconfigSelection, env: KubeconfigEnvironment = processEnvironment()): Promise<ClusterCredentials> {
  const files = selection.kubeconfig ? [selection.kubeconfig] : (env.KUBECONFIG ?? '').split(delimiter).filter(Boolean);
  const explicit = files.length > 0;
  if (!explicit) {
    const fallback = join(env.home ?? homedir(), '.kube', 'config');
    if (readable(fallback)) files.push(fallback);
  }
  if (files.length === 0) {
    if (env.KUBERNETES_SERVICE_HOST) return inCluster(env, selection);
    throw new BadInputError('no cluster to talk to: pass --kubeconfig, set KUBECONFIG, or run in a pod');
  }
  const merged = mergeFiles(files, Boolean(selection.kubeconfig));
  const contextName = selection.context ?? merged.currentContext;
  if (!contextName) throw new BadInputError(`no current context in ${files.join(delimiter)}: pass --context or set current-context`);
  const context = merged.contexts.get(contextName);
  if (!context) throw new BadInputError(`kubeconfig has no context ${contextName}`);
  const cluster = context.cluster === undefined ? undefined : merged.clusters.get(context.cluster);
  if (!cluster?.server) throw new BadInputError(`kubeconfig context ${contextName} names no cluster with a server: fix its cluster entry or pass another --context`);
  const user = (context.user === undefined ? undefined : merged.users.get(context.user)) ?? {};
  if (cluster['proxy-url'] || user['auth-provider']) return viaClientNode(files, selection.kubeconfig, contextName);
  return new Kubeconfig({ cluster, user }, contextName);
}

function processEnvironment(): KubeconfigEnvironment {
  return { KUBECONFIG: process.env.KUBECONFIG, KUBERNETES_SERVICE_HOST: process.env.KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT: process.env.KUBERNETES_SERVICE_PORT };
}

function readable(path: string): boolean {
  try {
    readFileSync(path);
    return true;
  } catch {
    return false;
  }
}

interface Merged {
  currentContext?: string;
  clusters: Map<string, NamedCluster>;
  users: Map<string, NamedUser>;
  contexts: Map<string, NamedContext>;
}

/** kubectl's merge: in list order, the first definition of each name wins; missing list entries are skipped. */
function mergeFiles(files: readonly string[], mustExist: boolean): Merged {
  const merged: Merged = { clusters: new Map(), users: new Map(), contexts: new Map() };
  let found = 0;
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      if (mustExist || files.length === 1) throw new BadInputError(`cannot read kubeconfig ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
      continue;
    }
    found++;
    let doc: KubeconfigFile;
    try {
      doc = (yaml.load(text) ?? {}) as KubeconfigFile;
    } catch (error) {
      throw new BadInputError(`cannot parse kubeconfig ${file}: ${(error as Error).message.split('\n')[0]}`);
    }
    if (typeof doc !== 'object') throw new BadInputError(`kubeconfig ${file} is not a YAML mapping`);
    const base = dirname(resolve(file));
    merged.currentContext ??= doc['current-context'] || undefined;
    for (const entry of doc.clusters ?? []) if (entry?.name && !merged.clusters.has(entry.name)) merged.clusters.set(entry.name, absolutePaths(entry.cluster ?? {}, base, ['certificate-authority']));
    for (const entry of doc.users ?? []) if (entry?.name && !merged.users.has(entry.name)) merged.users.set(entry.name, absolutePaths(entry.user ?? {}, base, ['client-certificate', 'client-key', 'tokenFile']));
    for (const entry of doc.contexts ?? []) if (entry?.name && !merged.contexts.has(entry.name)) merged.contexts.set(entry.name, entry.context ?? {});
  }
  if (found === 0) throw new BadInputError(`cannot read any kubeconfig of ${files.join(delimiter)}: fix KUBECONFIG or pass --kubeconfig`);
  return merged;
}

function absolutePaths<T extends object>(entry: T, base: string, keys: ReadonlyArray<keyof T & string>): T {
  const copy = { ...entry } as Record<string, unknown>;
  for (const key of keys) {
    const value = copy[key];
    if (typeof value === 'string' && value && !isAbsolute(value)) copy[key] = join(base, value);
  }
  return copy as T;
}

function inCluster(env: KubeconfigEnvironment, selection: KubeconfigSelection): ClusterCredentials {
  if (selection.context) throw new BadInputError(`--context ${selection.context} needs a kubeconfig; in a pod there is only the in-cluster config`);
  const dir = env.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const host = env.KUBERNETES_SERVICE_HOST as string;
  const server = `https://${host.includes(':') ? `[${host}]` : host}:${env.KUBERNETES_SERVICE_PORT ?? '443'}`;
  return new Kubeconfig({ cluster: { server, 'certificate-authority': join(dir, 'ca.crt') }, user: { tokenFile: join(dir, 'token') } }, 'in-cluster');
}

async function viaClientNode(files: readonly string[], explicit: string | undefined, context: string): Promise<ClusterCredentials> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const config = new KubeConfig();
  try {
    // Its default chain reads the same $KUBECONFIG list or ~/.kube/config; the context was chosen above.
    if (explicit) config.loadFromFile(explicit);
    else config.loadFromDefault();
    config.setCurrentContext(context);
  } catch (error) {
    throw new BadInputError(`cannot read kubeconfig ${files.join(delimiter)}: ${(error as Error).message}`);
  }
  return config;
}

interface CachedSecret {
  readonly value: string;
  readonly until: number;
}

/** One cluster and user of a kubeconfig, ready to authenticate requests. */
export class Kubeconfig implements ClusterCredentials {
  private readonly tls: Pick<RequestOptions, 'ca' | 'cert' | 'key' | 'rejectUnauthorized' | 'servername'>;
  private token: CachedSecret | undefined;
  private execCredential: Promise<ExecCredentialStatus> | undefined;
  private execUntil = 0;

  constructor(
    private readonly resolved: Resolved,
    readonly contextName: string,
  ) {
    const { cluster, user } = resolved;
    this.tls = {
      ...(cluster['certificate-authority-data'] ? { ca: decode(cluster['certificate-authority-data'], 'certificate-authority-data') } : cluster['certificate-authority'] ? { ca: readFileOf(cluster['certificate-authority'], 'certificate-authority') } : {}),
      ...(user['client-certificate-data'] ? { cert: decode(user['client-certificate-data'], 'client-certificate-data') } : user['client-certificate'] ? { cert: readFileOf(user['client-certificate'], 'client-certificate') } : {}),
      ...(user['client-key-data'] ? { key: decode(user['client-key-data'], 'client-key-data') } : user['client-key'] ? { key: readFileOf(user['client-key'], 'client-key') } : {}),
      ...(cluster['insecure-skip-tls-verify'] ? { rejectUnauthorized: false } : {}),
      ...(cluster['tls-server-name'] ? { servername: cluster['tls-server-name'] } : {}),
    };
  }

  getCurrentCluster(): { server: string } {
    return { server: this.resolved.cluster.server as string };
  }

  async applyToHTTPSOptions(options: RequestOptions): Promise<void> {
    Object.assign(options, this.tls);
    const { user } = this.resolved;
    const headers = { ...(options.headers as Record<string, string> | undefined) };
    const bearer = user.exec ? await this.execToken(options) : this.bearerToken();
    if (bearer) headers.authorization = `Bearer ${bearer}`;
    else if (user.username !== undefined) options.auth = `${user.username}:${user.password ?? ''}`;
    options.headers = headers;
  }

  private bearerToken(): string | undefined {
    const { user } = this.resolved;
    if (user.token) return user.token;
    if (!user.tokenFile) return undefined;
    if (!this.token || Date.now() >= this.token.until) {
      this.token = { value: readFileOf(user.tokenFile, 'tokenFile').toString('utf8').trim(), until: Date.now() + TOKEN_FILE_TTL_MS };
    }
    return this.token.value;
  }

  /** Runs the plugin when there is no unexpired credential; a certificate it returns joins the TLS options. */
  private async execToken(options: RequestOptions): Promise<string | undefined> {
    if (!this.execCredential || Date.now() >= this.execUntil) {
      this.execCredential = runExec(this.resolved.user.exec as ExecConfig, this.resolved.cluster);
      this.execCredential.catch(() => {
        this.execCredential = undefined;
      });
    }
    const status = await this.execCredential;
    this.execUntil = status.expirationTimestamp ? Date.parse(status.expirationTimestamp) - 10_000 : Number.POSITIVE_INFINITY;
    if (status.clientCertificateData) options.cert = status.clientCertificateData;
    if (status.clientKeyData) options.key = status.clientKeyData;
    return status.token;
  }
}

interface ExecCredentialStatus {
  token?: string;
  clientCertificateData?: string;
  clientKeyData?: string;
  expirationTimestamp?: string;
}

/** The client.authentication.k8s.io ExecCredential protocol; the plugin's stderr is the user's. */
function runExec(exec: ExecConfig, cluster: NamedCluster): Promise<ExecCredentialStatus> {
  const apiVersion = exec.apiVersion ?? 'client.authentication.k8s.io/v1';
  const request = {
    apiVersion,
    kind: 'ExecCredential',
    spec: {
      interactive: false,
      ...(exec.provideClusterInfo ? { cluster: { server: cluster.server, 'certificate-authority-data': cluster['certificate-authority-data'], 'insecure-skip-tls-verify': cluster['insecure-skip-tls-verify'] } } : {}),
    },
  };
  const env: NodeJS.ProcessEnv = { ...process.env, KUBERNETES_EXEC_INFO: JSON.stringify(request) };
  for (const { name, value } of exec.env ?? []) env[name] = value;
  return new Promise((resolvePromise, reject) => {
    execFile(exec.command, exec.args ?? [], { env, timeout: 60_000, maxBuffer: 1 << 20 }, (error, stdout) => {
      if (error) {
        reject(new BadInputError(`kubeconfig exec plugin ${exec.command} failed: ${error.message.split('\n')[0]}`));
        return;
      }
      try {
        const status = (JSON.parse(stdout) as { status?: ExecCredentialStatus }).status;
        if (!status || (!status.token && !status.clientCertificateData)) throw new Error('no status.token or status.clientCertificateData');
        resolvePromise(status);
      } catch (parseError) {
        reject(new BadInputError(`kubeconfig exec plugin ${exec.command} printed no ExecCredential: ${(parseError as Error).message}`));
      }
    });
  });
}

function decode(data: string, field: string): Buffer {
  const bytes = Buffer.from(data, 'base64');
  if (bytes.length === 0) throw new BadInputError(`kubeconfig ${field} is not base64`);
  return bytes;
}

function readFileOf(path: string, field: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new BadInputError(`cannot read kubeconfig ${field} ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}
