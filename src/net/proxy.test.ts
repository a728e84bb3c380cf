import { describe, expect, it } from 'vitest';
import { proxyFor } from './proxy.js';
import { redactUrl } from './redact.js';

const route = (url: string, env: Record<string, string>) => proxyFor(new URL(url), env)?.href;

describe('proxyFor reads the proxy environment as curl does', () => {
  it('picks the variable by scheme, lower case first, all_proxy last', () => {
    expect(route('https://quay.io/v2/', { HTTPS_PROXY: 'http://up:3128', https_proxy: 'http://low:3128' })).toBe('http://low:3128/');
    expect(route('http://mirror:5000/v2/', { HTTPS_PROXY: 'http://s:1', HTTP_PROXY: 'http://p:2' })).toBe('http://p:2/');
    expect(route('https://quay.io/', { ALL_PROXY: 'socks5://s:1080' })).toBe('socks5://s:1080');
    expect(route('https://quay.io/', {})).toBeUndefined();
  });
  it('reads a proxy without a scheme as http://', () => {
    expect(route('https://quay.io/', { HTTPS_PROXY: 'proxy.corp:8080' })).toBe('http://proxy.corp:8080/');
  });
  it('bypasses NO_PROXY names, their subdomains, ports, IPs and CIDR ranges', () => {
    const env = { HTTPS_PROXY: 'http://p:1', NO_PROXY: 'corp.example, .internal,*.lab, mirror:5000, 10.0.0.0/8, 192.168.1.7, [fd00::1]' };
    for (const direct of ['https://corp.example/', 'https://registry.corp.example/', 'https://a.internal/', 'https://x.lab/', 'https://mirror:5000/', 'https://10.1.2.3/', 'https://192.168.1.7:443/', 'https://[fd00::1]/']) {
      expect(route(direct, env), direct).toBeUndefined();
    }
    for (const proxied of ['https://quay.io/', 'https://notcorp.example/', 'https://mirror/', 'https://mirror:5001/', 'https://11.0.0.1/', 'https://192.168.1.8/']) {
      expect(route(proxied, env), proxied).toBe('http://p:1/');
    }
    expect(route('https://quay.io/', { HTTPS_PROXY: 'http://p:1', no_proxy: '*' })).toBeUndefined();
  });
  it('never shows proxy credentials', () => {
    expect(redactUrl(new URL('http://user:s3cret@proxy:3128'))).toBe('http://***@proxy:3128/');
  });
});
