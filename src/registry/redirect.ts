/**
 * Where a redirect leads and whether credentials may follow: never to another origin (Quay
 * sends blobs to presigned CDN URLs, and S3 rejects a second auth mechanism), never from
 * HTTPS down to plain HTTP, never out of http(s) (`file:`, `data:`), and never to a link-local
 * address: a registry has no reason to send a client to a cloud metadata service
 * (169.254.169.254), so such a redirect is refused before any connection, not just stripped of
 * credentials (the answer of a metadata service could still leak through the next request).
 */
import { RegistryError } from '../errors.js';
import { isLinkLocalHost } from '../net/link-local.js';

export const MAX_REDIRECTS = 5;

export interface Hop {
  readonly url: string;
  /** Whether the `Authorization` of the previous request may be sent to `url`. */
  readonly keepAuthorization: boolean;
}

/**
 * A place a server points prestage at (a redirect, a token realm), refused unless it is http(s)
 * on an address that is not link-local; `pointed` starts the message (`reg: redirected to`).
 */
export function refuseOffTheWeb(url: URL, pointed: string): void {
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new RegistryError(`${pointed} a ${url.protocol.replace(':', '')} URL, not http(s); refusing it (a broken or hostile server)`);
  }
  if (isLinkLocalHost(url.hostname)) {
    throw new RegistryError(`${pointed} the link-local address ${url.hostname} (a cloud metadata service's range); refusing it (a broken or hostile server)`);
  }
}

export function followRedirect(from: string, location: string, hops: number, what: string): Hop {
  if (hops > MAX_REDIRECTS) throw new RegistryError(`${what}: more than ${MAX_REDIRECTS} redirects`);
  let next: URL;
  try {
    next = new URL(location, from);
  } catch {
    throw new RegistryError(`${what}: redirected to something that is not a URL; refusing it`);
  }
  const prev = new URL(from);
  refuseOffTheWeb(next, `${what}: redirected to`);
  if (prev.protocol === 'https:' && next.protocol !== 'https:') {
    throw new RegistryError(`${what}: redirected from HTTPS to ${next.protocol.replace(':', '')} (${next.host}); refusing a downgrade`);
  }
  return { url: next.href, keepAuthorization: next.origin === prev.origin };
}
