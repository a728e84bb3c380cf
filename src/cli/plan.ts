/** `prestage plan RELEASE`: release image in, PinnedImageSets out. */
import type { Argv } from 'yargs';
import { buildPlan, readImagesFile } from '../plan/build.js';
import { DEFAULT_PROFILE } from '../plan/classify.js';
import type { ImageRole } from '../plan/types.js';
import { renderYaml, writeGitOpsDir } from '../render/pinned-image-sets.js';
import { renderPlanTable } from '../render/table.js';
import type { CommandContext } from './context.js';
import { registryClientFrom, withRegistryOptions } from './registry-options.js';

export function planCommand(ctx: CommandContext) {
  return {
    command: 'plan <release>',
    describe: 'Read an OpenShift release image and plan control-plane and worker PinnedImageSets',
    builder: (y: Argv) =>
      withRegistryOptions(
        y
          .positional('release', { type: 'string', demandOption: true, describe: 'Release pullspec, e.g. quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64' })
          .option('arch', { type: 'string', default: 'amd64', describe: 'Architecture to plan for (amd64, arm64, ppc64le, s390x)' })
          .option('profile', { type: 'string', default: DEFAULT_PROFILE, describe: 'Cluster profile for manifest inclusion' })
          .option('feature-set', { type: 'string', default: 'Default', describe: 'Cluster feature set for manifest inclusion' })
          .option('control-plane-only', { type: 'string', array: true, default: [] as string[], describe: 'Component NAME to pin on control-plane nodes only (repeatable)' })
          .option('all-nodes', { type: 'string', array: true, default: [] as string[], describe: 'Component NAME to pin on all nodes (repeatable)' })
          .option('image', { type: 'string', array: true, default: [] as string[], describe: 'Extra image REF to add (repeatable; tags resolved to digests)' })
          .option('images-file', { type: 'string', describe: 'File with extra image references, one per line' })
          .option('extra-role', { choices: ['all', 'worker', 'control-plane'] as const, default: 'all' as const, describe: 'Which nodes get the extra images' })
          .option('name-prefix', { type: 'string', default: 'prestage', describe: 'Prefix of the PinnedImageSet names' })
          .option('output', { alias: 'o', choices: ['table', 'wide', 'json', 'yaml'] as const, default: 'table' as const, describe: 'Output format' })
          .option('output-dir', { type: 'string', describe: 'Write one PinnedImageSet YAML per set plus kustomization.yaml here' }),
      ),
    handler: async (args: any) => {
      const client = registryClientFrom(args, (line) => ctx.log.warn(line));
      try {
        const extraImages = [...args.image, ...(args['images-file'] ? readImagesFile(args['images-file']) : [])];
        const plan = await buildPlan(client, {
          release: args.release,
          arch: args.arch,
          profile: args.profile,
          featureSet: args['feature-set'],
          controlPlaneOnly: args['control-plane-only'],
          allNodes: args['all-nodes'],
          extraImages,
          extraRole: args['extra-role'] as ImageRole,
          namePrefix: args['name-prefix'],
        });
        if (args['output-dir']) {
          const files = await writeGitOpsDir(plan, args['output-dir']);
          ctx.stderr.write(`wrote ${files.map((f) => `${args['output-dir']}/${f}`).join(', ')}\n`);
        }
        switch (args.output) {
          case 'json':
            ctx.stdout.write(`${JSON.stringify(plan, null, 2)}\n`);
            break;
          case 'yaml':
            ctx.stdout.write(renderYaml(plan));
            break;
          default:
            ctx.stdout.write(renderPlanTable(plan, args.output === 'wide'));
        }
        ctx.log.debug({ requests: client.counters.requests, bodyBytes: client.counters.bodyBytes }, 'registry reads');
      } finally {
        await client.close();
      }
    },
  };
}
