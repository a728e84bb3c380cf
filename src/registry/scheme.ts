/**
 * The scheme of one registry, decided once and never switched: HTTPS, always, unless the user
 * named the registry insecure (`--insecure-registry`). An insecure registry is probed over
 * HTTPS (certificates unchecked); it is spoken to in plain HTTP only when the answer proves the
 * server speaks plain HTTP (OpenSSL reads an HTTP reply as a bad TLS record) or, for a name
 * without a port, nothing listens on 443. A reset or a timeout during the probe is retried like
 * any transient failure, never taken as a reason to drop TLS.
 */
import { apiHost } from './reference.js';

/** Registries named insecure (`host[:port]`, as in image references), or every registry. */
export type InsecureRegistries = readonly string[] | 'all';

export type Scheme = 'https' | 'http';

/** Whether `origin` (a URL or URL host) belongs to a registry named insecure. */
export function isInsecureOrigin(insecure: InsecureRegistries, origin: string): boolean {
  if (insecure === 'all') return true;
  const host = /^https?:\/\//.test(origin) ? new URL(origin).host : origin;
  return insecure.some((registry) => new URL(`https://${apiHost(registry)}`).host === host || new URL(`http://${apiHost(registry)}`).host === host);
}

/**
 * Whether `hostname` is the host of a registry named insecure, on any port: the trust a user
 * gave `--insecure-registry HOST[:PORT]` extends to that machine's token service (often on a
 * port of its own), never to another host the registry names.
 */
export function isInsecureHost(insecure: InsecureRegistries, hostname: string): boolean {
  if (insecure === 'all') return true;
  return insecure.some((registry) => new URL(`http://${apiHost(registry)}`).hostname === hostname);
}

/** OpenSSL's reading of an HTTP answer as a TLS record. */
export function isPlainHttpAnswer(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG' || (code === 'EPROTO' && /wrong version number|packet length too long/i.test(e.message))) return true;
  }
  return false;
}

function isRefused(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) if ((e as NodeJS.ErrnoException).code === 'ECONNREFUSED') return true;
  return false;
}

/**
 * One registry's scheme. `probe` sends `GET <url>` and resolves on any HTTP answer; `retry`
 * runs it under the retry policy. A failed decision is not kept: the next request decides again.
 */
export class RegistryScheme {
  private decided: Promise<Scheme> | undefined;

  constructor(
    private readonly host: string,
    private readonly insecure: boolean,
    private readonly probe: (url: string) => Promise<void>,
    private readonly retry: (attempt: () => Promise<Scheme>) => Promise<Scheme>,
  ) {}

  get(): Promise<Scheme> {
    if (!this.insecure) return Promise.resolve('https');
    if (!this.decided) {
      this.decided = this.retry(() => this.decide());
      this.decided.catch(() => (this.decided = undefined));
    }
    return this.decided;
  }

  private async decide(): Promise<Scheme> {
    try {
      await this.probe(`https://${this.host}/v2/`);
      return 'https';
    } catch (err) {
      if (isPlainHttpAnswer(err)) return 'http';
      // `host` alone: HTTPS is port 443 and plain HTTP port 80, two different listeners.
      if (isRefused(err) && !/:\d+$/.test(this.host)) {
        await this.probe(`http://${this.host}/v2/`);
        return 'http';
      }
      throw err;
    }
  }
}
