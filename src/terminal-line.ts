/**
 * Progress lines on a terminal: redrawn in place only where that works (a terminal, not
 * TERM=dumb), and cut to its width (a line that wraps is redrawn as two, scrolling the screen).
 */

/** Whether `out` is a terminal that takes escape codes (`\r\x1b[K`): a TTY whose TERM is not `dumb`. */
export function isLiveTerminal(out: NodeJS.WritableStream, term: string | undefined = process.env.TERM): boolean {
  return (out as { isTTY?: boolean }).isTTY === true && term !== 'dumb';
}

/** A terminal's width in columns; undefined for a stream that is not one (a file, a pipe). */
export function columnsOf(out: NodeJS.WritableStream): number | undefined {
  return (out as { columns?: number }).columns;
}

/** `line` cut to `columns - 1` characters (the last column would wrap on some terminals), ending in `…` when cut. */
export function fitLine(line: string, columns: number | undefined): string {
  if (columns === undefined || columns < 2) return line;
  const chars = [...line];
  return chars.length < columns ? line : `${chars.slice(0, columns - 2).join('')}…`;
}
