import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { afterAll, describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { OS_TRUST_STORES, systemTrust } from './trust.js';
import { removeTempDirs, tempDirSync } from '../../test/support/temp-files.js';

afterAll(removeTempDirs);

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

describe('systemTrust', () => {
  it('takes SSL_CERT_FILE over the OS store', () => {
    const file = join(tempDirSync('prestage-trust-'), 'bundle.pem');
    writeFileSync(file, PEM);
    expect(systemTrust({ SSL_CERT_FILE: file })).toEqual({ certificates: [PEM], source: `SSL_CERT_FILE ${file}` });
  });
  it('refuses an SSL_CERT_FILE that cannot be read or holds no certificate, as bad input', () => {
    expect(() => systemTrust({ SSL_CERT_FILE: '/nonexistent/bundle.pem' })).toThrow(BadInputError);
    const file = join(tempDirSync('prestage-trust-'), 'empty.pem');
    writeFileSync(file, 'not a certificate');
    expect(() => systemTrust({ SSL_CERT_FILE: file })).toThrow(/SSL_CERT_FILE .* holds no PEM certificate/);
  });
  it('reads the first OS store present, else Node\'s bundled roots', () => {
    const roots = systemTrust({});
    if (roots.source === "Node's bundled roots") expect(roots.certificates).toBe(rootCertificates);
    else expect(OS_TRUST_STORES).toContain(roots.source);
  });
});
