/**
 * `prestage preflight [RELEASE|FILE]`: before the window, will it fit? For a release (or --to, a
 * path, a config), a plan or manifests, or with none the prestage sets already on the cluster:
 * per node and set what is stored, what is still to fetch and write, the node's space by its
 * backend's own rule, what crosses the link and how long it takes against --window. GO exits 0;
 * NO-GO exits 1, each reason a line of the output and the error line naming them.
 */
import type { Argv } from 'yargs';
import yaml from 'js-yaml';
import { desiredSetsFromPlan } from '../cluster/desired-sets.js';
import { liveClusterFrom } from '../cluster/live-cluster.js';
import { pinnedOnNodes } from '../cluster/release-lifecycle.js';
import { appliedSets, PreflightNoGoError, runPreflight } from '../cluster/preflight/read.js';
import type { ModelImage } from '../cluster/preflight/model.js';
import { renderPreflight } from '../render/preflight-table.js';
import type { Plan } from '../plan/types.js';
import type { DesiredSet } from '../api/desired-set.js';
import type { Preflight } from '../api/preflight.js';
import type { ClusterClient } from '../cluster/connect.js';
import type { PinningBackend } from '../cluster/backend.js';
import { measureImages } from '../plan/sizes.js';
import { parseReference } from '../registry/reference.js';
import { BadInputError, RegistryError } from '../errors.js';
import { planRelease, readSetsSource, withReleasePlanOptions } from './apply.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { linkRate } from './flag-values.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { withLiveOptions, withToOptions, type PlanFlags } from './plan-options.js';
import { targetToPlan, withPathOptions } from './path-options.js';
import { planPath } from '../plan/path-plan.js';
import { registryClientFrom, type RegistryFlags } from './registry-options.js';
import { scheduleFrom, withStagingOptions, type StagingFlags } from './staging-options.js';
import { existsSync } from 'node:fs';
import { agentNamespace } from '../agent/plan-link-meter.js';

export function preflightCommand(ctx: CommandContext, scriptName: string) {
  return typedCommand({
    builder: (y: Argv) =>
      withStagingOptions(withPathOptions(withToOptions(withLiveOptions(withKubeOptions(withReleasePlanOptions(y.positional('release', { type: 'string', describe: 'Release pullspec, plan JSON file, or PinnedImageSet YAML file or directory (default: the prestage sets on the cluster)' }))), 'on; a cluster without ClusterVersion is planned from the release alone'), undefined, 'release', 'the prestage sets on the cluster')))
        .option('link-rate', { type: 'string', coerce: linkRate('link-rate'), describe: 'The slow link\'s rate or cap (bytes: 20MiB/s, 5MB/s; bits: 40Mbit/s, 40Mbps): for the ETA (default: the cap stored on the sets, prestage.dev/link-rate)' })
        .option('cache', { type: 'boolean', default: false, describe: 'Through the in-cluster cache (install --cache): each blob crosses the link once per repository, less what its warm Lease records it holds' })
        .option('cache-namespace', { type: 'string', default: 'prestage', describe: 'Namespace of the in-cluster cache' })
        .option('output', { alias: 'o', choices: ['json', 'yaml', 'wide'] as const, describe: 'Output format: json, yaml (kind Preflight: nodes[], their sets[], totals, eta, reasons, assumptions); wide adds a row per node and set [default: the table, then the verdict]' }),
    handler: async (args) => {
      // Bad windows are refused before any registry or cluster work.
      scheduleFrom(args as StagingFlags);
      const cluster = await clusterFrom(args as KubeFlags, scriptName);
      const { client, backend } = cluster;
      const flags = args as unknown as PlanFlags & RegistryFlags;
      const named = args.release !== undefined || args.to !== undefined || (args as { config?: string }).config !== undefined;
      let sets: DesiredSet[];
      let plans: Plan[] = [];
      if (!named) {
        sets = await appliedSets(client, backend);
      } else if (args.release !== undefined && existsSync(args.release)) {
        const read = await readSetsSource(args.release, flags, ctx);
        sets = read.sets;
        if (read.plan) plans = [read.plan];
      } else {
        const target = await targetToPlan(args, (line) => ctx.log.warn(line));
        const observed = args.cluster === false ? undefined : await liveClusterFrom(args as KubeFlags, args.cluster === true, (line) => ctx.log.warn(line));
        const live = observed && { ...observed, pinned: await pinnedOnNodes(client, backend) };
        if ('path' in target) {
          const layerSizes = new Map();
          plans = (await planPath(target.path, (hop, paused) => planRelease(hop.pullSpec, args, ctx, live, undefined, { ...(paused ? { workersPaused: paused } : {}), layerSizes }))).hops.map((hop) => hop.plan);
        } else {
          plans = [await planRelease(target.release, args, ctx, live)];
        }
        sets = plans.flatMap(desiredSetsFromPlan);
      }
      const preflight = await preflightOf(client, backend, sets, plans, !named, args as PreflightFlags, ctx);
      if (args.output === 'json') ctx.stdout.write(`${JSON.stringify(preflight, null, 2)}\n`);
      else if (args.output === 'yaml') ctx.stdout.write(yaml.dump(preflight, { lineWidth: -1, noRefs: true }));
      else ctx.stdout.write(renderPreflight(preflight, args.output === 'wide'));
      if (preflight.verdict === 'NO-GO') throw new PreflightNoGoError(`NO-GO: ${preflight.reasons.join('; ')}`);
    },
  });
}

export type PreflightFlags = PlanFlags & RegistryFlags & StagingFlags & { cache?: boolean; 'cache-namespace'?: string };

/** The preflight of `sets` (a plan's, or the cluster's when `applied`): their images measured, the cluster read. */
export async function preflightOf(client: ClusterClient, backend: PinningBackend, sets: readonly DesiredSet[], plans: readonly Plan[], applied: boolean, flags: PreflightFlags, ctx: CommandContext): Promise<Preflight> {
  const schedule = scheduleFrom(flags);
  const registry = registryClientFrom(flags, undefined, (line) => ctx.log.warn(line));
  try {
    const images = await modelImages(sets, plans, registry, flags.arch, (line) => ctx.log.warn(line));
    return await runPreflight(client, backend, {
      sets,
      applied,
      images,
      readLayers: async (pullSpecs) => {
        const layers = new Map<string, readonly string[]>();
        const unread: string[] = [];
        await Promise.all(pullSpecs.map(async (pullSpec) => {
          try {
            const image = await registry.resolveImage(parseReference(pullSpec), flags.arch);
            layers.set(pullSpec.slice(pullSpec.lastIndexOf('@') + 1), image.manifest.layers.map((layer) => layer.digest));
          } catch (error) {
            if (!(error instanceof RegistryError || error instanceof BadInputError)) throw error;
            unread.push(pullSpec);
          }
        }));
        return { layers, unread };
      },
      ...(flags['link-rate'] !== undefined ? { linkRate: flags['link-rate'] } : {}),
      ...(schedule ? { schedule } : {}),
      ...(flags.cache ? { cacheNamespace: flags['cache-namespace'] ?? 'prestage' } : {}),
      agentNamespace: await agentNamespace(client),
      now: Date.now(),
    });
  } finally {
    await registry.close();
  }
}

/**
 * Every set image with its layers: from the plans where they measured it, else read now (a set
 * from manifests or on the cluster names only digests).
 */
async function modelImages(sets: readonly DesiredSet[], plans: readonly Plan[], registry: ReturnType<typeof registryClientFrom>, arch: string, warn: (line: string) => void): Promise<ModelImage[]> {
  const known = new Map<string, ModelImage>();
  for (const plan of plans) {
    for (const image of plan.images) {
      known.set(image.pullSpec, { pullSpec: image.pullSpec, digest: image.digest, config: image.config, layers: image.layers, ...(plan.release.multiArch && image.source === 'component' ? { mcoCountsZero: true } : {}) });
    }
  }
  const unknown = [...new Set(sets.flatMap((set) => set.images))].filter((pullSpec) => !known.has(pullSpec));
  const warnings: string[] = [];
  const measured = await measureImages(registry, unknown.map((pullSpec) => parseReference(pullSpec)), arch, warnings);
  for (const warning of warnings) warn(warning);
  unknown.forEach((pullSpec, i) => {
    const image = measured[i]!;
    known.set(pullSpec, { pullSpec, digest: image.digest, config: image.config, layers: image.layers });
  });
  return [...new Set(sets.flatMap((set) => set.images))].map((pullSpec) => known.get(pullSpec)!);
}
