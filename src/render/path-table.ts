/** Human output of an upgrade path: the hops, each hop's sets, and what a node holds for them all. */
import type { PathPlan } from '../plan/path-plan.js';
import { plural } from '../plural.js';
import { formatBytes } from '../units.js';
import { renderPlanTable, table } from './table.js';

/** `wide`: why each edge was taken, the edges refused, and each hop's full plan table. */
export function renderPathTable(path: PathPlan, wide = false): string {
  const out: string[] = [];
  const chain = [path.from, ...path.hops.map((hop) => hop.to)].join(' -> ');
  out.push(`Upgrade path ${chain}: ${path.hops.length} ${plural(path.hops.length, 'hop', 'hops')}${path.controlPlaneOnly ? ', Control Plane Only (worker pools paused until the last hop)' : ''}`);
  out.push(`Graph: ${path.channel ? `channel ${path.channel} of ` : ''}${path.graph}${path.equallyShort > 1 ? `   ${path.equallyShort} equally short paths: the one through the newest releases` : ''}`);
  out.push('');
  out.push(table(
    [
      ['HOP', 'FROM', 'TO', 'EDGE', 'SETS', 'COMPRESSED', 'ON DISK', ...(wide ? ['WHY'] : [])],
      ...path.hops.map((hop, i) => {
        const worker = hop.plan.perNode?.find((t) => t.role === 'worker') ?? hop.plan.sets.find((s) => s.role === 'worker');
        const cp = hop.plan.perNode?.find((t) => t.role === 'control-plane') ?? hop.plan.sets.find((s) => s.role === 'control-plane');
        return [
          String(i + 1),
          hop.from,
          hop.to,
          `${hop.risks.length ? `conditional (${hop.risks.length} ${plural(hop.risks.length, 'risk', 'risks')})` : 'recommended'}${hop.workersPaused ? ', workers paused' : ''}`,
          String(hop.plan.sets.length),
          formatBytes(Math.max(cp?.compressedBytes ?? 0, worker?.compressedBytes ?? 0)),
          formatBytes(Math.max(cp?.diskBytes ?? 0, worker?.diskBytes ?? 0)),
          ...(wide ? [hop.why] : []),
        ];
      }),
    ],
    new Set([0, 4, 5, 6]),
  ));
  out.push('');
  out.push('Per node, every hop staged (a layer shared between hops once):');
  out.push(table(
    [
      ['ROLE', 'SETS', 'IMAGES', 'COMPRESSED', 'ON DISK', 'HOPS ALONE', ...path.hops.map((hop) => `+${hop.to}`)],
      ...path.union.perNode.map((total) => [
        total.role,
        String(total.sets.length),
        String(total.images),
        formatBytes(total.compressedBytes),
        formatBytes(total.diskBytes),
        formatBytes(total.hopsSummedCompressedBytes),
        ...total.perHop.map((hop) => formatBytes(hop.newCompressedBytes)),
      ]),
    ],
    new Set(Array.from({ length: 5 + path.hops.length }, (_, i) => i + 2)),
  ));
  out.push(`Every blob of the path once (through a cache or mirror): ${formatBytes(path.union.compressedBytes)}`);
  if (wide) {
    if (path.refused.length > 0) {
      out.push('');
      out.push('Edges refused from the releases on the path:');
      out.push(table([['FROM', 'TO', 'WHY'], ...path.refused.map((edge) => [edge.from, edge.to, edge.why])]));
    }
    for (const [i, hop] of path.hops.entries()) {
      out.push('');
      out.push(`Hop ${i + 1}: ${hop.from} -> ${hop.to}`);
      out.push(renderPlanTable(hop.plan, true).trimEnd());
    }
  }
  for (const warning of path.warnings) out.push(`warning: ${warning}`);
  return `${out.join('\n')}\n`;
}
