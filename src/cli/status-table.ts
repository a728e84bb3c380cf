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

/** Each row by `node set`, as one line (its non-empty cells): what `status -w` prints when a row changes. */
export function statusRows(snapshot: ProgressSnapshot): Array<{ key: string; line: string }> {
  return cells(snapshot).map((row) => ({ key: `${row[0]} ${row[1]}`, line: row.filter(Boolean).map(printable).join('  ') }));
}

export function renderStatusTable(snapshot: ProgressSnapshot): string {
  const rows = cells(snapshot);
  const header = HEADER;
  // IMAGES and BYTES only where the backend reports them (the agent does, MCO does not); NOTE when any.
  const shown = header.map((_, c) => c < 4 || c === 6 || rows.some((r) => r[c])).map((keep, c) => (keep ? c : -1)).filter((c) => c >= 0);
  // MCO's own per-pool count: nodes whose every set is current, as the MachineConfigPool says.
  const pools = (snapshot.pools ?? []).map((p) => `pool ${p.name}: ${p.updatedMachineCount}/${p.machineCount} nodes have every PinnedImageSet${p.degraded ? `; degraded: ${p.degraded}` : ''}\n`);
  return `${table([header, ...rows].map((r) => shown.map((c) => r[c]!)))}\n${pools.length ? `\n${pools.join('')}` : ''}`;
}
