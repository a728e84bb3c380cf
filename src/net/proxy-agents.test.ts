import { describe, expect, it } from 'vitest';
import { proxyAuthorization } from './proxy-agents.js';

describe('proxy credentials', () => {
  it('sends the URL user and password as Basic, percent-decoded as curl reads them', () => {
    const header = proxyAuthorization(new URL('http://us%40er:p%3Ass%20word@proxy.example:3128'));
    expect(Buffer.from(header!.replace(/^Basic /, ''), 'base64').toString()).toBe('us@er:p:ss word');
  });
  it('sends none when the URL has no credentials', () => {
    expect(proxyAuthorization(new URL('http://proxy.example:3128'))).toBeUndefined();
  });
});
