/** Human output of a plan: a summary of the sets, then per set its images by size. */
import type { Plan, PlannedImage, PlannedSet } from '../plan/types.js';
import { printable } from '../terminal-text.js';
import { formatBytes } from '../units.js';
import { count } from '../plural.js';

/** Columns padded to their widest cell; cells may hold outside text, so each is escaped first. */
export function table(cellsIn: readonly (readonly string[])[], rightAligned: ReadonlySet<number> = new Set()): string {
  const rows = cellsIn.map((r) => r.map(printable));
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows
    .map((r) => r.map((cell, c) => (rightAligned.has(c) ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!))).join('  ').trimEnd())
    .join('\n');
}

function estimateText(set: PlannedSet): string {
  return set.estimate.method === 'exact'
    ? `exact (${count(set.estimate.exactLayers, 'layer')})`
    : `${set.estimate.estimatedLayers} of ${count(set.estimate.exactLayers + set.estimate.estimatedLayers, 'layer')} estimated 2x`;
}

/** `wide`: every image of every set with the evidence for its role; else the 10 largest. */
export function renderPlanTable(plan: Plan, wide = false): string {
  const out: string[] = [];
  const r = plan.release;
  out.push(`Release ${r.version} (${r.multiArch ? `multi, planned for ${r.architecture}` : r.architecture})  ${r.pullSpec}`);
  out.push(`Channels: ${r.channels.join(', ') || 'unknown'}   Profile: ${plan.profile}   Platform: ${plan.cluster.platform ?? 'unknown'}`);
  out.push(`Feature set: ${plan.cluster.featureSet}${plan.cluster.featureGates ? ` (${plan.cluster.featureGates.enabled.length} gates enabled, from ${plan.cluster.featureGates.from})` : ''}   Capabilities: ${plan.cluster.capabilities.length}`);
  const os = plan.cluster.osStreams;
  if (os) out.push(osStreamsLine(os));
  const seen = plan.cluster.observed;
  if (seen) out.push(`Live cluster: ${seen.server} runs ${seen.version} on ${seen.nodes['control-plane']} control-plane nodes and ${seen.nodes.worker} workers; ${seen.pods} pods, ${seen.releasePods} of them on release images`);
  const roles = { cp: plan.images.filter((i) => i.role === 'control-plane').length, all: plan.images.filter((i) => i.role === 'all').length };
  const skipped = plan.skipped.length > 0 ? `; ${plan.skipped.length} skipped, in no set (-o wide lists why)` : '';
  out.push(`Images: ${plan.images.length} (${roles.cp} control-plane only, ${roles.all} all nodes${plan.images.length - roles.cp - roles.all ? `, ${plan.images.length - roles.cp - roles.all} workers only` : ''})${skipped}`);
  out.push('');
  out.push(table(
    [['SET', 'ROLE', 'IMAGES', 'COMPRESSED', 'ON DISK', 'SIZES'], ...plan.sets.map((s) => [s.name, s.role, String(s.images.length), formatBytes(s.compressedBytes), formatBytes(s.diskBytes), estimateText(s)])],
    new Set([2, 3, 4]),
  ));
  if (plan.perNode) out.push('', ...perNodeLines(plan));
  if (plan.operators) out.push('', ...operatorLines(plan, wide));
  if (plan.nodes && plan.nodes.length > 0) out.push('', ...nodeBytesLines(plan));
  const byPullSpec = new Map(plan.images.map((i) => [i.pullSpec, i]));
  for (const set of plan.sets) {
    const images = set.images.map((p) => byPullSpec.get(p)!).sort((a, b) => b.diskBytes - a.diskBytes || a.name.localeCompare(b.name));
    const shown = wide ? images : images.slice(0, 10);
    out.push('');
    out.push(`${set.name}: ${wide ? 'all images' : `largest ${shown.length} of ${images.length} images (-o wide lists all)`}`);
    out.push(table([['IMAGE', 'ROLE', 'COMPRESSED', 'ON DISK', 'METHOD', ...(wide ? ['EVIDENCE'] : [])], ...shown.map((i) => imageRow(i, wide))], new Set([2, 3])));
  }
  if (wide && plan.skipped.length > 0) {
    out.push('');
    out.push(`Skipped (${plan.skipped.length}): in no set`);
    out.push(table([['IMAGE', 'WHY'], ...plan.skipped.map((i) => [i.name, i.why])]));
  }
  if (plan.warnings.length > 0) {
    out.push('');
    out.push(`Warnings (${plan.warnings.length}):`);
    for (const w of plan.warnings) out.push(`  - ${w}`);
  }
  return `${out.join('\n')}\n`;
}

/** `OS streams: pinned rhel-9: the release's default (...); rhel-10 left out: 3 images, 1.2 GiB on disk per node saved (--os-stream rhel-10 adds it)` */
function osStreamsLine(os: NonNullable<Plan['cluster']['osStreams']>): string {
  const pinned = os.pinned.length > 0 ? `pinned ${os.why}` : `none pinned: ${os.why}`;
  const left = os.skipped.map((s) => `${s.stream} left out: ${s.images.length} image${s.images.length === 1 ? '' : 's'}, ${formatBytes(s.diskBytes)} on disk per node saved`);
  return `OS streams: ${[pinned, ...left].join('; ')}`;
}

/** Every set of a role together on one node: a layer the release and an operator share counts once. */
function perNodeLines(plan: Plan): string[] {
  return [
    'Per node, all sets of its role (layers shared between sets counted once):',
    table([['ROLE', 'SETS', 'IMAGES', 'COMPRESSED', 'ON DISK'], ...plan.perNode!.map((t) => [t.role, String(t.sets.length), String(t.images), formatBytes(t.compressedBytes), formatBytes(t.diskBytes)])], new Set([1, 2, 3, 4])),
  ];
}

/** The operators staged: catalogs, and each bundle with why (all of them with -o wide). */
function operatorLines(plan: Plan, wide: boolean): string[] {
  const ops = plan.operators!;
  const packages = new Set(ops.bundles.map((b) => b.package));
  const lines = [`Operators: ${count(packages.size, 'package')}, ${count(ops.bundles.length, 'bundle')} from ${count(ops.catalogs.length, 'catalog')} (${ops.catalogs.map((c) => c.reference).join(', ')})`];
  const shown = wide ? ops.bundles : ops.bundles.filter((b) => !b.why.startsWith('dependency')).slice(0, 20);
  const dependencies = ops.bundles.filter((b) => b.why.startsWith('dependency'));
  lines.push(table([['PACKAGE', 'BUNDLE', 'VERSION', 'WHY'], ...shown.map((b) => [b.package, b.name, b.version, b.why]), ...(wide ? [] : dependencies.map((b) => [b.package, b.name, b.version, b.why]))]));
  if (!wide && shown.length + dependencies.length < ops.bundles.length) lines.push(`(${ops.bundles.length - shown.length - dependencies.length} more bundles: -o wide lists all)`);
  return lines;
}

/** New bytes per node: what stage will download and store, against what each node runs now. */
function nodeBytesLines(plan: Plan): string[] {
  const observed = plan.cluster.observed;
  const names = (nodes: readonly string[]) => (nodes.length <= 3 ? nodes.join(', ') : `${nodes.slice(0, 2).join(', ')} and ${nodes.length - 2} more`);
  return [
    `New bytes per node (layers of the ${observed ? `${observed.version} ` : ''}images each node runs now${observed?.pinnedImages !== undefined ? ', and of the images prestage sets pin there,' : ''} are not new):`,
    table(
      [['NODES', 'ROLE', 'DOWNLOAD', 'NEW ON DISK', 'ALREADY HELD', 'SETS ON DISK'], ...plan.nodes!.map((n) => [names(n.nodes), n.role, formatBytes(n.newCompressedBytes), formatBytes(n.newDiskBytes), formatBytes(n.heldDiskBytes), formatBytes(n.diskBytes)])],
      new Set([2, 3, 4, 5]),
    ),
  ];
}

function imageRow(i: PlannedImage, wide: boolean): string[] {
  return [i.name, i.role, formatBytes(i.compressedBytes), formatBytes(i.diskBytes), i.sizeMethod, ...(wide ? [i.evidence.join('; ')] : [])];
}
