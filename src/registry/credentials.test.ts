import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { defaultAuthFiles, findCredential, loadPullSecrets, parsePullSecret } from './credentials.js';
import { removeTempDirs, tempDirSync } from '../../test/support/temp-files.js';

afterAll(removeTempDirs);

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('pull secrets', () => {
  const secret = parsePullSecret(
    JSON.stringify({
      auths: {
        'quay.io': { auth: b64('host-user:host-pass') },
        'quay.io/openshift-release-dev': { auth: b64('ns-user:ns-pass') },
        'quay.io/openshift-release-dev/ocp-release': { username: 'repo-user', password: 'repo:pass' },
        'https://index.docker.io/v1/': { auth: b64('hub:pw') },
        'registry.example.com': { identitytoken: 'refresh-token' },
      },
    }),
    'test.json',
  );

  it('prefers the most specific key: repo over namespace over host', () => {
    expect(findCredential([secret], 'quay.io', 'openshift-release-dev/ocp-release')?.username).toBe('repo-user');
    expect(findCredential([secret], 'quay.io', 'openshift-release-dev/ocp-v4.0-art-dev')?.username).toBe('ns-user');
    expect(findCredential([secret], 'quay.io', 'other/app')?.username).toBe('host-user');
    expect(findCredential([secret], 'ghcr.io', 'x/y')).toBeUndefined();
  });

  it('keeps colons in passwords and reads identity tokens', () => {
    expect(findCredential([secret], 'quay.io', 'openshift-release-dev/ocp-release')?.password).toBe('repo:pass');
    expect(findCredential([secret], 'registry.example.com', 'a')).toEqual({ identityToken: 'refresh-token' });
  });

  it('maps Docker Hub URL keys to docker.io', () => {
    expect(findCredential([secret], 'docker.io', 'library/nginx')?.username).toBe('hub');
  });

  it('rejects files that are not pull secrets with a message naming the file', () => {
    expect(() => parsePullSecret('{', 'a.json')).toThrow(/a\.json is not valid JSON/);
    expect(() => parsePullSecret('{"x":1}', 'b.json')).toThrow(/b\.json has no "auths"/);
    expect(() => parsePullSecret(JSON.stringify({ auths: { 'q.io': { auth: b64('nocolon') } } }), 'c.json')).toThrow(BadInputError);
  });

  it('looks in REGISTRY_AUTH_FILE, XDG_RUNTIME_DIR and DOCKER_CONFIG in podman order', () => {
    expect(defaultAuthFiles({ REGISTRY_AUTH_FILE: '/a.json', XDG_RUNTIME_DIR: '/run/u', DOCKER_CONFIG: '/d' })).toEqual(['/a.json', '/run/u/containers/auth.json', '/d/config.json']);
  });

  it('skips missing default files but fails on a missing explicit one', () => {
    const dir = tempDirSync('prestage-cred-');
    const present = join(dir, 'auth.json');
    writeFileSync(present, JSON.stringify({ auths: { 'quay.io': { auth: b64('u:p') } } }));
    const secrets = loadPullSecrets(undefined, { REGISTRY_AUTH_FILE: join(dir, 'missing.json'), DOCKER_CONFIG: dir, XDG_RUNTIME_DIR: dir });
    expect(secrets.map((s) => s.source)).toEqual([]);
    const docker = loadPullSecrets(undefined, { REGISTRY_AUTH_FILE: present });
    expect(docker).toHaveLength(1);
    expect(() => loadPullSecrets(join(dir, 'nope.json'))).toThrow(/cannot read registry auth file .*nope\.json/);
  });
});
