/**
 * HTTP transport to one registry, stacked as go-containerregistry's `remote/transport`:
 * scheme (scheme.ts, decided once) → auth (challenge.ts: every `WWW-Authenticate`; Basic, or
 * Bearer tokens from tokens.ts) → redirects (redirect.ts: no credentials across origins) →
 * retries (retry.ts, the one policy), under a per-registry bound on concurrent requests.
 */
import { Readable } from 'node:stream';
import { RegistryError } from '../errors.js';
import { createDispatcher, dispatchRequest, dumpBody, type Dispatcher, type DispatcherOptions, type RequestInit, type ResponseHeaders } from '../net/dispatcher.js';
import { READ_BOUNDS, readBounded, readPrefix } from '../net/read-bounded.js';
import { expectedResponseBytes, type LinkMeter, type MeteredRead } from '../net/link-meter.js';
import { redactUrl } from '../net/redact.js';
import { pickChallenge, type Challenge } from './challenge.js';
import { findCredential, type Credential, type PullSecret } from './credentials.js';
import { asRegistryError, exhaustedError, shortPath } from './failure.js';
import { apiHost } from './reference.js';
import { followRedirect, refuseOffTheWeb } from './redirect.js';
import { isRetryableStatus, parseRetryAfter, RetryableStatus, retrying, type RetryHooks, type RetryPolicy } from './retry.js';
import { isInsecureHost, isInsecureOrigin, RegistryScheme, type InsecureRegistries, type Scheme } from './scheme.js';
import { TokenCache, type IssuedToken } from './tokens.js';

export interface TransportOptions extends Omit<DispatcherOptions, 'insecureOrigin'> {
  /** Registries named insecure: probed for plain HTTP, certificates unchecked. */
  readonly insecureRegistries: InsecureRegistries;
  readonly pullSecrets: readonly PullSecret[];
  readonly retry: RetryPolicy;
  /** Concurrent requests per registry. */
  readonly concurrency: number;
  /** Reports retries and token fetches; never sees credentials. */
  readonly onEvent?: (event: TransportEvent) => void;
  /** Under a link cap: every request pays before it is sent, its body the rest as it arrives (`net/link-meter.ts`). */
  readonly linkMeter?: LinkMeter;
}

/** The dispatcher registry traffic goes through: certificates unchecked only for the registries named insecure. */
export function registryDispatcher(opts: TransportOptions): Dispatcher {
  return createDispatcher({ ...opts, insecureOrigin: (origin) => isInsecureOrigin(opts.insecureRegistries, origin) });
}

export type RetryEvent = Extract<TransportEvent, { kind: 'retry' }>;

export type TransportEvent =
  | { kind: 'retry'; registry: string; url: string; attempt: number; delayMs: number; reason: string }
  | { kind: 'token'; realm: string; scope: string };

export interface RegistryResponse {
  readonly status: number;
  readonly headers: ResponseHeaders;
  readonly body: Readable;
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
   * Send once, without retries: for a caller that retries a whole operation under its own
   * RetryBudget (a blob read that resumes, an upload session). Transient errors come back
   * unwrapped, so the caller's budget can classify them.
   */
  readonly once?: boolean;
  /** Statuses the caller handles itself (no retry, no error). */
  readonly accept?: readonly number[];
  readonly signal?: AbortSignal;
  /**
   * Under a link meter: what the body brings before its reader can pace it, paid before the
   * request is sent (a blob's first TCP window and buffers: `PREPAID_BYTES`, or the whole blob
   * when smaller); default by method and Range (`expectedResponseBytes`).
   */
  readonly expectedBytes?: number;
  /** The body's whole length where the caller knows it (a blob's declared size, less a resume's offset). */
  readonly bodyBytes?: number;
}

export class RegistryTransport {
  readonly registry: string;
  private readonly host: string;
  private readonly slots: Slots;
  private readonly scheme: RegistryScheme;
  private readonly insecure: boolean;
  private challenge: Challenge | undefined;
  private readonly tokens = new TokenCache();

  /** `closing`: aborted when the owner closes; retries waiting out a backoff stop at once. */
  constructor(registry: string, private readonly opts: TransportOptions, private readonly dispatcher: Dispatcher, private readonly closing?: AbortSignal) {
    this.registry = registry;
    this.host = apiHost(registry);
    this.slots = new Slots(opts.concurrency);
    this.insecure = isInsecureOrigin(opts.insecureRegistries, new URL(`https://${this.host}`).host);
    this.scheme = new RegistryScheme(this.host, this.insecure, (url) => this.probe(url), (attempt) => retrying(this.retryHooks('scheme probe', `${registry}/v2/`), attempt));
  }

  /** Under a meter that wants every byte paid before it is asked for: the longest Range a blob read may ask at once. */
  get partBytes(): number | undefined {
    return this.opts.linkMeter?.partBytes;
  }

  /** The retry policy's hooks for one operation on this registry: events, close, final errors. */
  retryHooks(what: string, url?: string): RetryHooks {
    // Messages are made only when needed: a request that succeeds at once pays for none.
    return {
      policy: this.opts.retry,
      signal: this.closing,
      onRetry: ({ retry, delayMs, reason }) => this.opts.onEvent?.({ kind: 'retry', registry: this.registry, url: url ?? `${this.registry}/v2/${shortPath(what)}`, attempt: retry, delayMs, reason }),
      exhausted: (reason, attempts, last) => exhaustedError(this.registry, reason, shortPath(what), attempts, last),
      fatal: (err) => asRegistryError(err, this.registry, shortPath(what)),
    };
  }

  /**
   * A request to `/v2/<path>` (or to an absolute URL the registry handed out, such as an
   * upload Location) in the scope of `repository`: authenticated, redirected, retried. The
   * concurrency slot is held until the body is consumed or destroyed. Any status outside 2xx
   * and `accept` becomes an error.
   */
  async request(repository: string, path: string, ro: RequestOptions = {}): Promise<RegistryResponse> {
    const metered = await this.opts.linkMeter?.open(ro.expectedBytes ?? expectedResponseBytes(ro.method ?? 'GET', ro.headers), ro.signal, ro.bodyBytes);
    const release = await this.slots.acquire().catch((err: unknown) => {
      metered?.close();
      throw err;
    });
    try {
      const sent = ro.once ? await this.send(repository, path, ro) : await retrying(this.retryHooks(path), () => this.send(repository, path, ro));
      const res = metered ? { ...sent, body: meteredBody(sent.body, metered, ro.signal) } : sent;
      let released = false;
      const done = (): void => {
        if (!released) {
          released = true;
          release();
          metered?.close();
        }
      };
      res.body.once('end', done);
      res.body.once('close', done);
      res.body.once('error', done);
      return res;
    } catch (err) {
      release();
      metered?.close();
      throw err;
    }
  }

  /** One send: scheme, credentials for the registry's own origin, one re-authentication on 401, redirects. */
  private async send(repository: string, path: string, ro: RequestOptions): Promise<RegistryResponse> {
    const scheme = await this.scheme.get();
    const origin = `${scheme}://${this.host}`;
    const absolute = /^https?:\/\//.test(path);
    let url = absolute ? path : `${origin}/v2/${path}`;
    const scopes = ro.scopes ?? [`repository:${repository}:pull`];
    let authorization = !absolute || new URL(url).origin === origin ? await this.authorization(this.challenge ?? { scheme: 'none' }, scheme, repository, scopes, false) : undefined;
    let reauthenticated = false;
    for (let hops = 0; ; ) {
      const body = ro.body?.();
      const res = await dispatchRequest(this.dispatcher, url, {
        method: ro.method ?? 'GET',
        headers: { 'user-agent': 'prestage', ...ro.headers, ...(authorization ? { authorization } : {}) },
        ...(body ? { body } : {}),
        ...(ro.signal ? { signal: ro.signal } : {}),
      }).finally(() => {
        // A body the server did not read (a 401, a redirect) must not keep its file open.
        if (body instanceof Readable && !body.readableEnded) body.destroy();
      });
      const { statusCode: status } = res;
      if (status >= 300 && status < 400 && res.headers.location) {
        await dumpBody(res.body);
        const hop = followRedirect(url, String(res.headers.location), ++hops, `${this.registry}: ${shortPath(path)}`);
        if (!hop.keepAuthorization) authorization = undefined;
        url = hop.url;
        continue;
      }
      if (status === 401 && hops === 0 && !reauthenticated) {
        await dumpBody(res.body);
        this.challenge = pickChallenge(res.headers['www-authenticate']);
        authorization = await this.authorization(this.challenge, scheme, repository, scopes, true);
        reauthenticated = true;
        if (authorization === undefined) throw this.denied(repository, path, status);
        continue;
      }
      if ((status >= 200 && status < 300) || ro.accept?.includes(status)) return { status, headers: res.headers, body: res.body, url };
      const detail = await readErrorDetail(res.body);
      if (isRetryableStatus(status)) throw new RetryableStatus(status, parseRetryAfter(res.headers['retry-after']), detail);
      if (status === 401 || status === 403) throw this.denied(repository, path, status);
      throw new RegistryError(`${this.registry}: ${status} for ${shortPath(path)}${detail ? ` (${detail})` : ''}`);
    }
  }

  /** Any HTTP answer settles the probe; errors say what the connection did. */
  private async probe(url: string): Promise<void> {
    const res = await dispatchRequest(this.dispatcher, url, { headers: { 'user-agent': 'prestage' } });
    await dumpBody(res.body);
  }

  private denied(repository: string, path: string, status: number): RegistryError {
    const cred = findCredential(this.opts.pullSecrets, this.registry, repository);
    const hint = cred ? 'the credentials found were refused; check the pull secret' : 'no credentials found; pass --registry-config with a pull secret for this registry';
    return new RegistryError(`${this.registry}: access denied (${status}) to ${repository} for ${shortPath(path)}: ${hint}`);
  }

  private async authorization(challenge: Challenge, scheme: Scheme, repository: string, scopes: readonly string[], fresh: boolean): Promise<string | undefined> {
    switch (challenge.scheme) {
      case 'none':
        return undefined;
      case 'basic': {
        // Plain HTTP happens only for registries named insecure, which is the user's consent.
        const cred = findCredential(this.opts.pullSecrets, this.registry, repository);
        return cred?.username !== undefined && (scheme === 'https' || this.insecure) ? basic(cred) : undefined;
      }
      case 'bearer': {
        const key = `${challenge.realm}|${challenge.service ?? ''}|${scopes.join(' ')}`;
        return `Bearer ${await this.tokens.get(key, () => this.fetchToken(challenge, scopes, findCredential(this.opts.pullSecrets, this.registry, repository)), fresh)}`;
      }
    }
  }

  private async fetchToken(challenge: Extract<Challenge, { scheme: 'bearer' }>, scopes: readonly string[], cred: Credential | undefined): Promise<IssuedToken> {
    const scope = scopes.join(' ');
    const url = realmUrl(this.registry, challenge.realm);
    this.opts.onEvent?.({ kind: 'token', realm: redactUrl(url), scope });
    // The realm is the registry's word, not the user's: credentials cross plain HTTP only to a
    // realm whose OWN host the user named insecure (a registry named insecure vouches for itself,
    // not for every host it points at).
    if (cred && url.protocol !== 'https:' && !isInsecureHost(this.opts.insecureRegistries, url.hostname)) {
      throw new RegistryError(`${this.registry}: its token service ${url.host} is plain HTTP; refusing to send the pull secret's credentials there: pass --insecure-registry ${url.hostname} if you trust that host`);
    }
    if (challenge.service) url.searchParams.set('service', challenge.service);
    for (const s of scopes) url.searchParams.append('scope', s);
    return retrying(this.retryHooks(`token ${url.host}`, url.origin), async () => {
      const init: { -readonly [K in keyof RequestInit]: RequestInit[K] } = { headers: { 'user-agent': 'prestage' } };
      if (cred?.identityToken) {
        // OAuth2 refresh-token grant, as docker does for identity tokens.
        const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: cred.identityToken, scope, client_id: 'prestage' });
        if (challenge.service) form.set('service', challenge.service);
        Object.assign(init, { method: 'POST', body: form.toString(), headers: { 'user-agent': 'prestage', 'content-type': 'application/x-www-form-urlencoded' } });
      } else if (cred?.username !== undefined) {
        init.headers = { 'user-agent': 'prestage', authorization: basic(cred) };
      }
      const res = await dispatchRequest(this.dispatcher, url.href, init);
      if (res.statusCode !== 200) {
        const detail = await readErrorDetail(res.body);
        if (isRetryableStatus(res.statusCode)) throw new RetryableStatus(res.statusCode, parseRetryAfter(res.headers['retry-after']), detail);
        throw new RegistryError(`${this.registry}: token service ${url.host} refused (${res.statusCode})${cred ? '; check the credentials in the pull secret' : '; pass --registry-config with a pull secret for this registry'}`);
      }
      const text = await readBounded(res.body, READ_BOUNDS.token, `${this.registry}: token service ${url.host}`);
      let body: { token?: unknown; access_token?: unknown; expires_in?: unknown };
      try {
        body = JSON.parse(text.toString('utf8')) as typeof body;
      } catch {
        throw new RegistryError(`${this.registry}: token service ${url.host} answered something that is not JSON`);
      }
      const token = typeof body?.token === 'string' ? body.token : typeof body?.access_token === 'string' ? body.access_token : undefined;
      if (!token) throw new RegistryError(`${this.registry}: token service ${url.host} answered without a token`);
      return { token, expiresIn: body.expires_in };
    });
  }
}

/** At most `size` holders at once; the others wait in order. */
class Slots {
  private free: number;
  private readonly waiting: Array<(release: () => void) => void> = [];

  constructor(size: number) {
    this.free = size;
  }

  acquire(): Promise<() => void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Releases once, however often it is called; a waiter takes the slot over. */
  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next(this.releaser());
      else this.free++;
    };
  }
}

function basic(cred: Credential): string {
  return `Basic ${Buffer.from(`${cred.username ?? ''}:${cred.password ?? ''}`).toString('base64')}`;
}

/**
 * A Bearer realm as a URL: http(s) only (a `file:` or `data:` realm is no token service), never
 * link-local (redirect.ts says why). Its
 * messages never show a `user:password@` the realm may carry.
 */
function realmUrl(registry: string, realm: string): URL {
  let url: URL;
  try {
    url = new URL(realm);
  } catch {
    throw new RegistryError(`${registry}: its token realm is not a URL; the registry's WWW-Authenticate header is broken`);
  }
  refuseOffTheWeb(url, `${registry}: its token realm is`);
  return url;
}

/**
 * The first error message of a registry error body, short; HTML bodies (throttling pages) are
 * dropped. Only a prefix is read (its connection is closed, not drained): an error body of
 * gigabytes costs nothing.
 */
async function readErrorDetail(body: Readable): Promise<string> {
  let text = '';
  try {
    text = (await readPrefix(body, READ_BOUNDS.errorPrefix)).toString('utf8');
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

/** The body, each chunk counted as it arrives and read on only once paid; destroying it (read or not) closes the response under it. */
function meteredBody(body: Readable, metered: MeteredRead, signal?: AbortSignal): Readable {
  async function* chunks(): AsyncGenerator<Buffer> {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      await metered.arrived(chunk.length, signal);
      yield chunk;
    }
  }
  const paced = Readable.from(chunks(), { objectMode: false });
  paced.once('close', () => {
    if (!body.readableEnded) body.destroy();
  });
  return paced;
}
