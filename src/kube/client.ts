/**
 * The one fence around the Kubernetes API: JSON requests and watch streams over node:https,
 * authenticated by a kubeconfig (./kubeconfig.ts, or client-node's KubeConfig in tests).
 * Everything else in prestage speaks paths and plain objects, so the backends and tests read like the API they use.
 */
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from 'node:https';
import { Agent as HttpAgent, request as httpRequest, type Agent, type IncomingMessage } from 'node:http';
import { HttpProxyAgent, HttpsProxyAgent } from 'hpagent';
import { createInterface } from 'node:readline';
import { ClusterError } from '../errors.js';
import { proxyFor } from '../net/proxy.js';
import { systemTrust } from '../net/trust.js';
import type { ClusterCredentials } from './kubeconfig.js';

export interface ObjectMeta {
  name: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export interface KubeList<T extends KubeObject = KubeObject> {
  metadata: { resourceVersion: string; continue?: string };
  items: T[];
}

export interface WatchEvent<T extends KubeObject = KubeObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

/** An API answer other than 2xx; `status` 0 when the server could not be reached. */
export class KubeApiError extends ClusterError {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

const THROTTLE_ATTEMPTS = 10;

type Query = Record<string, string | number | boolean | undefined>;

export class KubeClient {
  readonly server: string;
  private agent: Agent | boolean | undefined;

  constructor(readonly config: ClusterCredentials) {
    const cluster = config.getCurrentCluster();
    if (!cluster) throw new ClusterError('the kubeconfig has no current cluster');
    this.server = cluster.server.replace(/\/$/, '');
  }

  async get<T = KubeObject>(path: string, query: Query = {}): Promise<T> {
    return this.request<T>('GET', path, { query });
  }

  /** GET, or undefined on 404. */
  async find<T = KubeObject>(path: string): Promise<T | undefined> {
    try {
      return await this.get<T>(path);
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return undefined;
      throw error;
    }
  }

  /** Server-side apply as `fieldManager`, taking ownership of conflicting fields (we own these objects). */
  async apply<T extends KubeObject>(path: string, object: T, options: { fieldManager: string; dryRun?: boolean }): Promise<T> {
    return this.request<T>('PATCH', path, {
      body: object,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: options.fieldManager, force: true, dryRun: options.dryRun ? 'All' : undefined },
    });
  }

  async request<T>(method: string, path: string, options: { query?: Query; body?: unknown; contentType?: string } = {}): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const response = await this.send(method, path, options.query ?? {}, options.body, options.contentType);
      const text = await readAll(response.body);
      if (response.status >= 200 && response.status <= 299) return parseJson<T>(this.server, method, path, response.headers['content-type'], text);
      // 429: API priority and fairness, or storage still initialising after a CRD or a restart.
      if (response.status === 429 && attempt < THROTTLE_ATTEMPTS) {
        await new Promise((resolve) => setTimeout(resolve, Math.min(Number(response.headers['retry-after'] ?? 1), 10) * 1000));
        continue;
      }
      throw apiError(method, path, response.status, text);
    }
  }

  /** GET a plain-text body (a Service's Prometheus metrics through the API server's service proxy). */
  async getText(path: string): Promise<string> {
    const response = await this.send('GET', path, {}, undefined, undefined, undefined, 'text/plain');
    const text = await readAll(response.body);
    if (response.status >= 200 && response.status <= 299) return text;
    throw apiError('GET', path, response.status, text);
  }

  /**
   * One watch request: calls `onEvent` per event until the server ends the stream (resolves)
   * or the request fails (rejects with KubeApiError). Re-watching is the caller's business.
   */
  async watch<T extends KubeObject>(path: string, query: Query, onEvent: (event: WatchEvent<T>) => void, signal?: AbortSignal): Promise<void> {
    const response = await this.send('GET', path, { ...query, watch: true }, undefined, undefined, signal);
    if (response.status !== 200) throw apiError('WATCH', path, response.status, await readAll(response.body));
    const lines = createInterface({ input: response.body, crlfDelay: Infinity });
    await new Promise<void>((resolve, reject) => {
      // readline re-emits its input's errors on itself: both must be handled.
      lines.on('error', (error) => reject(unreachable(this.server, error)));
      lines.on('line', (line) => {
        if (!line.trim()) return;
        try {
          onEvent(JSON.parse(line) as WatchEvent<T>);
        } catch (error) {
          // The handler refused the stream (e.g. a 410 ERROR event): end this watch with it.
          reject(error);
          response.body.destroy();
        }
      });
      lines.once('close', () => resolve());
    });
  }

  private async send(method: string, path: string, query: Query, body: unknown, contentType?: string, signal?: AbortSignal, accept = 'application/json'): Promise<{ status: number; headers: IncomingMessage['headers']; body: IncomingMessage }> {
    const url = new URL(this.server + path);
    for (const [key, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(key, String(value));
    const options: RequestOptions = { method, headers: { accept } };
    // Per call: credentials may refresh (exec plugins, token files).
    await this.config.applyToHTTPSOptions(options);
    // One keep-alive agent so requests share connections (client-node would make one per call);
    // behind a kubeconfig proxy-url, client-node's proxy agent.
    this.agent ??= this.config.getCurrentCluster()?.proxyUrl ? options.agent : agentFor(url, options);
    options.agent = this.agent;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined) options.headers = { ...options.headers, 'content-type': contentType ?? 'application/json', 'content-length': Buffer.byteLength(payload) };
    const send = url.protocol === 'http:' ? httpRequest : httpsRequest;
    return new Promise((resolve, reject) => {
      const req = send(url, { ...options, ...(signal ? { signal } : {}) }, (res) => {
        // Readers report errors while they read; a reset after they are done (an aborted
        // watch, a server going away) must not become an uncaught 'error' event.
        res.on('error', () => undefined);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: res });
      });
      req.on('error', (error) => reject(signal?.aborted ? error : unreachable(this.server, error)));
      req.end(payload);
    });
  }
}

/**
 * As kubectl: through HTTPS_PROXY/HTTP_PROXY unless NO_PROXY names the server, trusting the
 * kubeconfig's CA, or the OS trust store when it names none.
 */
function agentFor(url: URL, tls: RequestOptions): Agent {
  const proxy = proxyFor(url);
  if (url.protocol === 'http:') return proxy ? new HttpProxyAgent({ proxy, keepAlive: true }) : new HttpAgent({ keepAlive: true });
  const options = { ca: tls.ca ?? [...systemTrust().certificates], cert: tls.cert, key: tls.key, rejectUnauthorized: tls.rejectUnauthorized, servername: tls.servername, keepAlive: true };
  return proxy ? new HttpsProxyAgent({ ...options, proxy }) : new HttpsAgent(options);
}

function unreachable(server: string, error: Error): KubeApiError {
  return new KubeApiError(0, 'Unreachable', `cannot reach the Kubernetes API at ${server}: ${error.message}`);
}

/** A proxy, a login page or a web server where the API server should be answers HTML: say so, in one line. */
function parseJson<T>(server: string, method: string, path: string, contentType: string | undefined, text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new KubeApiError(0, 'NotJSON', `${method} ${path}: ${server} answered ${contentType ?? 'no content type'}, not JSON; is the kubeconfig's server a Kubernetes API server?`);
  }
}

function apiError(method: string, path: string, status: number, text: string): KubeApiError {
  let reason = String(status);
  let message = text.trim().split('\n')[0] ?? '';
  try {
    const parsed = JSON.parse(text) as { reason?: string; message?: string };
    reason = parsed.reason ?? reason;
    message = parsed.message ?? message;
  } catch {
    // not a Status object: keep the raw first line
  }
  return new KubeApiError(status, reason, `${method} ${path}: ${status} ${reason}: ${message}`);
}

function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    stream.on('error', reject);
  });
}

/** Kubernetes label selector (`matchLabels` + `matchExpressions`); an empty selector matches everything. */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }>;
}

export function matchesSelector(labels: Readonly<Record<string, string>> | undefined, selector: LabelSelector | undefined): boolean {
  const have = labels ?? {};
  for (const [key, value] of Object.entries(selector?.matchLabels ?? {})) if (have[key] !== value) return false;
  for (const { key, operator, values = [] } of selector?.matchExpressions ?? []) {
    const present = key in have;
    const ok =
      operator === 'Exists' ? present
      : operator === 'DoesNotExist' ? !present
      : operator === 'In' ? present && values.includes(have[key]!)
      : !present || !values.includes(have[key]!);
    if (!ok) return false;
  }
  return true;
}
