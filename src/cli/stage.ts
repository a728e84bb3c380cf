/**
 * `prestage stage RELEASE|--to VERSION`: plan, show the sizes, check every target node has room,
 * apply, wait, and with --prune delete the sets of releases the cluster no longer needs. The disk check is prestage's own: each node's allocatable ephemeral-storage must
 * hold the uncompressed bytes of all sets it is about to get (MCO guesses 2x compressed).
 */
import type { Argv } from 'yargs';
import { desiredSetsFromPlan } from '../cluster/desired-sets.js';
import { liveClusterFrom } from '../cluster/live-cluster.js';
import { LIVE_CLUSTER_HELP } from '../cluster/live-cluster-help.js';
import { pinnedOnNodes } from '../cluster/release-lifecycle.js';
import { checkNodeDisks } from '../cluster/node-disks.js';
import { renderPlanTable } from '../render/table.js';
import { planRelease, renderApplyOutcomes, withReleasePlanOptions } from './apply.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { withLiveOptions, withToOptions } from './plan-options.js';
import { targetToPlan, withPathOptions, type PathFlags } from './path-options.js';
import { pathNodeBytes, planPath, type PathInput, type PathPlan } from '../plan/path-plan.js';
import { renderPathTable } from '../render/path-table.js';
import type { Plan } from '../plan/types.js';
import { BadInputError } from '../errors.js';
import { runPrune } from './prune.js';
import { runWait, withWaitOptions, type WaitFlags } from './wait.js';
import { checkCacheForPlan } from '../cluster/cache-check.js';
import { checkMcoPreflight } from '../cluster/mco/preflight.js';
import { OS_IMAGE_VIA_MCO_HELP, stageOsImage } from '../cluster/os-image-via-mco.js';
import { applyObject } from '../install/apply.js';
import { backendDryRun, dryRunClosing, withDryRunOption, type DryRun } from './dry-run.js';
import { signatureConfigMapFrom, withSignaturesFromOptions } from './signatures-from.js';
import { planReadsMeter, scheduleFrom, withStaging, withStagingOptions, type StagingFlags } from './staging-options.js';
import { AGENT_NAME } from '../api/names.js';

export function stageCommand(ctx: CommandContext, scriptName: string) {
  return typedCommand({
    builder: (y: Argv) =>
      withStagingOptions(withSignaturesFromOptions(withPathOptions(withToOptions(withLiveOptions(withKubeOptions(withWaitOptions(withReleasePlanOptions(y.positional('release', { type: 'string', describe: 'Release pullspec (or --to VERSION)' })))), 'on; a cluster without ClusterVersion is planned from the release alone')))
        ))
        .option('prune', { type: 'boolean', default: false, describe: 'Once every set is ready, delete the prestage sets of releases older than the one the cluster runs (as prune does)' })
        .option('force', { type: 'boolean', default: false, describe: 'Apply even when MCO\'s own disk check would refuse a set (it is checked first on the MCO backend)' })
        .option('os-image-via-mco', { type: 'boolean', default: false, describe: OS_IMAGE_VIA_MCO_HELP })
        .option('dry-run', withDryRunOption('plan, check, apply, wait (and with --prune delete); a dry run stops after the apply, without waiting'))
        .option('cache', { type: 'boolean', default: false, describe: 'Through the in-cluster cache (install --cache): check it is there, wired to the nodes and large enough for the plan before applying; wait shows its figures either way' })
        .epilogue(LIVE_CLUSTER_HELP),
    handler: async (args) => {
      // Read before any registry or cluster work: bad windows are refused first.
      const schedule = scheduleFrom(args as StagingFlags);
      const cluster = await clusterFrom(args as KubeFlags, scriptName);
      const { client, backend } = cluster;
      const target = await targetToPlan(args, (line) => ctx.log.warn(line));
      if ('path' in target) refusePathFlags(args, target.path);
      const observed = args.cluster === false ? undefined : await liveClusterFrom(args as KubeFlags, args.cluster === true, (line) => ctx.log.warn(line));
      // What earlier stages pinned is on the nodes' disks too: not new bytes.
      const live = observed && { ...observed, pinned: await pinnedOnNodes(client, backend) };
      const dryRun = args['dry-run'] as DryRun;
      // Under a cap the plan's own reads cross the link too: charged on the agents' ledger before they cross (a dry run's on its own).
      const linkMeter = await planReadsMeter(client, backend.kind, args['link-rate'], schedule, dryRun !== 'none', (line) => ctx.log.warn(line), ctx.log);
      let plans: Plan[];
      let path: PathPlan | undefined;
      try {
        if ('path' in target) {
          // Every hop ahead of the first window: the union on each node, each layer once.
          const layerSizes = new Map();
          path = await planPath(target.path, (hop, paused) => planRelease(hop.pullSpec, args, ctx, live, linkMeter, { ...(paused ? { workersPaused: paused } : {}), layerSizes }));
          plans = path.hops.map((hop) => hop.plan);
        } else {
          plans = [await planRelease(target.release, args, ctx, live, linkMeter)];
        }
      } finally {
        // Its last reads' end on the ledger: the pulls then count them.
        await linkMeter?.finish();
      }
      const plan = plans.at(-1)!;
      const sets = withStaging(plans.flatMap(desiredSetsFromPlan), schedule, args['link-rate'], backend.kind, (line) => ctx.log.warn(line));
      // Progress goes to stdout; with -o json|yaml only the events do, so the table goes to stderr.
      (args.output !== 'text' ? ctx.stderr : ctx.stdout).write(path ? renderPathTable(path) : renderPlanTable(plan));
      if (args.cache) {
        const { lines, warnings } = await checkCacheForPlan(client, args['cache-namespace'], plan, AGENT_NAME);
        for (const warning of warnings) ctx.log.warn(warning);
        (args.output !== 'text' ? ctx.stderr : ctx.stdout).write(lines.map((line) => `${line}\n`).join(''));
      }
      await checkNodeDisks(client, backend, sets, path ? pathNodeBytes(path) : plan.nodes);
      await checkMcoPreflight(client, backend, sets, { version: observed?.release.version, force: args.force === true, warn: (line) => ctx.log.warn(line) });
      const out = args.output !== 'text' ? ctx.stderr : ctx.stdout;
      // The release's signatures for the CVO (a mirror's cluster), verified with the keys it trusts now.
      const signed = await signatureConfigMapFrom(plan.release, args, async () => client);
      if (signed) {
        const done = await applyObject(client, signed.configMap, dryRun);
        const { name, namespace } = signed.configMap.metadata;
        out.write(`${signed.line}; ${dryRun === 'none' ? `applied ConfigMap ${namespace}/${name}` : `configmap/${name} ${done} (namespace ${namespace})`}\n`);
      }
      const osImage = await stageOsImage(client, backend, plan, { viaMco: args['os-image-via-mco'] === true, dryRun: backendDryRun(dryRun), warn: (line) => ctx.log.warn(line) });
      out.write(renderApplyOutcomes([...(await backend.apply(sets, { dryRun: backendDryRun(dryRun) })), ...osImage], dryRun));
      if (dryRun !== 'none') {
        // Nothing was applied, so there is nothing to wait for; prune shows what it would delete now.
        if (args.prune) await runPrune(client, backend, out, dryRun);
        out.write(dryRunClosing(dryRun));
        return;
      }
      await runWait(backend, sets.map((s) => s.name), args as WaitFlags, ctx, cluster);
      if (args.prune) await runPrune(client, backend, out, 'none');
    },
  });
}

/** What stage does for one release only. */
function refusePathFlags(args: PathFlags & { 'signatures-from'?: string; 'os-image-via-mco'?: boolean }, path: PathInput): void {
  const hops = `${path.from} -> ${path.to} takes ${path.hops.length} hops`;
  if (args['signatures-from'] !== undefined) throw new BadInputError(`--signatures-from verifies one release's signatures; ${hops}: stage --to HOP --signatures-from DIR per hop`);
  if (args['os-image-via-mco']) throw new BadInputError(`--os-image-via-mco stages one release's node OS; ${hops}: stage --to HOP --os-image-via-mco per hop`);
}
