import { describe, expect, it } from 'vitest';
import { pullSecretOfSecret } from './kube.js';

const b64 = (text: string) => Buffer.from(text).toString('base64');
const SOURCE = 'pull secret prestage/regcred';

describe('pullSecretOfSecret', () => {
  it('reads a kubernetes.io/dockerconfigjson Secret', () => {
    const data = { '.dockerconfigjson': b64(JSON.stringify({ auths: { 'quay.io/team': { auth: b64('robot:s3:cret') } } })) };
    const secret = pullSecretOfSecret({ type: 'kubernetes.io/dockerconfigjson', data }, SOURCE);
    expect(secret).toEqual({ source: SOURCE, entries: new Map([['quay.io/team', { username: 'robot', password: 's3:cret' }]]) });
  });

  it('reads a legacy kubernetes.io/dockercfg Secret: the auths map alone', () => {
    const data = { '.dockercfg': b64(JSON.stringify({ 'registry.example:5000': { username: 'u', password: 'p' } })) };
    expect(pullSecretOfSecret({ type: 'kubernetes.io/dockercfg', data }, SOURCE).entries).toEqual(new Map([['registry.example:5000', { username: 'u', password: 'p' }]]));
  });

  it.each([
    [{ type: 'Opaque', data: { password: b64('hunter2') } }, `${SOURCE} is of type Opaque; want kubernetes.io/dockerconfigjson (kubectl create secret docker-registry)`],
    [{ type: 'kubernetes.io/dockerconfigjson', data: {} }, `${SOURCE} has no .dockerconfigjson key`],
    [{ type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': b64('{"auths": {"quay.io": {"auth": "hunter2') } }, `${SOURCE}: its .dockerconfigjson is not JSON`],
    [{ type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': b64('{"quay.io": {}}') } }, `${SOURCE} has no "auths" object; expected {"auths": {"<registry>": {"auth": "<base64 user:password>"}}}`],
    [{ type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': b64(JSON.stringify({ auths: { 'quay.io': { auth: b64('hunter2') } } })) } }, `${SOURCE}: the "auth" of "quay.io" is not base64 of user:password`],
  ])('says in one line what is wrong with %j, never its content', (secret, message) => {
    expect(() => pullSecretOfSecret(secret, SOURCE)).toThrow(message);
    try {
      pullSecretOfSecret(secret, SOURCE);
    } catch (error) {
      expect((error as Error).message).not.toContain('hunter2');
      expect((error as Error).message).not.toContain('\n');
    }
  });
});
