import { describe, expect, it } from 'vitest';
import { hasUserinfo, redactUrl, redactUrls } from './redact-url.js';

describe('redactUrl', () => {
  it('hides user and password, keeps host, path and port', () => {
    expect(redactUrl('https://alice:s3cret@store.example.com:8443/sigs')).toBe('https://***@store.example.com:8443/sigs');
    expect(redactUrl('http://token@127.0.0.1/x')).toBe('http://***@127.0.0.1/x');
    expect(redactUrl('https://store.example.com/a@b')).toBe('https://store.example.com/a@b');
  });

  it('hides every URL\'s userinfo inside a message, and says which URLs carry one', () => {
    expect(redactUrls('cannot read http://u:p@h/s/signature-1 (via https://v:q@proxy/)')).toBe('cannot read http://***@h/s/signature-1 (via https://***@proxy/)');
    expect(hasUserinfo(' https://u:p@h/s ')).toBe(true);
    expect(hasUserinfo('https://h/s?x=a@b')).toBe(false);
  });
});
