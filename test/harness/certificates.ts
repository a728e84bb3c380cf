/**
 * Throwaway X.509 material made with the system openssl (node:crypto can make keys but not
 * certificates). EC P-256 keys: quick to generate, and distribution verifies ES256 tokens.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const OPENSSL = '/usr/bin/openssl';
const NEW_EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
const execFileAsync = promisify(execFile);

async function openssl(...args: string[]): Promise<void> {
  try {
    await execFileAsync(OPENSSL, args);
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`openssl ${args[0]} failed: ${stderr.trim() || String(error)}`);
  }
}

export interface ServerCertificate {
  /** The test CA that clients must trust. */
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
}

/** A test CA and a server certificate it signed for 127.0.0.1 (IP SAN) and localhost. */
export async function createServerCertificate(dir: string): Promise<ServerCertificate> {
  const caFile = join(dir, 'ca.crt');
  const caKeyFile = join(dir, 'ca.key');
  const certFile = join(dir, 'server.crt');
  const keyFile = join(dir, 'server.key');
  await openssl('req', '-x509', ...NEW_EC_KEY, '-keyout', caKeyFile, '-out', caFile, '-days', '2',
    '-subj', '/CN=prestage test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  await openssl('req', '-x509', ...NEW_EC_KEY, '-CA', caFile, '-CAkey', caKeyFile,
    '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-addext', 'basicConstraints=critical,CA:FALSE', '-addext', 'extendedKeyUsage=serverAuth');
  return { caFile, certFile, keyFile };
}

export interface SigningCertificate {
  readonly certFile: string;
  readonly keyFile: string;
}

/** A self-signed certificate for signing tokens; it is its own trust root. */
export async function createSigningCertificate(dir: string): Promise<SigningCertificate> {
  const certFile = join(dir, 'token-signing.crt');
  const keyFile = join(dir, 'token-signing.key');
  await openssl('req', '-x509', ...NEW_EC_KEY, '-keyout', keyFile, '-out', certFile, '-days', '2',
    '-subj', '/CN=prestage test token issuer');
  return { certFile, keyFile };
}
