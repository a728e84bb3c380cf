import { describe, expect, it } from 'vitest';
import { RegistryError } from '../errors.js';
import { retrying } from './retry.js';
import { isInsecureHost, isInsecureOrigin, RegistryScheme } from './scheme.js';

const failure = (code: string, message = code): Error => Object.assign(new Error(message), { code });
const retry3 = (attempt: () => Promise<'https' | 'http'>) => retrying({
  policy: { attempts: 3, baseDelayMs: 1, maxDelayMs: 1 },
  exhausted: (reason) => new RegistryError(`exhausted: ${reason}`),
  fatal: (err) => new RegistryError(`fatal: ${(err as Error).message}`),
}, attempt);

function scheme(host: string, insecure: boolean, answers: Array<Error | undefined>): { scheme: RegistryScheme; probed: string[] } {
  const probed: string[] = [];
  const probe = async (url: string): Promise<void> => {
    probed.push(url);
    const answer = answers.shift();
    if (answer) throw answer;
  };
  return { scheme: new RegistryScheme(host, insecure, probe, retry3), probed };
}

describe('registry scheme', () => {
  it('is HTTPS without a probe unless the registry was named insecure', async () => {
    const s = scheme('reg.example', false, []);
    expect(await s.scheme.get()).toBe('https');
    expect(s.probed).toEqual([]);
  });
  it('stays HTTPS when the probe of an insecure registry is reset, and retries the probe', async () => {
    const s = scheme('reg.example:5000', true, [failure('ECONNRESET'), undefined]);
    expect(await s.scheme.get()).toBe('https');
    expect(await s.scheme.get()).toBe('https');
    expect(s.probed).toEqual(['https://reg.example:5000/v2/', 'https://reg.example:5000/v2/']);
  });
  it('never falls to HTTP when resets go on: the decision fails and is made again later', async () => {
    const s = scheme('reg.example:5000', true, [failure('ECONNRESET'), failure('ECONNRESET'), failure('ECONNRESET'), undefined]);
    await expect(s.scheme.get()).rejects.toThrow('exhausted: connection error ECONNRESET');
    expect(await s.scheme.get()).toBe('https');
    expect(s.probed.every((url) => url.startsWith('https://'))).toBe(true);
  });
  it('speaks plain HTTP to an insecure registry whose answer is plain HTTP', async () => {
    const s = scheme('reg.example:5000', true, [failure('ERR_SSL_WRONG_VERSION_NUMBER', 'wrong version number')]);
    expect(await s.scheme.get()).toBe('http');
    expect(s.probed).toEqual(['https://reg.example:5000/v2/']);
  });
  it('tries port 80 when nothing listens on 443 of an insecure registry named without a port', async () => {
    const s = scheme('reg.example', true, [failure('ECONNREFUSED'), undefined]);
    expect(await s.scheme.get()).toBe('http');
    expect(s.probed).toEqual(['https://reg.example/v2/', 'http://reg.example/v2/']);
  });
  it('does not take a refused port it was given as a reason for plain HTTP', async () => {
    const s = scheme('reg.example:5000', true, [failure('ECONNREFUSED'), failure('ECONNREFUSED'), failure('ECONNREFUSED')]);
    await expect(s.scheme.get()).rejects.toThrow(/exhausted: connection error ECONNREFUSED/);
    expect(s.probed.every((url) => url.startsWith('https://'))).toBe(true);
  });
});

describe('insecure origins', () => {
  it('match the registry host and port, for either scheme, and docker.io by its API host', () => {
    expect(isInsecureOrigin(['reg.example:5000'], 'https://reg.example:5000')).toBe(true);
    expect(isInsecureOrigin(['reg.example:5000'], 'http://reg.example:5000/v2/')).toBe(true);
    expect(isInsecureOrigin(['reg.example:5000'], 'https://reg.example:5001')).toBe(false);
    expect(isInsecureOrigin(['reg.example:5000'], 'https://auth.example')).toBe(false);
    expect(isInsecureOrigin(['reg.example'], 'https://reg.example')).toBe(true);
    expect(isInsecureOrigin(['docker.io'], 'https://registry-1.docker.io')).toBe(true);
    expect(isInsecureOrigin('all', 'https://anything.example')).toBe(true);
    expect(isInsecureOrigin([], 'https://reg.example')).toBe(false);
  });
});

describe('isInsecureHost', () => {
  it('is the host of a registry named insecure on any port (its token service), never another host', () => {
    expect(isInsecureHost(['reg.example:5000'], 'reg.example')).toBe(true);
    expect(isInsecureHost(['127.0.0.1:5000'], '127.0.0.1')).toBe(true);
    expect(isInsecureHost(['127.0.0.1:5000'], '127.0.0.2')).toBe(false);
    expect(isInsecureHost(['reg.example'], 'auth.reg.example')).toBe(false);
    expect(isInsecureHost('all', 'anything.example')).toBe(true);
  });
});
