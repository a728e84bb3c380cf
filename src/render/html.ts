/**
 * HTML built so that text from a cluster (node names, set names, CRI-O errors) cannot become
 * markup: the `html` template escapes every string it is given, and only markup made by `html`
 * itself goes in as it is. Control characters and bidi overrides are dropped (the set
 * terminal-text.ts escapes), so what is shown reads in the order it is stored.
 */

// C0 controls, DEL, C1 controls, the bidi marks, embeddings, overrides and isolates.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const ENTITIES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** `text` safe in an element and in a quoted attribute: a line break or tab as a space, other controls gone. */
export function escapeHtml(text: string): string {
  return text.replace(/[\t\n\r]+/g, ' ').replace(CONTROL, '').replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

export type HtmlPart = string | number | Markup | readonly Markup[];

/** Markup made by `html`, its only maker: a string is never one, so outside text cannot pass for it. */
export class Markup {
  private constructor(readonly text: string) {}

  /** A template of markup: its literal text kept, every interpolated string or number escaped. */
  static html(strings: TemplateStringsArray, ...parts: readonly HtmlPart[]): Markup {
    return new Markup(strings.reduce((out, literal, i) => out + piece(parts[i - 1]!) + literal));
  }
}

function piece(part: HtmlPart): string {
  if (part instanceof Markup) return part.text;
  if (Array.isArray(part)) return (part as readonly Markup[]).map((m) => m.text).join('');
  return escapeHtml(String(part));
}

export const html = Markup.html;
