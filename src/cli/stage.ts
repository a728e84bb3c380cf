/**
 * `prestage stage RELEASE|--to VERSION`: plan, show the sizes, check every target node has room,
 * apply, wait, and with --prune delete the sets of releases the cluster no longer needs. The disk check is prestage's own: each node's allocatable ephemeral-storage must
 * hold the uncompressed bytes of all sets it is about to get (MCO guesses 2x compressed).
 */
import type { Argv } from 'yargs';
import type { DesiredSet, PinningBackend } from '../cluster/backend.js';
import { desiredSetsFromPlan } from '../cluster/desired-sets.js';
import { LIVE_CLUSTER_HELP, liveClusterFrom } from '../cluster/live-cluster.js';
import { pinnedOnNodes } from '../cluster/release-lifecycle.js';
import type { KubeClient, KubeList, KubeObject } from '../kube/client.js';
import { ClusterError } from '../errors.js';
import type { Plan } from '../plan/types.js';
import { renderPlanTable } from '../render/table.js';
import { planRelease, renderApplyOutcomes, withReleasePlanOptions } from './apply.js';
import type { CommandContext } from './context.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { releaseToPlan, withLiveOptions, withToOptions } from './plan-options.js';
import { runPrune } from './prune.js';
import { runWait, withWaitOptions, type WaitFlags } from './wait.js';
import { checkCacheForPlan } from '../cluster/cache-check.js';
import { checkMcoPreflight } from '../cluster/mco/preflight.js';
import { OS_IMAGE_VIA_MCO_HELP, stageOsImage } from '../cluster/os-image-via-mco.js';
import { parseQuantity } from '../kube/quantity.js';
import { applyServerSide } from '../install/apply.js';
import { signatureConfigMapFrom, withSignaturesFromOptions } from './signature-options.js';
import { formatBytes } from '../units.js';
import { scheduleFrom, withStaging, withStagingOptions, type StagingFlags } from './staging-options.js';
import { AGENT_NAME } from '../api/names.js';

/**
 * Bytes each target node must hold, summed over the sets it gets; throws when one cannot. A node
 * the plan sized against what it runs now (`plan.nodes`, a live cluster) needs only its new
 * bytes, when the sets it gets are the ones the plan sized it for.
 */
export async function checkNodeDisks(client: KubeClient, backend: PinningBackend, sets: readonly DesiredSet[], planned: Plan['nodes'] = []): Promise<Map<string, number>> {
  const need = new Map<string, number>();
  const targeted = new Map<string, string[]>();
  for (const set of sets) {
    for (const node of await backend.targetNodes(set)) {
      need.set(node, (need.get(node) ?? 0) + (set.diskBytes ?? 0));
      targeted.set(node, [...(targeted.get(node) ?? []), set.name]);
    }
  }
  for (const entry of planned) {
    for (const node of entry.nodes) {
      if (sameSets(targeted.get(node) ?? [], entry.sets)) need.set(node, entry.newDiskBytes);
    }
  }
  const nodes = await client.get<KubeList<KubeObject & { status?: { allocatable?: Record<string, string> } }>>('/api/v1/nodes');
  const short = nodes.items.flatMap((node) => {
    const bytes = need.get(node.metadata.name);
    const allocatable = parseQuantity(node.status?.allocatable?.['ephemeral-storage'] ?? '');
    return bytes !== undefined && allocatable !== undefined && allocatable < bytes ? [`${node.metadata.name} (${formatBytes(allocatable)} allocatable < ${formatBytes(bytes)} needed)`] : [];
  });
  if (short.length) throw new ClusterError(`not enough ephemeral storage for the sets on ${short.length} node(s): ${short.join(', ')}`);
  return need;
}

function sameSets(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');
}

export function stageCommand(ctx: CommandContext, scriptName: string) {
  return {
    builder: (y: Argv) =>
      withStagingOptions(withSignaturesFromOptions(withToOptions(withLiveOptions(withKubeOptions(withWaitOptions(withReleasePlanOptions(y.positional('release', { type: 'string', describe: 'Release pullspec (or --to VERSION)' })))), 'on; a cluster without ClusterVersion is planned from the release alone'))
        ))
        .option('prune', { type: 'boolean', default: false, describe: 'Once every set is ready, delete the prestage sets of releases older than the one the cluster runs (as prune does)' })
        .option('force', { type: 'boolean', default: false, describe: 'Apply even when MCO\'s own disk check would refuse a set (it is checked first on the MCO backend)' })
        .option('os-image-via-mco', { type: 'boolean', default: false, describe: OS_IMAGE_VIA_MCO_HELP })
        .option('cache', { type: 'boolean', default: false, describe: 'Through the in-cluster cache (install --cache): check it is there, wired to the nodes and large enough for the plan before applying; wait shows its figures either way' })
        .epilogue(LIVE_CLUSTER_HELP),
    handler: async (args: any) => {
      // Read before any registry or cluster work: bad windows are refused first.
      const schedule = scheduleFrom(args as StagingFlags);
      const cluster = await clusterFrom(args as KubeFlags, scriptName);
      const { client, backend } = cluster;
      const release = await releaseToPlan(args, (line) => ctx.log.warn(line));
      const observed = args.cluster === false ? undefined : await liveClusterFrom(args as KubeFlags, args.cluster === true, (line) => ctx.log.warn(line));
      // What earlier stages pinned is on the nodes' disks too: not new bytes.
      const live = observed && { ...observed, pinned: await pinnedOnNodes(client, backend) };
      const plan = await planRelease(release, args, ctx, live);
      const sets = withStaging(desiredSetsFromPlan(plan), schedule, args['link-rate'], backend.kind, (line) => ctx.log.warn(line));
      // Progress goes to stdout; with -o json only the events do, so the table goes to stderr.
      (args.output === 'json' ? ctx.stderr : ctx.stdout).write(renderPlanTable(plan));
      if (args.cache) {
        const { lines, warnings } = await checkCacheForPlan(client, args['cache-namespace'], plan, AGENT_NAME);
        for (const warning of warnings) ctx.log.warn(warning);
        (args.output === 'json' ? ctx.stderr : ctx.stdout).write(lines.map((line) => `${line}\n`).join(''));
      }
      await checkNodeDisks(client, backend, sets, plan.nodes);
      await checkMcoPreflight(client, backend, sets, { version: observed?.release.version, force: args.force === true, warn: (line) => ctx.log.warn(line) });
      // The release's signatures for the CVO (a mirror's cluster), verified with the keys it trusts now.
      const signed = await signatureConfigMapFrom(plan.release, args, async () => client);
      if (signed) {
        await applyServerSide(client, [signed.configMap]);
        (args.output === 'json' ? ctx.stderr : ctx.stdout).write(`${signed.line}; applied ConfigMap ${signed.configMap.metadata.namespace}/${signed.configMap.metadata.name}\n`);
      }
      const osImage = await stageOsImage(client, backend, plan, { viaMco: args['os-image-via-mco'] === true, dryRun: false, warn: (line) => ctx.log.warn(line) });
      const applied = renderApplyOutcomes([...(await backend.apply(sets, { dryRun: false })), ...osImage], false);
      (args.output === 'json' ? ctx.stderr : ctx.stdout).write(applied);
      await runWait(backend, sets.map((s) => s.name), args as WaitFlags, ctx, cluster);
      if (args.prune) await runPrune(client, backend, args.output === 'json' ? ctx.stderr : ctx.stdout, 'none');
    },
  };
}
