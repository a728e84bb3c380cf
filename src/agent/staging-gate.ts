/**
 * The agent's side of the sets' staging annotations (`api/staging.ts`), pure: whether an image
 * may start now (a set naming it neither paused nor outside its windows), which sets wait and
 * why (for the status), and the lowest link cap the sets carry.
 */
import type { PinnedImageSet } from '../api/prestage.js';
import { gateOf, linkRateOf, type Gate } from '../api/staging.js';

/** An image may start when a set naming it is neither paused nor outside its windows; else the first set's reason. */
export function gateFor(sets: () => readonly PinnedImageSet[]): (image: string) => Gate {
  return (image) => {
    const now = Date.now();
    const gates = sets()
      .filter((set) => set.spec.pinnedImages.some((entry) => entry.name === image))
      .map((set): Gate => {
        try {
          return gateOf(set.metadata.annotations, now);
        } catch (error) {
          // Its windows became unreadable mid-pass: nothing starts; the next pass reports the set failed.
          return { open: false, why: 'window', note: (error as Error).message };
        }
      });
    return gates.find((gate) => gate.open) ?? gates[0] ?? { open: true };
  };
}

/** Set → why its missing images wait: the images the pull executor holds back now (paused, outside a window). */
export function waitingSets(sets: readonly PinnedImageSet[], held: ReadonlyMap<string, { readonly note: string }>): Map<string, string> {
  const waiting = new Map<string, string>();
  if (held.size === 0) return waiting;
  for (const set of sets) {
    const entry = set.spec.pinnedImages.find((image) => held.has(image.name));
    if (entry) waiting.set(set.metadata.name, held.get(entry.name)!.note);
  }
  return waiting;
}

/** The lowest link cap the sets carry. */
export function rateOf(sets: readonly PinnedImageSet[]): { linkRate?: number } {
  const rates = sets.map((set) => linkRateOf(set.metadata.annotations)).filter((rate): rate is number => rate !== undefined);
  return rates.length ? { linkRate: Math.min(...rates) } : {};
}

export function capOf(rate: number | undefined): { capBytesPerSecond?: number } {
  return rate === undefined ? {} : { capBytesPerSecond: Math.round(rate) };
}

/** The sets that may not pull now (paused, outside every window): this pass sizes and charges nothing of theirs. */
export function shutNow(sets: readonly PinnedImageSet[], now = Date.now()): PinnedImageSet[] {
  return sets.filter((set) => {
    try {
      return !gateOf(set.metadata.annotations, now).open;
    } catch {
      return false;
    }
  });
}

/**
 * `gate`, with the `unsized` images (only shut sets wanted them when the pass began) held for
 * the whole pass even once their window opens: nothing sized or charged them. Their hold ends
 * "now", so the agent starts the next pass at once, and that one sizes and charges them.
 */
export function holdUnsized(gate: (image: string) => Gate, unsized: ReadonlySet<string>, now: () => number = Date.now): (image: string) => Gate {
  return (image) => {
    const state = gate(image);
    if (state.open && unsized.has(image)) return { open: false, why: 'window', opensAt: now(), note: 'the staging window opened: sizing its images first' };
    return state;
  };
}
