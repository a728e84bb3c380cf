import { describe, expect, it } from 'vitest';
import stringWidth from 'string-width';
import { narrowWidth } from './narrow-width.js';

// cliui's and wrap-ansi's own copy (another major version than yargs').
const { default: cliuiWidth } = (await import(new URL('../../node_modules/cliui/node_modules/string-width/index.js', import.meta.url).href)) as { default: typeof stringWidth };

const every = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => String.fromCharCode(from + i));

describe('narrowWidth', () => {
  it.each([['string-width (yargs)', stringWidth], ['string-width (cliui)', cliuiWidth]])('answers as %s does for every character it answers', (_name, width) => {
    let answered = 0;
    for (const ch of every(0, 0x2ff)) {
      for (const options of [undefined, { ambiguousIsNarrow: false }]) {
        const mine = narrowWidth(ch, options);
        if (mine === undefined) continue;
        answered++;
        expect([ch.codePointAt(0), mine]).toEqual([ch.codePointAt(0), width(ch, options)]);
      }
    }
    // All of printable ASCII twice, and Latin-1 but the soft hyphen, © and ® once.
    expect(answered).toBe(95 * 2 + 93);
  });

  it('answers help text as string-width does, and leaves the rest to it', () => {
    const line = '  prestage status [sets..]           Show each node × set: generation, state and error (default: all';
    expect(narrowWidth(line)).toBe(stringWidth(line));
    expect(narrowWidth('')).toBe(0);
    expect(narrowWidth('\x1b[1mbold\x1b[22m')).toBeUndefined();
    expect(narrowWidth('tab\there')).toBeUndefined();
    expect(narrowWidth('soft\xadhyphen')).toBeUndefined();
    expect(narrowWidth('\xa9 2026')).toBeUndefined();
    expect(narrowWidth('日本')).toBeUndefined();
    expect(narrowWidth('e\u0301')).toBeUndefined();
    expect(narrowWidth(42)).toBeUndefined();
  });
});
