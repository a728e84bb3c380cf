/** The node × set table of `status` (and `status -w`), one row per node and set as the cluster reports it. */
import type { ProgressSnapshot } from '../cluster/backend.js';
import { table } from '../render/table.js';
import { printable } from '../terminal-text.js';
import { formatBytes } from '../units.js';

/** The cells of each node × set row, in HEADER order. */
function cells(snapshot: ProgressSnapshot): string[][] {
  return snapshot.sets.flatMap((set) =>
    set.nodes.length
      ? set.nodes.map((n) => [
          n.node,
          set.name,
          `${n.currentGeneration}/${n.desiredGeneration}/${set.generation}`,
          n.phase,
          n.imagesTotal ? `${n.imagesDone ?? 0}/${n.imagesTotal}` : '',
          n.bytes ? `${formatBytes(n.pulledBytes ?? 0)}/${formatBytes(n.bytes)}` : '',
          n.error ?? '',
          n.note ?? n.unreported ?? '',
        ])
      : [['-', set.name, `-/-/${set.generation}`, set.exists ? 'no target nodes' : 'not found', '', '', '', '']],
  );
}

const HEADER = ['NODE', 'SET', 'GENERATION (CURRENT/DESIRED/SET)', 'STATE', 'IMAGES', 'BYTES', 'ERROR', 'NOTE'];

/** The columns a table of these rows shows: IMAGES and BYTES only where the backend reports them (the agent does, MCO does not); NOTE when any. */
function shownColumns(rows: readonly string[][]): number[] {
  // A backend that counts images counts bytes too, once it has sized them.
  return HEADER.map((_, c) => c < 4 || c === 6 || rows.some((r) => r[c] || (c === 5 && r[4]))).map((keep, c) => (keep ? c : -1)).filter((c) => c >= 0);
}

/** A table's column widths, for the lines `status -w` prints under it when a row changes. */
export interface StatusLayout {
  readonly shown: readonly number[];
  readonly widths: readonly number[];
}

export function statusLayout(snapshot: ProgressSnapshot): StatusLayout {
  const rows = [HEADER, ...cells(snapshot)].map((r) => r.map(printable));
  const shown = shownColumns(rows.slice(1));
  return { shown, widths: shown.map((c) => Math.max(...rows.map((r) => r[c]!.length))) };
}

/** Each row by `node set`, as one line in `layout`'s columns (cells it has no column for after them): what `status -w` prints when a row changes. */
export function statusRows(snapshot: ProgressSnapshot, layout: StatusLayout = statusLayout(snapshot)): Array<{ key: string; line: string }> {
  return cells(snapshot).map((raw) => {
    const row = raw.map(printable);
    const extra = row.filter((cell, c) => cell && !layout.shown.includes(c));
    const line = [...layout.shown.map((c, i) => row[c]!.padEnd(layout.widths[i]!)), ...extra].join('  ').trimEnd();
    return { key: `${row[0]} ${row[1]}`, line };
  });
}

export function renderStatusTable(snapshot: ProgressSnapshot): string {
  const rows = cells(snapshot);
  const shown = shownColumns(rows);
  // MCO's own per-pool count: nodes whose every set is current, as the MachineConfigPool says.
  const pools = (snapshot.pools ?? []).map((p) => `pool ${p.name}: ${p.updatedMachineCount}/${p.machineCount} nodes have every PinnedImageSet${p.degraded ? `; degraded: ${p.degraded}` : ''}\n`);
  return `${table([HEADER, ...rows].map((r) => shown.map((c) => r[c]!)))}\n${pools.length ? `\n${pools.join('')}` : ''}${cacheLines(snapshot)}`;
}

/** Which cache each node pulls from, one line a node, where a cache is wired (`install --cache`, its leaves). */
function cacheLines(snapshot: ProgressSnapshot): string {
  const lines = (snapshot.caches ?? []).map(({ node, leaf, locations }) => {
    const [first, ...rest] = locations.map(printable);
    const via = leaf !== undefined ? `leaf ${printable(leaf)} (${first ?? '?'})${rest.length ? `, then root ${rest.join(', then ')}` : ''}` : `root ${[first, ...rest].join(', then ')}`;
    return `node ${printable(node)} pulls through ${via}, then the source\n`;
  });
  return lines.length ? `\n${lines.join('')}` : '';
}
