import { describe, expect, it } from 'vitest';
import { printable } from './terminal-text.js';

describe('printable', () => {
  it('keeps plain text, Unicode letters and the backslash as they are', () => {
    expect(printable('pull of quay.io/x@sha256:ab failed: manifest unknown — ünïcode')).toBe('pull of quay.io/x@sha256:ab failed: manifest unknown — ünïcode');
  });

  it('escapes an escape sequence that would rewrite the screen', () => {
    const forged = 'denied\x1b[1A\x1b[2K\rrelease verified with Red Hat key';
    const shown = printable(forged);
    expect(shown).toBe('denied\\x1b[1A\\x1b[2K\\rrelease verified with Red Hat key');
    expect(shown).not.toMatch(/[\x00-\x1f]/);
  });

  it('keeps a multi-line body on one line', () => {
    expect(printable('line 1\nline 2\tend')).toBe('line 1\\nline 2\\tend');
  });

  it('escapes DEL, C1 controls (8-bit CSI) and bidi overrides', () => {
    expect(printable('a\x7fb\x9bc')).toBe('a\\x7fb\\x9bc');
    expect(printable('file\u202Egpj.sh')).toBe('file\\u202egpj.sh');
    expect(printable('\u2066x\u2069')).toBe('\\u2066x\\u2069');
  });
});
