/**
 * Where a redirect leads and whether credentials may follow: never to another origin (Quay
 * sends blobs to presigned CDN URLs, and S3 rejects a second auth mechanism), and never from
 * HTTPS down to plain HTTP.
 */
import { RegistryError } from '../errors.js';

export const MAX_REDIRECTS = 5;

export interface Hop {
  readonly url: string;
  /** Whether the `Authorization` of the previous request may be sent to `url`. */
  readonly keepAuthorization: boolean;
}

export function followRedirect(from: string, location: string, hops: number, what: string): Hop {
  if (hops > MAX_REDIRECTS) throw new RegistryError(`${what}: more than ${MAX_REDIRECTS} redirects`);
  const next = new URL(location, from);
  const prev = new URL(from);
  if (prev.protocol === 'https:' && next.protocol !== 'https:') {
    throw new RegistryError(`${what}: redirected from HTTPS to ${next.protocol.replace(':', '')} (${next.host}); refusing a downgrade`);
  }
  return { url: next.href, keepAuthorization: next.origin === prev.origin };
}
