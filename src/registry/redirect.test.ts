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
  it('refuses non-http(s) schemes and link-local addresses, whatever the origin', () => {
    expect(() => followRedirect('http://reg.example/v2/', 'file:///etc/passwd', 1, 'reg.example')).toThrow(/^reg\.example: redirected to a file URL, not http\(s\); refusing it/);
    expect(() => followRedirect('https://reg.example/v2/', 'data:text/plain,x', 1, 'reg.example')).toThrow(/redirected to a data URL/);
    for (const to of ['http://169.254.169.254/latest/meta-data/', 'http://[fe80::1]/x', 'http://[::ffff:169.254.169.254]/x', 'http://[fd00:ec2::254]/x']) {
      expect(() => followRedirect('http://reg.example/v2/', to, 1, 'reg.example')).toThrow(/redirected to the link-local address .* refusing it/);
    }
    expect(followRedirect('http://reg.example/v2/', 'http://169.255.0.1/x', 1, 'w').url).toBe('http://169.255.0.1/x');
  });
});
