import { describe, expect, it } from 'vitest';
import { followRedirect, MAX_REDIRECTS } from './redirect.js';

describe('redirect policy', () => {
  it('keeps Authorization within the origin only', () => {
    expect(followRedirect('https://reg.example/v2/a/blobs/x', '/v2/b/blobs/x', 1, 'w')).toEqual({ url: 'https://reg.example/v2/b/blobs/x', keepAuthorization: true });
    expect(followRedirect('https://reg.example/v2/a/blobs/x', 'https://cdn.example/x?sig=1', 1, 'w')).toEqual({ url: 'https://cdn.example/x?sig=1', keepAuthorization: false });
    expect(followRedirect('https://reg.example/v2/', 'https://reg.example:8443/v2/', 1, 'w').keepAuthorization).toBe(false);
  });
  it('refuses HTTPS to HTTP and too many hops', () => {
    expect(() => followRedirect('https://reg.example/v2/', 'http://reg.example/v2/', 1, 'reg.example')).toThrow(/refusing a downgrade/);
    expect(() => followRedirect('https://reg.example/v2/', '/v2/', MAX_REDIRECTS + 1, 'reg.example')).toThrow(/more than 5 redirects/);
    expect(followRedirect('http://reg.example/v2/', 'http://cdn.example/x', 1, 'w').keepAuthorization).toBe(false);
  });
});
