/**
 * `prestage pause [SET...]` and `prestage resume [SET...]`: stop and restart staging of sets
 * (default: every prestage set), one line per set. The cluster side is cluster/pause.ts.
 */
import type { Argv } from 'yargs';
import { PAUSED_ROLE_ANNOTATION } from '../api/staging.js';
import { patchSet, planPause, planResume, type PauseStep, type PauseTarget, type ResumeStep } from '../cluster/pause.js';
import type { ClusterClient } from '../cluster/connect.js';
import { POOL_ROLE_LABEL } from '../plan/assemble.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { dryRunClosing, withDryRun, type DryRun } from './dry-run.js';

const pools = (names: readonly string[] | undefined) => (names?.length ?? 0) > 1 ? `pools ${names!.join(', ')}` : `pool ${names![0]}`;

/** The line for a set pause changes (before `paused`/`would pause`). */
export function pauseLine(step: Extract<PauseStep, { action: 'pause' }>): string {
  if (step.role === undefined) return `${step.set} (agent: no new pulls start; pulls under way finish; nothing is unpinned)`;
  const unselected = step.unselectedBy?.length ? `${pools(step.unselectedBy)} no longer ${step.unselectedBy.length > 1 ? 'select' : 'selects'} it` : 'no pool selected it';
  return `${step.set} (MCO: label ${POOL_ROLE_LABEL}=${step.role} moved to annotation ${PAUSED_ROLE_ANNOTATION}; ${unselected})`;
}

/** What a pause means on MCO, once after the sets' lines. */
export const MCO_PAUSE_NOTE =
  "MCO has no pause: a pool no longer selecting a set has MCO's daemon rewrite its pin drop-in without the set's images; it never removes images, but unpinned images are subject to the kubelet's image garbage collection until resume; pulls under way finish. resume puts the label back: MCO pulls what is missing and pins it again.";

/** The line for a set resume changes (before `resumed`/`would resume`). */
export function resumeLine(step: ResumeStep): string {
  if (step.role === undefined) return step.set;
  const selected = step.selectedBy?.length ? `${pools(step.selectedBy)} ${step.selectedBy.length > 1 ? 'select' : 'selects'} it again: MCO pulls what is missing and pins it again` : 'no pool selects it';
  return `${step.set} (MCO: label ${POOL_ROLE_LABEL}=${step.role} ${step.restored ? 'restored' : 'kept'}; ${selected})`;
}

export async function runPause(client: ClusterClient, target: PauseTarget, names: readonly string[], out: NodeJS.WritableStream, dryRun: DryRun, now = new Date()): Promise<void> {
  const steps = await planPause(client, target, names, now);
  for (const step of steps) {
    if (step.action === 'already') {
      out.write(`${step.set} already paused since ${step.since}\n`);
      continue;
    }
    if (dryRun !== 'client') await patchSet(client, target, step.set, step.patch, { dryRun: dryRun === 'server', verb: 'pause' });
    out.write(`${dryRun !== 'none' ? 'would pause' : 'paused'} ${pauseLine(step)}\n`);
  }
  if (target.kind === 'mco' && steps.some((step) => step.action === 'pause')) out.write(`${MCO_PAUSE_NOTE}\n`);
  out.write(dryRunClosing(dryRun));
}

export async function runResume(client: ClusterClient, target: PauseTarget, names: readonly string[], out: NodeJS.WritableStream, dryRun: DryRun): Promise<void> {
  for (const step of await planResume(client, target, names)) {
    if (dryRun !== 'client') await patchSet(client, target, step.set, step.patch, { dryRun: dryRun === 'server', verb: 'resume' });
    out.write(`${dryRun !== 'none' ? 'would resume' : 'resumed'} ${resumeLine(step)}\n`);
  }
  out.write(dryRunClosing(dryRun));
}

function factory(verb: 'pause' | 'resume') {
  return (ctx: CommandContext, scriptName: string) => typedCommand({
    builder: (y: Argv) =>
      withKubeOptions(
        withDryRun(
          y.positional('sets', { type: 'string', array: true, describe: verb === 'pause' ? 'PinnedImageSet names (default: every prestage set)' : 'PinnedImageSet names (default: every paused prestage set)' }),
          `${verb} the sets`,
        ),
      ),
    handler: async (args) => {
      const { client, mco } = await clusterFrom(args as KubeFlags, scriptName);
      const target: PauseTarget = mco ? { kind: 'mco', versions: mco } : { kind: 'agent' };
      const names = ((args.sets as string[] | undefined) ?? []).filter((name) => name !== '');
      const dryRun = args['dry-run'] as DryRun;
      await (verb === 'pause' ? runPause(client, target, names, ctx.stdout, dryRun) : runResume(client, target, names, ctx.stdout, dryRun));
    },
  });
}

export const pauseCommand = factory('pause');
export const resumeCommand = factory('resume');
