import { describe, expect, it } from 'vitest';
import { parseChallenge, parseRetryAfter } from './transport.js';

describe('auth challenges', () => {
  it('parses a Bearer challenge with quoted params containing commas', () => {
    expect(parseChallenge('Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push"')).toEqual({
      scheme: 'bearer',
      realm: 'https://auth.example.com/token',
      service: 'registry.example.com',
    });
  });
  it('parses Basic and treats a missing header as no auth', () => {
    expect(parseChallenge('Basic realm="Registry Realm"')).toEqual({ scheme: 'basic' });
    expect(parseChallenge(undefined)).toEqual({ scheme: 'none' });
  });
});

describe('Retry-After', () => {
  it('reads delta-seconds and HTTP dates', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });
});
