/**
 * Text from outside (a registry's error body, a bundle's metadata, a node's status note, a
 * CRI-O error) reaches a terminal only with its control characters escaped: an escape sequence
 * in a hostile message could otherwise move the cursor, rewrite earlier lines (a forged
 * "verified"), retitle the window or, on some terminals, answer back. Bidirectional overrides
 * are escaped too, so what is shown reads in the order it is stored.
 */

// C0 controls, DEL, C1 controls (0x9b alone is CSI on 8-bit terminals), the bidi marks,
// embeddings, overrides and isolates.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeOne(c: string): string {
  const code = c.charCodeAt(0);
  return NAMED[c] ?? (code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`);
}

/** `text` as one printable line: every control character written as its escape (`\x1b`, `\n`, `\u202e`). */
export function printable(text: string): string {
  return text.replace(CONTROL, escapeOne);
}
