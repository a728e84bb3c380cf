import { describe, expect, it } from 'vitest';
import { pickChallenge } from './challenge.js';

describe('WWW-Authenticate challenges', () => {
  it('parses a Bearer challenge with quoted params containing commas', () => {
    expect(pickChallenge('Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push"')).toEqual({
      scheme: 'bearer',
      realm: 'https://auth.example.com/token',
      service: 'registry.example.com',
    });
  });
  it('parses Basic and treats a missing header as no auth', () => {
    expect(pickChallenge('Basic realm="Registry Realm"')).toEqual({ scheme: 'basic' });
    expect(pickChallenge(undefined)).toEqual({ scheme: 'none' });
  });
  it('reads every header: Negotiate first, Bearer second', () => {
    expect(pickChallenge(['Negotiate', 'Bearer realm="https://auth/token",service="reg"'])).toEqual({ scheme: 'bearer', realm: 'https://auth/token', service: 'reg' });
  });
  it('reads every challenge of one header, skipping a token68', () => {
    expect(pickChallenge('Negotiate YIIBhw==, Basic realm="r", Bearer realm="https://auth/t"')).toEqual({ scheme: 'bearer', realm: 'https://auth/t' });
    expect(pickChallenge('NTLM, Basic realm="a, b"')).toEqual({ scheme: 'basic' });
  });
  it('prefers Bearer over Basic in any order, and ignores a Bearer without realm', () => {
    expect(pickChallenge(['Basic realm="r"', 'Bearer realm="https://a/t"'])).toEqual({ scheme: 'bearer', realm: 'https://a/t' });
    expect(pickChallenge('Bearer service="x", Basic realm="r"')).toEqual({ scheme: 'basic' });
  });
  it('offers nothing prestage speaks: no auth', () => {
    expect(pickChallenge(['Negotiate', 'NTLM'])).toEqual({ scheme: 'none' });
  });
});
