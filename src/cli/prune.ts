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
import { byVersion, bytesFreedPerNode, decidePrune, deleteReleaseSet, listReleaseSets, setsPathOf } from '../cluster/release-lifecycle.js';
import { table } from '../render/table.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { formatBytes } from '../units.js';
import { dryRunClosing, dryRunSuffix, withDryRun, type DryRun } from './dry-run.js';
import { count } from '../plural.js';

/** Lists the sets to prune with the bytes per node they hold, and deletes them unless `dryRun`. */
export async function runPrune(client: ClusterClient, backend: PinningBackend, out: NodeJS.WritableStream, dryRun: DryRun, force = false): Promise<void> {
  const setsPath = await setsPathOf(client, backend);
  const decision = decidePrune(await readClusterVersion(client, 'prune'), await listReleaseSets(client, setsPath));
  if ('waiting' in decision) {
    out.write(`nothing to prune: ${decision.waiting}\n`);
    return;
  }
  const kept = [...new Set(decision.keep.map((set) => set.version ?? 'no release'))].sort(byVersion).join(', ');
  if (!decision.prune.length) {
    out.write(`nothing to prune: the cluster runs ${decision.current}; no prestage set is of an older release${kept ? ` (kept: ${kept})` : ''}\n`);
    return;
  }
  // A set a GitOps controller applied comes back when deleted by hand: the repository decides.
  const managed = decision.prune.find((set) => set.gitops);
  if (managed?.gitops && !force && dryRun === 'none') {
    throw new BadInputError(`prune would fight ${managed.gitops.controller}, which manages set ${managed.name}: ${managed.gitops.instead} (or pass --force to delete it anyway)`);
  }
  const snapshot = await backend.snapshot(decision.prune.map((set) => set.name));
  const nodesOf = new Map(snapshot.sets.map((set) => [set.name, set.nodes.map((n) => n.node)]));
  out.write(`The cluster runs ${decision.current} (Completed); ${dryRun !== 'none' ? 'would delete' : 'deleting'} ${count(decision.prune.length, 'set')} of older releases${kept ? `, keeping ${decision.keep.length} (${kept})` : ''}\n\n`);
  out.write(`${table([['SET', 'RELEASE', 'ON DISK', 'NODES'], ...decision.prune.map((set) => [set.name, set.version!, set.diskBytes ? formatBytes(set.diskBytes) : 'unknown', nodesOf.get(set.name)?.join(', ') || '-'])])}\n\n`);
  const freed = [...bytesFreedPerNode(decision.prune, snapshot)];
  if (freed.length) {
    out.write(`${table([['NODE', 'FREED (UP TO)'], ...freed.map(([node, bytes]) => [node, formatBytes(bytes)])])}\n\n`);
    out.write('Up to: layers shared with the sets kept stay; the rest is unpinned for the kubelet\'s image garbage collection to free.\n\n');
  }
  // client: the listing above is all; server: each DELETE sent with dryRun=All, so the API server checks it.
  if (dryRun !== 'client') {
    for (const set of decision.prune) out.write(`pinnedimageset/${set.name} ${await deleteReleaseSet(client, setsPath, set, dryRun === 'server')}${dryRunSuffix(dryRun)}\n`);
  }
  out.write(dryRunClosing(dryRun));
}

export function pruneCommand(ctx: CommandContext, scriptName: string) {
  return typedCommand({
    builder: (y: Argv) => withKubeOptions(withDryRun(y, 'delete the sets listed')).option('force', { type: 'boolean', default: false, describe: 'Delete sets a GitOps controller (Argo CD, Flux) manages too; it may apply them again' }),
    handler: async (args) => {
      const { client, backend } = await clusterFrom(args as KubeFlags, scriptName);
      await runPrune(client, backend, ctx.stdout, args['dry-run'] as DryRun, args.force === true);
    },
  });
}
