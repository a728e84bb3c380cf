/**
 * The terminal width of text that is all one-column characters, without the work `string-width`
 * does before its first answer (an ICU grapheme segmenter and Unicode emoji sets, tens of
 * milliseconds of a `--help`). The single executable's bundle puts this in front of every
 * `string-width` (scripts/dist.ts): yargs and cliui ask it the width of every help cell.
 */

/**
 * Printable ASCII and Latin-1 (no controls; not the soft hyphen, zero columns; nor © and ®, which
 * older string-width counts as emoji, two): each is its own grapheme and one column; the Latin-1
 * letters and signs East Asian Width calls ambiguous are narrow unless the caller asks otherwise.
 */
const ONE_COLUMN = /^[\x20-\x7e\xa0-\xa8\xaa-\xac\xaf-\xff]*$/;

/** The width, or undefined when the text needs string-width itself. */
export function narrowWidth(text: unknown, options?: { ambiguousIsNarrow?: boolean }): number | undefined {
  if (typeof text !== 'string' || !ONE_COLUMN.test(text)) return undefined;
  if (options?.ambiguousIsNarrow === false && /[^\x20-\x7e]/.test(text)) return undefined;
  return text.length;
}
