/**
 * `prestage preflight`'s text (pure): a row per node (with `wide`, one more per set under it),
 * the link and its ETA, what was assumed, then one line per NO-GO reason and the verdict last,
 * so a change board reads the answer where a terminal ends.
 */
import type { Preflight, PreflightNode } from '../api/preflight.js';
import { printable } from '../terminal-text.js';
import { formatBytes, formatRate, formatSeconds } from '../units.js';
import { count } from '../plural.js';
import { table } from './table.js';

export function renderPreflight(preflight: Preflight, wide = false): string {
  const rows: string[][] = [['NODE', 'ROLE', 'SETS', 'IMAGES', 'STORED', 'FETCH', 'WRITE', 'SPACE', 'VERDICT']];
  for (const node of preflight.nodes) {
    rows.push([node.node, node.role ?? '', String(node.sets.length), String(node.images), String(node.present), formatBytes(node.fetchBytes), formatBytes(node.writeBytes), space(node), node.verdict]);
    if (wide) for (const set of node.sets) rows.push([`  ${set.set}`, '', '', String(set.images), String(set.present), formatBytes(set.fetchBytes), formatBytes(set.writeBytes), '', set.refused ? 'NO-GO' : 'GO']);
  }
  const lines = [table(rows, new Set([2, 3, 4, 5, 6]))];
  const { totals } = preflight;
  const via = preflight.cache ? ` through ${preflight.cache.name} (each blob once)` : '';
  lines.push(`link: ${formatBytes(totals.linkBytes)} over the link${via}; the nodes fetch ${formatBytes(totals.fetchBytes)} and write ${formatBytes(totals.writeBytes)}`);
  const eta = preflight.eta;
  if (eta) {
    const window = eta.window ? `; window ${eta.window.opens} to ${eta.window.closes}: ${eta.window.fits ? 'fits' : 'does NOT fit'}` : '';
    lines.push(`eta: ${formatSeconds(eta.seconds)} at ${formatRate(eta.bytesPerSecond)} (${eta.rateFrom}${eta.pullSeconds ? `; ${formatSeconds(eta.pullSeconds)} of it pulls one by one` : ''}), done by ${eta.doneBy}${window}`);
  }
  for (const assumption of preflight.assumptions) lines.push(`assumed: ${printable(assumption)}`);
  for (const reason of preflight.reasons) lines.push(`NO-GO ${printable(reason)}`);
  lines.push(`${preflight.verdict}: ${count(preflight.nodes.length, 'node')}, ${count(preflight.sets.length, 'set')}${preflight.verdict === 'GO' ? `, every node has the room${eta?.window ? ' and staging fits the window' : ''}` : `, ${count(preflight.reasons.length, 'reason')}`}`);
  return `${lines.join('\n')}\n`;
}

function space(node: PreflightNode): string {
  const { rule, availableBytes, reserveBytes, neededBytes } = node.storage;
  if (rule === 'unknown' || availableBytes === undefined) return rule === 'unknown' ? 'not known' : `${rule}: ${formatBytes(neededBytes)}`;
  if (rule === 'agent') return `agent: ${formatBytes(neededBytes)} of ${formatBytes(availableBytes)} free (${formatBytes(reserveBytes ?? 0)} kept)`;
  if (rule === 'mco') return `mco: 2x ${formatBytes(neededBytes / 2)} of ${formatBytes(availableBytes)} allocatable - 16 GiB`;
  return `allocatable: ${formatBytes(neededBytes)} of ${formatBytes(availableBytes)}`;
}
