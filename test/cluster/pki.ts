/**
 * The test cluster's PKI, made with the openssl CLI (Node cannot issue X.509 certificates):
 * one CA, the API server's serving certificate, the admin client certificate and the
 * ServiceAccount token signing key. EC P-256 keys: quick to generate, accepted everywhere.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const DAYS = '2';
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export interface KeyPair {
  readonly certPath: string;
  readonly keyPath: string;
}

export interface ClusterPki {
  readonly ca: KeyPair;
  readonly apiServer: KeyPair;
  /** CN=prestage-admin, O=system:masters: bypasses RBAC. */
  readonly admin: KeyPair;
  readonly serviceAccountKeyPath: string;
  readonly serviceAccountPublicKeyPath: string;
}

export async function createPki(dir: string): Promise<ClusterPki> {
  const ca = { certPath: join(dir, 'ca.crt'), keyPath: join(dir, 'ca.key') };
  await run('openssl', [
    'req', '-x509', ...EC_KEY, '-days', DAYS,
    '-keyout', ca.keyPath, '-out', ca.certPath,
    '-subj', '/CN=prestage-testbed-ca',
    '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  const issue = async (name: string, subject: string, extensions: string[]): Promise<KeyPair> => {
    const pair = { certPath: join(dir, `${name}.crt`), keyPath: join(dir, `${name}.key`) };
    await run('openssl', [
      'req', '-x509', ...EC_KEY, '-days', DAYS,
      '-CA', ca.certPath, '-CAkey', ca.keyPath,
      '-keyout', pair.keyPath, '-out', pair.certPath,
      '-subj', subject,
      '-addext', 'basicConstraints=critical,CA:FALSE',
      ...extensions.flatMap((extension) => ['-addext', extension]),
    ]);
    return pair;
  };
  const [apiServer, admin] = await Promise.all([
    issue('apiserver', '/CN=kube-apiserver', [
      // 10.0.0.1 is the `kubernetes` Service's ClusterIP in the 10.0.0.0/24 service range.
      'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc',
      'extendedKeyUsage=serverAuth',
    ]),
    issue('admin', '/O=system:masters/CN=prestage-admin', ['extendedKeyUsage=clientAuth']),
  ]);
  const serviceAccountKeyPath = join(dir, 'sa.key');
  const serviceAccountPublicKeyPath = join(dir, 'sa.pub');
  await run('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', serviceAccountKeyPath]);
  await run('openssl', ['pkey', '-in', serviceAccountKeyPath, '-pubout', '-out', serviceAccountPublicKeyPath]);
  return { ca, apiServer, admin, serviceAccountKeyPath, serviceAccountPublicKeyPath };
}
