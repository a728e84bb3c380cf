/**
 * The CAs prestage trusts, as curl and Go programs (skopeo, oc) do: the OS trust store, not
 * the Mozilla roots compiled into Node, so a corporate CA installed with
 * `update-ca-certificates` or `update-ca-trust` is trusted. `SSL_CERT_FILE` replaces the
 * store; with no store found, Node's bundled roots.
 */
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { BadInputError } from '../errors.js';

/** Debian/Ubuntu/Alpine, then RHEL/Fedora, then the other common places. */
export const OS_TRUST_STORES = [
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/pki/tls/certs/ca-bundle.crt',
  '/etc/ssl/ca-bundle.pem',
  '/etc/ssl/cert.pem',
] as const;

export interface TrustedRoots {
  /** PEM certificates. */
  readonly certificates: readonly string[];
  /** Where they came from, for messages. */
  readonly source: string;
}

const cache = new Map<string, TrustedRoots>();

export function systemTrust(env: Readonly<Record<string, string | undefined>> = process.env): TrustedRoots {
  const override = env.SSL_CERT_FILE?.trim();
  const key = override ?? '';
  const cached = cache.get(key);
  if (cached) return cached;
  let roots: TrustedRoots | undefined;
  if (override) {
    roots = { certificates: [readBundle(override, 'SSL_CERT_FILE')], source: `SSL_CERT_FILE ${override}` };
  } else {
    for (const path of OS_TRUST_STORES) {
      let pem: string;
      try {
        pem = readFileSync(path, 'utf8');
      } catch {
        continue;
      }
      if (pem.includes('BEGIN CERTIFICATE')) {
        roots = { certificates: [pem], source: path };
        break;
      }
    }
  }
  roots ??= { certificates: rootCertificates, source: "Node's bundled roots" };
  cache.set(key, roots);
  return roots;
}

/** A PEM bundle named by the user (`--ca-file`, `SSL_CERT_FILE`); `label` names the setting in errors. */
export function readBundle(path: string, label: string): string {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (err) {
    throw new BadInputError(`cannot read ${label} ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  if (!pem.includes('BEGIN CERTIFICATE')) throw new BadInputError(`${label} ${path} holds no PEM certificate`);
  return pem;
}
