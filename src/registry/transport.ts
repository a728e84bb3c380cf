/**
 * HTTP transport to one registry: scheme detection, the auth challenge (anonymous, Basic,
 * Bearer token with a cache), redirects that never carry credentials to another origin,
 * retries with backoff on throttling and transient failures, and a per-registry bound on
 * concurrent requests.
 */
import { Readable } from 'node:stream';
import { createSecureContext } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, Pool, ProxyAgent, request, type Dispatcher } from 'undici';
import pLimit, { type LimitFunction } from 'p-limit';
import { PrestageError, RegistryError } from '../errors.js';
import { proxyFor, redactProxy } from '../net/proxy.js';
import { readBundle, systemTrust } from '../net/trust.js';
import { apiHost } from './reference.js';
import { findCredential, type Credential, type PullSecret } from './credentials.js';

export interface RetryPolicy {
  /** Attempts in all, first one included. */
  readonly attempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export interface TransportOptions {
  readonly pullSecrets: readonly PullSecret[];
  /** false: accept any certificate and fall back to plain HTTP (podman's --tls-verify=false). */
  readonly tlsVerify: boolean;
  /** Extra CA bundle (PEM) trusted in addition to the OS trust store. */
  readonly caFile?: string;
  readonly retry: RetryPolicy;
  /** Concurrent requests per registry. */
  readonly concurrency: number;
  /** A response body idle for longer than this is a stall (retried like a reset). */
  readonly stallTimeoutMs: number;
  /** TCP and TLS connection setup; default undici's 10 s. */
  readonly connectTimeoutMs?: number;
  /** Reports retries and redirects; never sees credentials. */
  readonly onEvent?: (event: TransportEvent) => void;
}

export type RetryEvent = Extract<TransportEvent, { kind: 'retry' }>;

export type TransportEvent =
  | { kind: 'retry'; registry: string; url: string; attempt: number; delayMs: number; reason: string }
  | { kind: 'token'; realm: string; scope: string };

export const DEFAULT_RETRY: RetryPolicy = { attempts: 5, baseDelayMs: 500, maxDelayMs: 30_000 };

export interface RegistryResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Dispatcher.ResponseData['body'];
  /** The URL that answered, after redirects. */
  readonly url: string;
}

export interface RequestOptions {
  readonly method?: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  readonly headers?: Record<string, string>;
  /** The request body, made afresh for every send (retries, re-authentication, redirects). */
  readonly body?: () => Buffer | Readable;
  /** Token scopes; default `repository:<repository>:pull`. Pushes ask for `pull,push`. */
  readonly scopes?: readonly string[];
  /**
   * Send once, without retries: for a request the caller must retry as a whole operation
   * (a blob upload session does not survive a half-sent body). Errors come back unwrapped,
   * so `transientReason` can classify them.
   */
  readonly once?: boolean;
  /** Statuses the caller handles itself (no retry, no error). */
  readonly accept?: readonly number[];
  readonly signal?: AbortSignal;
}

const RETRYABLE_STATUS = new Set([408, 429, 500, 502, 503, 504]);
const MAX_REDIRECTS = 5;
/** Tokens that claim to live less than this are treated as living this long (FACTS §2). */
const MIN_TOKEN_SECONDS = 60;
const MAX_RETRY_AFTER_MS = 60_000;

type Challenge =
  | { scheme: 'none' }
  | { scheme: 'basic' }
  | { scheme: 'bearer'; realm: string; service?: string };

interface CachedToken {
  token: string;
  expiresAt: number;
}

/**
 * One dispatcher per option set: TLS settings live on it. Each origin gets a pool of its own,
 * direct or through the proxy the environment names for it (src/net/proxy.ts); trust is the
 * OS store plus --ca-file, for registries and an HTTPS proxy alike.
 */
export function createDispatcher(opts: Pick<TransportOptions, 'tlsVerify' | 'caFile' | 'stallTimeoutMs' | 'connectTimeoutMs'>): Dispatcher {
  const ca = [...systemTrust().certificates, ...(opts.caFile ? [readBundle(opts.caFile, '--ca-file')] : [])];
  const tls = {
    rejectUnauthorized: opts.tlsVerify,
    // Parsed once for every connection (an OS store holds about 150 certificates), and only
    // when certificates are checked.
    ...(opts.tlsVerify ? { secureContext: createSecureContext({ ca }) } : {}),
    ...(opts.connectTimeoutMs !== undefined ? { timeout: opts.connectTimeoutMs } : {}),
  };
  const pool = { headersTimeout: opts.stallTimeoutMs, bodyTimeout: opts.stallTimeoutMs, connections: 32 };
  return new Agent({
    ...pool,
    connect: tls,
    factory: (origin, options) => {
      const proxy = proxyFor(new URL(origin));
      // Plain-HTTP origins are forwarded (GET http://...), not tunnelled, as curl does: proxies
      // often allow CONNECT only to port 443.
      return proxy ? new ProxyAgent({ ...pool, uri: proxy.href, requestTls: tls, proxyTls: tls, proxyTunnel: false }) : new Pool(origin, options);
    },
  });
}

export class RegistryTransport {
  readonly registry: string;
  private readonly host: string;
  private readonly opts: TransportOptions;
  private readonly dispatcher: Dispatcher;
  private readonly limit: LimitFunction;
  private scheme: 'https' | 'http' | undefined;
  private challenge: Challenge | undefined;
  private readonly tokens = new Map<string, CachedToken>();
  private readonly pendingTokens = new Map<string, Promise<string>>();

  /** `closing`: aborted when the owner closes; retries waiting out a backoff stop at once. */
  constructor(registry: string, opts: TransportOptions, dispatcher: Dispatcher, private readonly closing?: AbortSignal) {
    this.registry = registry;
    this.host = apiHost(registry);
    this.opts = opts;
    this.dispatcher = dispatcher;
    this.limit = pLimit(opts.concurrency);
  }

  /**
   * A request to `/v2/<path>` (or to an absolute URL the registry handed out, such as an
   * upload Location) in the scope of `repository`. Retries, authenticates and follows redirects. The concurrency slot is held until the body is consumed or destroyed.
   * Any status outside 2xx and `accept` becomes a RegistryError.
   */
  async request(repository: string, path: string, ro: RequestOptions = {}): Promise<RegistryResponse> {
    const release = await this.acquireSlot();
    try {
      const res = ro.once ? await this.attempt(repository, path, ro, 1) : await this.withRetries(path, (attempt) => this.attempt(repository, path, ro, attempt));
      let released = false;
      const done = (): void => {
        if (!released) {
          released = true;
          release();
        }
      };
      res.body.once('end', done);
      res.body.once('close', done);
      res.body.once('error', done);
      return res;
    } catch (err) {
      release();
      throw err;
    }
  }

  private acquireSlot(): Promise<() => void> {
    return new Promise((resolveSlot) => {
      void this.limit(() => new Promise<void>((release) => resolveSlot(release)));
    });
  }

  private async withRetries<T>(path: string, fn: (attempt: number) => Promise<T>): Promise<T> {
    const { attempts, baseDelayMs, maxDelayMs } = this.opts.retry;
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn(attempt);
      } catch (err) {
        const transient = transientReason(err);
        if (transient === undefined || attempt >= attempts) {
          if (transient !== undefined) {
            const through = routeOf(this.registry);
            const network = through === 'direct' ? 'the registry or network' : `the registry, the network or the proxy ${through}`;
            throw new RegistryError(`${this.registry}: ${transient} for ${shortPath(path)} after ${attempts} attempts; ${network} is failing, retry later or raise --retries`, { cause: err });
          }
          throw asRegistryError(err, this.registry, shortPath(path));
        }
        const backoff = Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
        const retryAfter = err instanceof RetryableStatus ? err.retryAfterMs : undefined;
        const delayMs = Math.round(retryAfter !== undefined ? Math.min(retryAfter, MAX_RETRY_AFTER_MS) + backoff / 10 : backoff);
        this.opts.onEvent?.({ kind: 'retry', registry: this.registry, url: `${this.registry}/v2/${shortPath(path)}`, attempt, delayMs, reason: transient });
        await sleep(delayMs, undefined, this.closing ? { signal: this.closing } : {});
      }
    }
  }

  private async attempt(repository: string, path: string, ro: RequestOptions, attempt: number): Promise<RegistryResponse> {
    const scheme = await this.resolveScheme();
    const origin = `${scheme}://${this.host}`;
    let url = /^https?:\/\//.test(path) ? path : `${origin}/v2/${path}`;
    const scopes = ro.scopes ?? [`repository:${repository}:pull`];
    const challenge = this.challenge ?? { scheme: 'none' };
    // Credentials go only to the registry's own origin.
    let authorization = new URL(url).origin === origin ? await this.authorization(challenge, repository, scopes, false) : undefined;
    let reauthenticated = false;
    for (let hop = 0; ; ) {
      const body = ro.body?.();
      const res = await request(url, {
        method: ro.method ?? 'GET',
        headers: { 'user-agent': 'prestage', ...ro.headers, ...(authorization ? { authorization } : {}) },
        dispatcher: this.dispatcher,
        ...(body ? { body } : {}),
        ...(ro.signal ? { signal: ro.signal } : {}),
      }).finally(() => {
        // A body the server did not read (a 401, a redirect) must not keep its file open.
        if (body instanceof Readable && !body.readableEnded) body.destroy();
      });
      const { statusCode: status } = res;
      if (status >= 300 && status < 400 && res.headers.location) {
        await res.body.dump();
        if (++hop > MAX_REDIRECTS) throw new RegistryError(`${this.registry}: more than ${MAX_REDIRECTS} redirects for ${shortPath(path)}`);
        const next = new URL(String(res.headers.location), url);
        // Quay sends blobs to presigned CDN URLs; S3 rejects a second auth mechanism.
        if (next.origin !== new URL(url).origin) authorization = undefined;
        url = next.href;
        continue;
      }
      if (status === 401 && hop === 0 && !reauthenticated) {
        const header = res.headers['www-authenticate'];
        await res.body.dump();
        this.challenge = parseChallenge(Array.isArray(header) ? header[0] : header);
        authorization = await this.authorization(this.challenge, repository, scopes, true);
        reauthenticated = true;
        if (authorization === undefined) throw this.denied(repository, path, status);
        continue;
      }
      if (status >= 200 && status < 300) return { status, headers: res.headers, body: res.body, url };
      if (ro.accept?.includes(status)) return { status, headers: res.headers, body: res.body, url };
      const detail = await readErrorDetail(res.body);
      if (RETRYABLE_STATUS.has(status)) throw new RetryableStatus(status, parseRetryAfter(res.headers['retry-after']), detail);
      if (status === 401 || status === 403) throw this.denied(repository, path, status);
      throw new RegistryError(`${this.registry}: ${status} for ${shortPath(path)}${detail ? ` (${detail})` : ''}${attempt > 1 ? ` on attempt ${attempt}` : ''}`);
    }
  }

  private denied(repository: string, path: string, status: number): RegistryError {
    const cred = findCredential(this.opts.pullSecrets, this.registry, repository);
    const hint = cred ? 'the credentials found were refused; check the pull secret' : 'no credentials found; pass --registry-config with a pull secret for this registry';
    return new RegistryError(`${this.registry}: access denied (${status}) to ${repository} for ${shortPath(path)}: ${hint}`);
  }

  private async authorization(challenge: Challenge, repository: string, scopes: readonly string[], fresh: boolean): Promise<string | undefined> {
    const cred = findCredential(this.opts.pullSecrets, this.registry, repository);
    switch (challenge.scheme) {
      case 'none':
        return undefined;
      case 'basic':
        return cred?.username !== undefined ? basic(cred) : undefined;
      case 'bearer':
        return `Bearer ${await this.token(challenge, scopes, cred, fresh)}`;
    }
  }

  private async token(challenge: Extract<Challenge, { scheme: 'bearer' }>, scopes: readonly string[], cred: Credential | undefined, fresh: boolean): Promise<string> {
    const key = `${challenge.realm}|${challenge.service ?? ''}|${scopes.join(' ')}`;
    const cached = this.tokens.get(key);
    if (!fresh && cached && cached.expiresAt > Date.now()) return cached.token;
    const pending = this.pendingTokens.get(key);
    if (pending) return pending;
    const p = this.fetchToken(challenge, scopes, cred)
      .then((t) => {
        this.tokens.set(key, t);
        return t.token;
      })
      .finally(() => this.pendingTokens.delete(key));
    this.pendingTokens.set(key, p);
    return p;
  }

  private async fetchToken(challenge: Extract<Challenge, { scheme: 'bearer' }>, scopes: readonly string[], cred: Credential | undefined): Promise<CachedToken> {
    const scope = scopes.join(' ');
    this.opts.onEvent?.({ kind: 'token', realm: challenge.realm, scope });
    const url = new URL(challenge.realm);
    if (challenge.service) url.searchParams.set('service', challenge.service);
    for (const s of scopes) url.searchParams.append('scope', s);
    return this.withRetries(`token ${url.host}`, async () => {
      const init: Parameters<typeof request>[1] = { dispatcher: this.dispatcher, headers: { 'user-agent': 'prestage' } };
      if (cred?.identityToken) {
        // OAuth2 refresh-token grant, as docker does for identity tokens.
        const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: cred.identityToken, scope, client_id: 'prestage' });
        if (challenge.service) form.set('service', challenge.service);
        Object.assign(init, { method: 'POST', body: form.toString(), headers: { 'user-agent': 'prestage', 'content-type': 'application/x-www-form-urlencoded' } });
      } else if (cred?.username !== undefined) {
        init.headers = { 'user-agent': 'prestage', authorization: basic(cred) };
      }
      const res = await request(url.href, init);
      if (res.statusCode !== 200) {
        const detail = await readErrorDetail(res.body);
        if (RETRYABLE_STATUS.has(res.statusCode)) throw new RetryableStatus(res.statusCode, parseRetryAfter(res.headers['retry-after']), detail);
        throw new RegistryError(`${this.registry}: token service ${url.host} refused (${res.statusCode})${cred ? '; check the credentials in the pull secret' : '; pass --registry-config with a pull secret for this registry'}`);
      }
      const body = (await res.body.json()) as { token?: string; access_token?: string; expires_in?: number };
      const token = body.token ?? body.access_token;
      if (!token) throw new RegistryError(`${this.registry}: token service ${url.host} answered without a token`);
      const lifetime = Math.max(MIN_TOKEN_SECONDS, Number(body.expires_in) || MIN_TOKEN_SECONDS);
      // Renew a little early so a token does not expire in flight.
      return { token, expiresAt: Date.now() + (lifetime - 10) * 1000 };
    });
  }

  private async resolveScheme(): Promise<'https' | 'http'> {
    if (this.scheme) return this.scheme;
    if (this.opts.tlsVerify) return (this.scheme = 'https');
    try {
      const res = await request(`https://${this.host}/v2/`, { dispatcher: this.dispatcher, headers: { 'user-agent': 'prestage' } });
      await res.body.dump();
      this.scheme = 'https';
    } catch (err) {
      if (!isTlsHandshakeFailure(err)) throw err;
      this.scheme = 'http';
    }
    return this.scheme;
  }
}

class RetryableStatus extends Error {
  constructor(
    readonly status: number,
    readonly retryAfterMs: number | undefined,
    detail: string,
  ) {
    super(`HTTP ${status}${detail ? ` (${detail})` : ''}`);
  }
}

const TRANSIENT_CODES = new Set([
  'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH',
  'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT',
]);

/** Why an error is worth retrying, or undefined when it is not. */
export function transientReason(err: unknown): string | undefined {
  if (err instanceof RetryableStatus) return err.message;
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code && TRANSIENT_CODES.has(code)) return code === 'UND_ERR_BODY_TIMEOUT' ? 'stalled transfer' : `connection error ${code}`;
  }
  return undefined;
}

const TLS_TRUST_CODES = /^(UNABLE_TO_|SELF_SIGNED_CERT|DEPTH_ZERO_SELF_SIGNED|CERT_|ERR_TLS_CERT_ALTNAME_INVALID)/;

/** Any failure as a one-line RegistryError that says what to do; prestage's own errors pass through. */
export function asRegistryError(err: unknown, registry: string, what: string): PrestageError {
  if (err instanceof PrestageError) return err;
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    if (TLS_TRUST_CODES.test(code)) {
      return new RegistryError(`${registry}: TLS certificate not trusted (${code}) for ${what}; trusted are the OS store (${systemTrust().source}) and --ca-file: pass --ca-file with the registry's CA, or --tls-verify=false`, { cause: err });
    }
    if (isPlainHttpAnswer(e)) {
      return new RegistryError(`${registry}: answers plain HTTP, not HTTPS, for ${what}; if that registry has no TLS, pass --tls-verify=false (which allows plain HTTP)`, { cause: err });
    }
    const tunnel = /Proxy response \((\d+)\)/.exec(e.message);
    if (tunnel) {
      return new RegistryError(`${registry}: proxy ${routeOf(registry)} refused to connect to the registry (HTTP ${tunnel[1]}) for ${what}; check the proxy's access rules, or add ${apiHost(registry)} to NO_PROXY`, { cause: err });
    }
    if (code === 'ENOTFOUND') return new RegistryError(`${registry}: host not found for ${what}; check the registry name, DNS, or use --mirror`, { cause: err });
  }
  return new RegistryError(`${registry}: ${err instanceof Error ? err.message : String(err)} for ${what}`, { cause: err });
}

/** OpenSSL's reading of an HTTP answer as a TLS record. */
function isPlainHttpAnswer(e: Error): boolean {
  const code = (e as NodeJS.ErrnoException).code ?? '';
  return code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG' || (code === 'EPROTO' && /wrong version number|packet length too long/i.test(e.message));
}

/** How requests to a registry travel, for messages: the proxy (never its credentials) or direct. */
export function routeOf(registry: string): string {
  const proxy = proxyFor(new URL(`https://${apiHost(registry)}/`));
  return proxy ? redactProxy(proxy) : 'direct';
}

function isTlsHandshakeFailure(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    if (code === 'EPROTO' || code.startsWith('ERR_SSL') || code === 'ECONNRESET' || /wrong version number|packet length too long/i.test(e.message)) return true;
  }
  return false;
}

/** `Retry-After` as delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** `Bearer realm="https://auth",service="registry",scope="..."` and `Basic realm="..."`. */
export function parseChallenge(header: string | undefined): Challenge {
  if (!header) return { scheme: 'none' };
  const m = /^\s*(\w+)\s*(.*)$/.exec(header);
  if (!m) return { scheme: 'none' };
  const scheme = (m[1] ?? '').toLowerCase();
  const params: Record<string, string> = {};
  for (const p of (m[2] ?? '').matchAll(/(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))/g)) {
    params[(p[1] ?? '').toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : (p[3] ?? '');
  }
  if (scheme === 'basic') return { scheme: 'basic' };
  if (scheme === 'bearer' && params.realm) return { scheme: 'bearer', realm: params.realm, ...(params.service ? { service: params.service } : {}) };
  return { scheme: 'none' };
}

function basic(cred: Credential): string {
  return `Basic ${Buffer.from(`${cred.username ?? ''}:${cred.password ?? ''}`).toString('base64')}`;
}

/** The first error message of a registry error body, short; HTML bodies (throttling pages) are dropped. */
async function readErrorDetail(body: Dispatcher.ResponseData['body']): Promise<string> {
  let text = '';
  try {
    text = (await body.text()).slice(0, 2048);
  } catch {
    return '';
  }
  try {
    const doc = JSON.parse(text) as { errors?: Array<{ code?: string; message?: string }> };
    const e = doc.errors?.[0];
    if (e) return [e.code, e.message].filter(Boolean).join(': ');
  } catch {
    // not JSON
  }
  return '';
}

function shortPath(path: string): string {
  // Upload Locations are absolute and carry long state queries.
  return path.replace(/^https?:\/\/[^/]+\/v2\//, '').replace(/\?.*$/, '').replace(/(sha256:[a-f0-9]{12})[a-f0-9]{52}/g, '$1…');
}
