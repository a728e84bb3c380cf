/**
 * `prestage prune [--dry-run=client|server]`: delete the prestage sets of releases the cluster no longer
 * needs. Pinned images are never garbage collected, so every staged release stays on every
 * node's disk until its sets go; once they do, the images are unpinned and the kubelet's image
 * GC may reclaim them.
 */
import type { Argv } from 'yargs';
import { BadInputError } from '../errors.js';
import type { PinningBackend } from '../cluster/backend.js';
import type { ClusterClient } from '../cluster/connect.js';
import { readClusterVersion } from '../cluster/live-cluster.js';
import { byVersion, bytesFreedPerNode, decidePrune, deleteReleaseSet, listReleaseSets, setsPathOf, type ReleaseSet } from '../cluster/release-lifecycle.js';
import { table } from '../render/table.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { formatBytes } from '../units.js';
import { dryRunClosing, dryRunSuffix, withDryRun, type DryRun } from './dry-run.js';
import { count } from '../plural.js';
import { renderDocument, renderNames, type DocumentFormat } from './documents.js';

/** `prune -o json|yaml`: one object (field names as in the describe text of -o). */
export interface PruneResult {
  /** The release ClusterVersion's newest history entry names (Completed), when it does. */
  readonly current?: string;
  /** Why nothing is pruned yet (the update is not Completed), when so. */
  readonly waiting?: string;
  readonly dryRun: DryRun;
  /** The sets deleted, or with a dry run that would be. */
  readonly prune: ReadonlyArray<{ readonly name: string; readonly release: string; readonly why: string; readonly diskBytes?: number; readonly nodes: readonly string[]; readonly result?: 'deleted' | 'gone' }>;
  readonly kept: ReadonlyArray<{ readonly name: string; readonly release?: string }>;
  /** Per node, the disk bytes the pruned sets took there (an upper bound: shared layers stay). */
  readonly freedBytesPerNode: Readonly<Record<string, number>>;
}

export type PruneOutput = 'text' | 'name' | DocumentFormat;

const PRUNE_OUTPUT_HELP = 'Output format: json, yaml: one object {current, waiting, dryRun, prune[] (name, release, why, diskBytes, nodes, result: deleted|gone), kept[] (name, release), freedBytesPerNode}; name: pinnedimageset/NAME per set deleted or that would be [default: the tables]';

/** The result in a machine format (text is printed as prune goes). */
export function renderPruneResult(output: Exclude<PruneOutput, 'text'>, result: PruneResult): string {
  return output === 'name' ? renderNames('pinnedimageset', result.prune.map((set) => set.name)) : renderDocument(output, result);
}

/** Lists the sets to prune with the bytes per node they hold, and deletes them unless `dryRun`. */
export async function runPrune(client: ClusterClient, backend: PinningBackend, stdout: NodeJS.WritableStream, dryRun: DryRun, force = false, output: PruneOutput = 'text'): Promise<void> {
  // In a machine format only the document is printed, once prune is done.
  const out = output === 'text' ? stdout : { write: () => true };
  const finish = (result: PruneResult) => void (output !== 'text' && stdout.write(renderPruneResult(output, result)));
  const setsPath = await setsPathOf(client, backend);
  const sets = await listReleaseSets(client, setsPath);
  // Operator sets go once their operator runs the newest bundle they hold; read only when there are some.
  const installed = sets.some((set) => set.operator) ? await (await import('../cluster/live-operators.js')).installedOperatorBundles(client) : new Map<string, string[]>();
  const decision = decidePrune(await readClusterVersion(client, 'prune'), sets, installed);
  if ('waiting' in decision) {
    out.write(`nothing to prune: ${decision.waiting}\n`);
    return finish({ waiting: decision.waiting, dryRun, prune: [], kept: [], freedBytesPerNode: {} });
  }
  const keptSets = decision.keep.map((set) => ({ name: set.name, ...(set.version ? { release: set.version } : {}) }));
  const kept = [...new Set(decision.keep.map((set) => set.version ?? 'no release'))].sort(byVersion).join(', ');
  if (!decision.prune.length) {
    out.write(`nothing to prune: the cluster runs ${decision.current}; no prestage set is of an older release${kept ? ` (kept: ${kept})` : ''}\n`);
    return finish({ current: decision.current, dryRun, prune: [], kept: keptSets, freedBytesPerNode: {} });
  }
  // A set a GitOps controller applied comes back when deleted by hand: the repository decides.
  const managed = decision.prune.find((set) => set.gitops);
  if (managed?.gitops && !force && dryRun === 'none') {
    throw new BadInputError(`prune would fight ${managed.gitops.controller}, which manages set ${managed.name}: ${managed.gitops.instead} (or pass --force to delete it anyway)`);
  }
  const snapshot = await backend.snapshot(decision.prune.map((set) => set.name));
  const nodesOf = new Map(snapshot.sets.map((set) => [set.name, set.nodes.map((n) => n.node)]));
  const movedOn = decision.prune.filter((set) => !decision.why.get(set.name)?.startsWith('release ')).length;
  out.write(`The cluster runs ${decision.current} (Completed); ${dryRun !== 'none' ? 'would delete' : 'deleting'} ${count(decision.prune.length, 'set')} of older releases${movedOn ? ` or of operators that moved on (${movedOn})` : ''}${kept ? `, keeping ${decision.keep.length} (${kept})` : ''}\n\n`);
  // WHY only when an operator's set is among them: else every set goes for its older release.
  const row = (set: ReleaseSet) => [set.name, set.version ?? '-', set.diskBytes ? formatBytes(set.diskBytes) : 'unknown', nodesOf.get(set.name)?.join(', ') || '-', ...(movedOn ? [decision.why.get(set.name)!] : [])];
  out.write(`${table([['SET', 'RELEASE', 'ON DISK', 'NODES', ...(movedOn ? ['WHY'] : [])], ...decision.prune.map(row)])}\n\n`);
  const freed = [...bytesFreedPerNode(decision.prune, snapshot)];
  if (freed.length) {
    out.write(`${table([['NODE', 'FREED (UP TO)'], ...freed.map(([node, bytes]) => [node, formatBytes(bytes)])])}\n\n`);
    out.write('Up to: layers shared with the sets kept stay; the rest is unpinned for the kubelet\'s image garbage collection to free.\n\n');
  }
  // client: the listing above is all; server: each DELETE sent with dryRun=All, so the API server checks it.
  const results = new Map<string, 'deleted' | 'gone'>();
  if (dryRun !== 'client') {
    for (const set of decision.prune) {
      const result = await deleteReleaseSet(client, setsPath, set, dryRun === 'server');
      results.set(set.name, result);
      out.write(`pinnedimageset/${set.name} ${result}${dryRunSuffix(dryRun)}\n`);
    }
  }
  out.write(dryRunClosing(dryRun));
  finish({
    current: decision.current,
    dryRun,
    prune: decision.prune.map((set) => ({ name: set.name, release: set.version ?? '', why: decision.why.get(set.name)!, ...(set.diskBytes ? { diskBytes: set.diskBytes } : {}), nodes: nodesOf.get(set.name) ?? [], ...(results.has(set.name) ? { result: results.get(set.name)! } : {}) })),
    kept: keptSets,
    freedBytesPerNode: Object.fromEntries(freed),
  });
}

export function pruneCommand(ctx: CommandContext, scriptName: string) {
  return typedCommand({
    builder: (y: Argv) =>
      withKubeOptions(withDryRun(y, 'delete the sets listed'))
        .option('force', { type: 'boolean', default: false, describe: 'Delete sets a GitOps controller (Argo CD, Flux) manages too; it may apply them again' })
        .option('output', { alias: 'o', choices: ['json', 'yaml', 'name'] as const, describe: PRUNE_OUTPUT_HELP }),
    handler: async (args) => {
      const { client, backend } = await clusterFrom(args as KubeFlags, scriptName);
      await runPrune(client, backend, ctx.stdout, args['dry-run'] as DryRun, args.force === true, args.output ?? 'text');
    },
  });
}
