/** Failures as one line that says what to do; prestage's own errors pass through. */
import { PrestageError, RegistryError } from '../errors.js';
import { proxyFor } from '../net/proxy.js';
import { redactUrl } from '../net/redact.js';
import { systemTrust } from '../net/trust.js';
import { apiHost } from './reference.js';
import { isPlainHttpAnswer } from './scheme.js';
import { count } from '../plural.js';

const TLS_TRUST_CODES = /^(UNABLE_TO_|SELF_SIGNED_CERT|DEPTH_ZERO_SELF_SIGNED|CERT_|ERR_TLS_CERT_ALTNAME_INVALID)/;

export function asRegistryError(err: unknown, registry: string, what: string): PrestageError {
  if (err instanceof PrestageError) return err;
  const host = apiHost(registry);
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    if (TLS_TRUST_CODES.test(code)) {
      return new RegistryError(`${registry}: TLS certificate not trusted (${code}) for ${what}; trusted are the OS store (${systemTrust().source}) and --ca-file: pass --ca-file with the registry's CA, or --insecure-registry ${host} to skip the check for this registry`, { cause: err });
    }
    if (isPlainHttpAnswer(e)) {
      return new RegistryError(`${registry}: answers plain HTTP, not HTTPS, for ${what}; if that registry has no TLS, pass --insecure-registry ${host} (plain HTTP for that registry only)`, { cause: err });
    }
    const tunnel = /Proxy response \((\d+)\)/.exec(e.message);
    if (tunnel) {
      return new RegistryError(`${registry}: proxy ${routeOf(registry)} refused to connect to the registry (HTTP ${tunnel[1]}) for ${what}; check the proxy's access rules, or add ${host} to NO_PROXY`, { cause: err });
    }
    if (code === 'ENOTFOUND') return new RegistryError(`${registry}: host not found for ${what}; check the registry name, DNS, or use --mirror`, { cause: err });
  }
  return new RegistryError(`${registry}: ${err instanceof Error ? err.message : String(err)} for ${what}`, { cause: err });
}

/** Attempts spent on transient failures: says where the fault may be. */
export function exhaustedError(registry: string, reason: string, what: string, attempts: number, last: unknown): RegistryError {
  const through = routeOf(registry);
  const network = through === 'direct' ? 'the registry or network' : `the registry, the network or the proxy ${through}`;
  return new RegistryError(`${registry}: ${reason} for ${what} after ${count(attempts, 'attempt')}; ${network} is failing, retry later or raise --retries`, { cause: last });
}

/** How requests to a registry travel, for messages: the proxy (never its credentials) or direct. */
export function routeOf(registry: string): string {
  const proxy = proxyFor(new URL(`https://${apiHost(registry)}/`));
  return proxy ? redactUrl(proxy) : 'direct';
}

/** Registry paths for messages: no upload state queries, digests shortened. */
export function shortPath(path: string): string {
  return path.replace(/^https?:\/\/[^/]+\/v2\//, '').replace(/\?.*$/, '').replace(/(sha256:[a-f0-9]{12})[a-f0-9]{52}/g, '$1…');
}
