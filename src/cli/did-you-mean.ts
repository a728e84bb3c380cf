/** The nearest known word to a mistyped command or flag, as kubectl's "Did you mean this?". */

/** Edits (insert, delete, substitute, swap two neighbours) between two words. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The candidate closest to `word`, when close enough to be what was meant: a third of its
 * letters wrong at most (two for short words), or the start of exactly one candidate.
 */
export function didYouMean(word: string, candidates: readonly string[]): string | undefined {
  const allowed = Math.max(2, Math.floor(word.length / 3));
  let best: { readonly word: string; readonly distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(word, candidate);
    if (distance <= allowed && (!best || distance < best.distance)) best = { word: candidate, distance };
  }
  if (best) return best.word;
  const started = candidates.filter((c) => word.length >= 3 && c.startsWith(word));
  return started.length === 1 ? started[0] : undefined;
}
