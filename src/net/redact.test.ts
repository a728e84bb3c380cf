import { describe, expect, it } from 'vitest';
import { isLinkLocalHost } from './link-local.js';
import { hasUserinfo, redactUrl, redactUrls } from './redact.js';

describe('redactUrl', () => {
  it('hides user and password, leaves a URL without them as it is', () => {
    expect(redactUrl('https://user:s3cret@store.example/sigs/sha256=ab/signature-1')).toBe('https://***@store.example/sigs/sha256=ab/signature-1');
    expect(redactUrl(new URL('http://token-only@proxy:3128'))).toBe('http://***@proxy:3128/');
    expect(redactUrl('https://store.example/sigs')).toBe('https://store.example/sigs');
    expect(redactUrl('not a url://u:p@host')).not.toContain('u:p');
    expect(redactUrl('https://store.example.com/a@b')).toBe('https://store.example.com/a@b');
  });

  it('hides every URL\'s userinfo inside a message, and says which URLs carry one', () => {
    expect(redactUrls('cannot read http://u:p@h/s/signature-1 (via https://v:q@proxy/)')).toBe('cannot read http://***@h/s/signature-1 (via https://***@proxy/)');
    expect(hasUserinfo(' https://u:p@h/s ')).toBe(true);
    expect(hasUserinfo('https://h/s?x=a@b')).toBe(false);
  });
});

describe('link-local hosts', () => {
  it('are 169.254/16, fe80::/10 and the metadata addresses, literal or IPv4-mapped', () => {
    for (const host of ['169.254.169.254', '169.254.0.1', '[fe80::1]', 'fe80::abcd', '[fd00:ec2::254]', '[::ffff:169.254.169.254]', '::ffff:a9fe:a9fe']) expect(isLinkLocalHost(host)).toBe(true);
    for (const host of ['169.255.0.1', '10.0.0.1', '127.0.0.1', '[::1]', 'registry.example', 'fd00::1']) expect(isLinkLocalHost(host)).toBe(false);
  });
});
