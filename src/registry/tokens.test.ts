import { describe, expect, it } from 'vitest';
import { TokenCache } from './tokens.js';

describe('token cache', () => {
  it('keeps a token claiming 5 s for 60 s less the early renewal, then fetches again', async () => {
    let now = 0;
    const cache = new TokenCache(() => now);
    let fetches = 0;
    const fetch = async () => ({ token: `t${++fetches}`, expiresIn: 5 });
    expect(await cache.get('k', fetch)).toBe('t1');
    now = 49_000;
    expect(await cache.get('k', fetch)).toBe('t1');
    now = 50_001;
    expect(await cache.get('k', fetch)).toBe('t2');
  });
  it('keeps a long-lived token for its lifetime and treats a missing or bogus expires_in as 60 s', async () => {
    let now = 0;
    const cache = new TokenCache(() => now);
    expect(await cache.get('long', async () => ({ token: 'a', expiresIn: 3600 }))).toBe('a');
    now = 3_500_000;
    expect(await cache.get('long', async () => ({ token: 'b' }))).toBe('a');
    expect(await cache.get('none', async () => ({ token: 'c', expiresIn: 'soon' }))).toBe('c');
    now += 51_000;
    expect(await cache.get('none', async () => ({ token: 'd' }))).toBe('d');
  });
  it('fetches once for concurrent callers, and again when asked fresh', async () => {
    const cache = new TokenCache();
    let fetches = 0;
    const fetch = async () => ({ token: `t${++fetches}`, expiresIn: 300 });
    expect(await Promise.all([cache.get('k', fetch), cache.get('k', fetch), cache.get('k', fetch)])).toEqual(['t1', 't1', 't1']);
    expect(await cache.get('k', fetch, true)).toBe('t2');
  });
  it('does not keep a failed fetch', async () => {
    const cache = new TokenCache();
    await expect(cache.get('k', async () => { throw new Error('refused'); })).rejects.toThrow('refused');
    expect(await cache.get('k', async () => ({ token: 'ok' }))).toBe('ok');
  });
});
