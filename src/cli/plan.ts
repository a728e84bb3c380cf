/** `prestage plan RELEASE`: release image in, PinnedImageSets out. */
import type { Argv } from 'yargs';
import { buildPlan } from '../plan/build.js';
import { checkOutputDir, renderYaml, writeGitOpsDir } from '../render/pinned-image-sets.js';
import { renderPlanTable } from '../render/table.js';
import type { CommandContext } from './context.js';
import { planOptionsFrom, withPlanOptions } from './plan-options.js';
import { registryClientFrom, withRegistryOptions } from './registry-options.js';

export function planCommand(ctx: CommandContext) {
  return {
    builder: (y: Argv) =>
      withRegistryOptions(withPlanOptions(
        y
          .positional('release', { type: 'string', demandOption: true, describe: 'Release pullspec, e.g. quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64' })
          .option('output', { alias: 'o', choices: ['table', 'wide', 'json', 'yaml'] as const, default: 'table' as const, describe: 'Output format' })
          .option('output-dir', { type: 'string', describe: 'Write one PinnedImageSet YAML per set plus kustomization.yaml here' }),
      )),
    handler: async (args: any) => {
      // Found now, not after minutes of registry reads.
      if (args['output-dir'] !== undefined) await checkOutputDir(args['output-dir']);
      const client = registryClientFrom(args, (line) => ctx.log.warn(line));
      try {
        const plan = await buildPlan(client, planOptionsFrom(args, args.release));
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
