/** `prestage apply PLAN|DIR|RELEASE`: server-side apply of the sets, or a dry run (client or server) with a diff. */
import { readdirSync, readFileSync, statSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import type { Argv } from 'yargs';
import type { ApplyOutcome, DesiredSet } from '../cluster/backend.js';
import { desiredSetsFromManifests, desiredSetsFromPlan } from '../cluster/desired-sets.js';
import { checkMcoPreflight } from '../cluster/mco/preflight.js';
import { OS_IMAGE_VIA_MCO_HELP, stageOsImage } from '../cluster/os-image-via-mco.js';
import { BadInputError, systemErrorText } from '../errors.js';
import { buildPlan, type PlanOptions } from '../plan/build.js';
import type { LiveCluster } from '../plan/live.js';
import type { Plan } from '../plan/types.js';
import { parseReference } from '../registry/reference.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { planOptionsFrom, withPlanOptions, type PlanFlags } from './plan-options.js';
import { registryClientFrom, withRegistryOptions, type RegistryFlags } from './registry-options.js';
import { planReadsMeter, scheduleFrom, withStaging, withStagingOptions, type StagingFlags } from './staging-options.js';
import { linkRate } from './flag-values.js';
import type { LinkMeter } from '../net/link-meter.js';
import { LINK_RATE_ANNOTATION } from '../api/staging.js';
import { backendDryRun, dryRunClosing, dryRunSuffix, withDryRun, type DryRun } from './dry-run.js';
import { count } from '../plural.js';

/** The plan and registry flags `apply` and `stage` need when they plan a release themselves. */
export function withReleasePlanOptions<T>(y: Argv<T>): Argv<T & PlanFlags & RegistryFlags> {
  return withRegistryOptions(withPlanOptions(y));
}

/** `linkMeter`: under a cap, where the plan's reads pay before they cross the link. */
export async function planRelease(release: string, flags: PlanFlags & RegistryFlags, ctx: CommandContext, live?: LiveCluster, linkMeter?: LinkMeter, hop: Pick<PlanOptions, 'workersPaused' | 'layerSizes'> = {}): Promise<Plan> {
  const client = registryClientFrom(flags, (line) => ctx.log.warn(line), (line) => ctx.log.warn(line), linkMeter);
  try {
    return await buildPlan(client, { ...planOptionsFrom(flags, release, live), ...hop });
  } finally {
    await client.close();
  }
}

/** A plan JSON file, a PinnedImageSet manifest file or directory, or else a release pullspec to plan. */
export async function readSetsSource(source: string, flags: PlanFlags & RegistryFlags, ctx: CommandContext, linkMeter?: LinkMeter): Promise<{ sets: DesiredSet[]; plan?: Plan }> {
  const stat = statSource(source);
  if (!stat) {
    checkReleaseSource(source);
    const plan = await planRelease(source, flags, ctx, undefined, linkMeter);
    return { sets: desiredSetsFromPlan(plan), plan };
  }
  const files = stat.isDirectory() ? readdirSync(source).filter((f) => /\.(ya?ml|json)$/.test(f)).sort().map((f) => join(source, f)) : [source];
  const documents = files.flatMap((file) => parseDocuments(file));
  const plan = documents.find((d): d is Plan => (d as Partial<Plan> | null)?.kind === 'Plan');
  if (plan) return { sets: desiredSetsFromPlan(plan), plan };
  const objects = documents.flatMap((d) => ((d as { kind?: string; items?: unknown[] } | null)?.kind?.endsWith('List') ? ((d as { items?: unknown[] }).items ?? []) : [d]));
  const sets = desiredSetsFromManifests(objects, source);
  if (!sets.length) throw new BadInputError(`${source}: no PinnedImageSets found`);
  return { sets };
}

function statSource(source: string): Stats | undefined {
  try {
    return statSync(source);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw new BadInputError(`${source}: ${systemErrorText(error as NodeJS.ErrnoException)}`);
  }
}

/** A source that names no file must be a release pullspec, and should not look like a file name. */
function checkReleaseSource(source: string): void {
  const hint = 'name a plan file (plan -o json), a PinnedImageSet YAML file or directory, or a release pullspec';
  if (/^[.~/]|\.(json|ya?ml)$/i.test(source)) throw new BadInputError(`${source}: no such file or directory; ${hint}`);
  try {
    parseReference(source);
  } catch {
    throw new BadInputError(`${source}: no such file or directory, and not an image reference; ${hint}`);
  }
}

function parseDocuments(file: string): unknown[] {
  try {
    return yaml.loadAll(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new BadInputError(`${file}: not YAML or JSON: ${(error as Error).message.split('\n')[0]}`);
  }
}

export function renderApplyOutcomes(outcomes: readonly ApplyOutcome[], dryRun: DryRun): string {
  const suffix = dryRunSuffix(dryRun);
  return outcomes
    .map((o) => {
      const head = `${o.resource ?? 'pinnedimageset'}/${o.set} ${o.action}`;
      if (o.action === 'created') return `${head}: ${count(o.addedImages.length, 'image')}${suffix}`;
      if (o.action === 'unchanged') return `${head}${suffix}`;
      const changes = [
        o.addedImages.length || o.removedImages.length ? `+${o.addedImages.length} -${count(o.removedImages.length, 'image')}` : '',
        o.changedMetadata.length ? `metadata ${o.changedMetadata.join(', ')}` : '',
      ].filter(Boolean);
      return [`${head}: ${changes.join('; ') || 'spec'}${suffix}`, ...o.addedImages.map((i) => `  + ${i}`), ...o.removedImages.map((i) => `  - ${i}`)].join('\n');
    })
    .map((line) => `${line}\n`)
    .join('');
}

export function applyCommand(ctx: CommandContext, scriptName: string) {
  return typedCommand({
    builder: (y: Argv) =>
      withStagingOptions(withKubeOptions(withReleasePlanOptions(
        withDryRun(y, 'apply the sets')
          .positional('source', { type: 'string', demandOption: true, describe: 'Plan JSON file, PinnedImageSet YAML file or directory, or release pullspec' })
          .option('force', { type: 'boolean', default: false, describe: 'Apply even when MCO\'s own disk check would refuse a set (it is checked first on the MCO backend, for sets from a plan or a release)' })
          .option('os-image-via-mco', { type: 'boolean', default: false, describe: `${OS_IMAGE_VIA_MCO_HELP} (sets from a plan or a release)` })
          .option('link-rate', { type: 'string', coerce: linkRate('link-rate'), describe: `Cluster-wide cap on the slow link for these sets (bytes: 20MiB/s, 5MB/s; bits: 40Mbit/s, 40Mbps), stored as ${LINK_RATE_ANNOTATION}: the agents share it over their pull slots (prestage agent only)` }),
      ))),
    handler: async (args) => {
      // Read before any registry or cluster work: bad windows are refused first.
      const schedule = scheduleFrom(args as StagingFlags);
      const dryRun = args['dry-run'] as DryRun;
      // A release planned under a cap: its reads cross the link too, charged on the agents' ledger (as stage's).
      const planned = statSource(args.source) === undefined && args['link-rate'] !== undefined ? await clusterFrom(args as KubeFlags, scriptName) : undefined;
      const linkMeter = planned && (await planReadsMeter(planned.client, planned.backend.kind, args['link-rate'], schedule, dryRun !== 'none', (line) => ctx.log.warn(line), ctx.log));
      let read;
      try {
        read = await readSetsSource(args.source, args, ctx, linkMeter);
      } finally {
        await linkMeter?.finish();
      }
      const { plan } = read;
      if (args['os-image-via-mco'] && !plan) throw new BadInputError(`--os-image-via-mco: ${args.source} holds PinnedImageSets, not a plan; apply a plan JSON file or a release so the OS images are known`);
      const { client, backend } = planned ?? (await clusterFrom(args as KubeFlags, scriptName));
      const sets = withStaging(read.sets, schedule, args['link-rate'], backend.kind, (line) => ctx.log.warn(line));
      await checkMcoPreflight(client, backend, sets, { version: undefined, force: args.force === true, warn: (line) => ctx.log.warn(line) });
      const osImage = plan ? await stageOsImage(client, backend, plan, { viaMco: args['os-image-via-mco'] === true, dryRun: backendDryRun(dryRun), warn: (line) => ctx.log.warn(line) }) : [];
      ctx.stdout.write(renderApplyOutcomes([...(await backend.apply(sets, { dryRun: backendDryRun(dryRun) })), ...osImage], dryRun));
      ctx.stdout.write(dryRunClosing(dryRun));
    },
  });
}
