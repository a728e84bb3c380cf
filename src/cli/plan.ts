/** `prestage plan RELEASE`: release image in, PinnedImageSets out. */
import type { Argv } from 'yargs';
import { buildPlan } from '../plan/build.js';
import { checkMcoNames } from '../plan/mco-names.js';
import { checkOutputDir, SET_APIS } from '../render/output-dir.js';
import { renderPlanTable } from '../render/table.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { LIVE_CLUSTER_HELP } from '../cluster/live-cluster-help.js';
import { planOptionsFrom, withLiveOptions, withPlanOptions, withToOptions } from './plan-options.js';
import { targetToPlan, withPathOptions } from './path-options.js';
import { planPath, type PathPlan } from '../plan/path-plan.js';
import { renderPathTable } from '../render/path-table.js';
import type { SetApi } from '../render/output-dir.js';
import { RetrySummary } from '../registry/retry-summary.js';
import { planProgress } from './plan-progress.js';
import { registryClientFrom, withRegistryOptions } from './registry-options.js';
import { signatureConfigMapFrom, withSignaturesFromOptions } from './signatures-from.js';
import { basename, resolve } from 'node:path';
import { BadInputError } from '../errors.js';
import type { GitOpsOptions } from '../render/gitops-layout.js';

export function planCommand(ctx: CommandContext) {
  return typedCommand({
    builder: (y: Argv) =>
      withRegistryOptions(withLiveOptions(withPlanOptions(withPathOptions(withToOptions(withSignaturesFromOptions(
        y
          .positional('release', { type: 'string', describe: 'Release pullspec, e.g. quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64 (or --to VERSION)' })
          .option('output', { alias: 'o', choices: ['table', 'wide', 'json', 'yaml', 'name'] as const, default: 'table' as const, describe: 'Output format; name: pinnedimageset/NAME per set, as kubectl -o name prints' })
          .option('output-dir', { type: 'string', describe: 'Write one PinnedImageSet YAML per set plus kustomization.yaml here' })
          .option('api', {
            choices: SET_APIS,
            default: 'mco' as const,
            describe: 'PinnedImageSet API of -o yaml and --output-dir: mco (machineconfiguration.openshift.io/v1, OpenShift 4.19+), mco-v1alpha1 (4.16-4.18 with TechPreviewNoUpgrade), prestage (prestage.dev/v1alpha1, the prestage agent)',
          })
          .option('gitops', { choices: ['argocd', 'flux'] as const, describe: 'With --output-dir: stage, then upgrade: the sets, a gate Job (prestage wait) and with --upgrade-to the ClusterVersion, ordered by Argo CD sync waves or Flux Kustomizations (dependsOn, healthChecks)' })
          .option('gate-image', { type: 'string', describe: "With --gitops: the image the gate Job runs, prestage's agent image (as `prestage image push` pushed it and `install --image` names it)" })
          .option('upgrade-to', { type: 'string', describe: "With --gitops: set ClusterVersion's desiredUpdate.version to this in the last step" })
          .option('gitops-namespace', { type: 'string', default: 'prestage-gate', describe: "With --gitops: the gate Job's namespace" })
          .option('flux-path', { type: 'string', describe: "With --gitops flux: the --output-dir's path in the repository (the Kustomizations' spec.path) [default: ./ and the directory's name]" })
          .option('flux-source', { type: 'string', default: 'flux-system', describe: 'With --gitops flux: the GitRepository the Kustomizations read' })
          .option('progress', { type: 'boolean', describe: 'Progress on stderr (default: when stderr is a terminal)' })
          .option('kubeconfig', { type: 'string', describe: 'Plan the upgrade of this cluster (live; default kubeconfig: $KUBECONFIG, ~/.kube/config, in-cluster)' })
          .option('context', { type: 'string', describe: 'Kubeconfig context of the live cluster' })
          .epilogue(LIVE_CLUSTER_HELP),
      )))), 'with --kubeconfig, --context or --to')),
    handler: async (args) => {
      // Found now, not after minutes of registry reads.
      if (args['output-dir'] !== undefined) await checkOutputDir(args['output-dir']);
      const gitops = gitopsOptionsFrom(args);
      // `--to` alone reads the cluster's offered updates; `--from` names the start, so no cluster is needed.
      const requested = args.cluster ?? (args.kubeconfig !== undefined || args.context !== undefined || (args.to !== undefined && args.from === undefined));
      const target = await targetToPlan(args, (line) => ctx.log.warn(line));
      if ('path' in target && args.gitops !== undefined) throw new BadInputError(`--gitops orders the sets of one release; ${target.path.from} -> ${target.path.to} takes ${target.path.hops.length} hops: render each with plan --to HOP --gitops, in turn`);
      if ('path' in target && args['signatures-from'] !== undefined) throw new BadInputError(`--signatures-from verifies one release's signatures; ${target.path.from} -> ${target.path.to} takes ${target.path.hops.length} hops: bundle create --from ${target.path.from} --to ${target.path.to} carries every hop's, or run plan --to HOP --signatures-from DIR per hop`);
      // The Kubernetes client and kubeconfig reader load only for a plan that reads a cluster.
      const live = requested ? await (await import('../cluster/live-cluster.js')).liveClusterFrom(args, true, (line) => ctx.log.warn(line)) : undefined;
      // Retries are summed per registry and reported only when the plan succeeds: a fatal
      // error is the one line printed.
      const retries = new RetrySummary();
      const client = registryClientFrom(args, (_line, event) => retries.record(event), (line) => ctx.log.warn(line));
      // Sizing reads the release manifest that reading the release resolved.
      client.rememberManifests();
      const progress = planProgress(ctx.stderr, args.progress, client.counters);
      try {
        if ('path' in target) {
          const layerSizes = new Map();
          const path = await planPath(target.path, (hop, paused) => buildPlan(client, { ...planOptionsFrom(args, hop.pullSpec, live), ...(paused ? { workersPaused: paused } : {}), layerSizes }, (p) => progress.update(p))).finally(() => progress.stop());
          for (const line of retries.lines()) ctx.log.warn(line);
          await printPath(ctx, path, args);
          return;
        }
        const release = target.release;
        const plan = await buildPlan(client, planOptionsFrom(args, release, live), (p) => progress.update(p)).finally(() => progress.stop());
        for (const line of retries.lines()) ctx.log.warn(line);
        if ((args['output-dir'] || args.output === 'yaml') && args.api !== 'prestage') checkMcoNames(plan.sets.flatMap((s) => s.images));
        // Sets are rendered by a module (and cluster modules) loaded only to render them.
        const sets = args['output-dir'] || args.output === 'yaml' ? await import('../render/pinned-image-sets.js') : undefined;
        const clusterAccess = args.kubeconfig !== undefined || args.context !== undefined;
        const signed = await signatureConfigMapFrom(plan.release, args, clusterAccess ? async () => (await import('../cluster/connect.js')).connectCluster(args) : undefined);
        if (signed) ctx.stderr.write(`${signed.line}\n`);
        // Rendered once, for the GitOps directory or after the sets' YAML.
        const signatureFile = new Map<string, string>();
        if (signed) {
          const { renderSignatureConfigMap, SIGNATURE_CONFIGMAP_FILE } = await import('../signatures/configmap.js');
          signatureFile.set(SIGNATURE_CONFIGMAP_FILE, renderSignatureConfigMap(signed.configMap));
        }
        if (args['output-dir']) {
          const files = await sets!.writeGitOpsDir(plan, args['output-dir'], args.api, signatureFile, gitops);
          ctx.stderr.write(`wrote ${files.map((f) => `${args['output-dir']}/${f}`).join(', ')}\n`);
        }
        // The table and the JSON carry the plan's warnings; PinnedImageSet YAML and names have no room for them.
        if (args.output === 'yaml' || args.output === 'name') for (const warning of plan.warnings) ctx.log.warn(warning);
        switch (args.output) {
          case 'json':
            ctx.stdout.write(`${JSON.stringify(plan, null, 2)}\n`);
            break;
          case 'yaml':
            ctx.stdout.write(sets!.renderYaml(plan, args.api));
            for (const rendered of signatureFile.values()) ctx.stdout.write(`---\n${rendered}`);
            break;
          case 'name':
            ctx.stdout.write((await import('./documents.js')).renderNames('pinnedimageset', plan.sets.map((set) => set.name)));
            break;
          default:
            ctx.stdout.write(renderPlanTable(plan, args.output === 'wide'));
        }
        ctx.log.debug({ requests: client.counters.requests, bodyBytes: client.counters.bodyBytes }, 'registry reads');
      } finally {
        await client.close();
      }
    },
  });
}

/** A path's output: the path table, its JSON or YAML, every hop's sets as YAML, names or files. */
async function printPath(ctx: CommandContext, path: PathPlan, args: { output: string; 'output-dir'?: string; api: SetApi }): Promise<void> {
  const plans = path.hops.map((hop) => hop.plan);
  if ((args['output-dir'] || args.output === 'yaml') && args.api !== 'prestage') checkMcoNames(plans.flatMap((plan) => plan.sets.flatMap((s) => s.images)));
  const sets = args['output-dir'] || args.output === 'yaml' ? await import('../render/pinned-image-sets.js') : undefined;
  if (args['output-dir']) {
    const files = await sets!.writePathDir(plans, args['output-dir'], args.api);
    ctx.stderr.write(`wrote ${files.map((f) => `${args['output-dir']}/${f}`).join(', ')}\n`);
  }
  if (args.output === 'yaml' || args.output === 'name') for (const warning of path.warnings) ctx.log.warn(warning);
  switch (args.output) {
    case 'json':
      ctx.stdout.write(`${JSON.stringify(path, null, 2)}\n`);
      break;
    case 'yaml':
      ctx.stdout.write(plans.map((plan) => sets!.renderYaml(plan, args.api)).join(''));
      break;
    case 'name':
      ctx.stdout.write((await import('./documents.js')).renderNames('pinnedimageset', plans.flatMap((plan) => plan.sets.map((set) => set.name))));
      break;
    default:
      ctx.stdout.write(renderPathTable(path, args.output === 'wide'));
  }
}

/** The --gitops flags, checked before any registry work. */
/** The --gitops flags as the plan command's builder declares them. */
interface GitOpsFlags {
  readonly gitops?: GitOpsOptions['tool'];
  readonly 'output-dir'?: string;
  readonly 'gate-image'?: string;
  readonly 'upgrade-to'?: string;
  readonly 'gitops-namespace': string;
  readonly 'flux-path'?: string;
  readonly 'flux-source': string;
}

function gitopsOptionsFrom(args: GitOpsFlags): GitOpsOptions | undefined {
  if (args.gitops === undefined) {
    for (const flag of ['gate-image', 'upgrade-to', 'flux-path'] as const) if (args[flag] !== undefined) throw new BadInputError(`--${flag} needs --gitops argocd|flux (and --output-dir)`);
    return undefined;
  }
  if (args['output-dir'] === undefined) throw new BadInputError('--gitops writes a directory: add --output-dir DIR');
  if (!args['gate-image']) throw new BadInputError("--gitops needs --gate-image: prestage's agent image (as `prestage image push` pushed it), which the gate Job runs `prestage wait` in");
  if (args['upgrade-to'] !== undefined && !/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(args['upgrade-to'])) throw new BadInputError(`--upgrade-to ${args['upgrade-to']}: not a release version; give one such as 4.16.3`);
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(args['gitops-namespace'])) throw new BadInputError(`--gitops-namespace ${args['gitops-namespace']}: not a namespace name (lower-case letters, digits, '-')`);
  return {
    tool: args.gitops,
    gateImage: args['gate-image'],
    ...(args['upgrade-to'] !== undefined ? { upgradeTo: args['upgrade-to'] } : {}),
    namespace: args['gitops-namespace'],
    fluxPath: args['flux-path'] ?? `./${basename(resolve(args['output-dir']))}`,
    fluxSource: args['flux-source'],
  };
}
