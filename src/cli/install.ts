/** `prestage install`: render (`-o yaml`) or server-side apply (`--apply`) the agent and its API. */
import { KubeConfig } from '@kubernetes/client-node';
import type { Argv } from 'yargs';
import { BadInputError } from '../errors.js';
import { applyServerSide, waitForCrdsEstablished } from '../install/apply.js';
import { DEFAULT_IMAGE_STORE, installManifests, renderInstallYaml } from '../install/manifests.js';
import type { CommandContext } from './context.js';

export const DEFAULT_AGENT_IMAGE = 'ghcr.io/prestage/prestage:0.1.0';

export function installCommand(ctx: CommandContext) {
  return {
    builder: (y: Argv) =>
      y
        .option('namespace', { alias: 'n', type: 'string', default: 'prestage', describe: 'Namespace of the agent' })
        .option('image', { type: 'string', default: DEFAULT_AGENT_IMAGE, describe: 'Image the agent DaemonSet runs' })
        .option('image-store', { type: 'string', default: DEFAULT_IMAGE_STORE, describe: "CRI-O's storage root (crio.conf `root`), mounted read-only for the disk check" })
        .option('agent-arg', { type: 'string', array: true, default: [] as string[], describe: 'Extra `prestage agent` flag for the DaemonSet (repeatable)' })
        .option('output', { alias: 'o', choices: ['yaml', 'json'] as const, default: 'yaml' as const, describe: 'Output format when rendering' })
        .option('apply', { type: 'boolean', default: false, describe: 'Apply server-side (field manager prestage) instead of printing' })
        .option('kubeconfig', { type: 'string', describe: 'Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)' }),
    handler: async (args: any) => {
      const manifests = installManifests({ namespace: args.namespace, image: args.image, agentArgs: args['agent-arg'], imageStore: args['image-store'] });
      if (!args.apply) {
        ctx.stdout.write(args.output === 'json' ? `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: manifests }, null, 2)}\n` : renderInstallYaml(manifests));
        return;
      }
      const config = new KubeConfig();
      try {
        if (args.kubeconfig) config.loadFromFile(args.kubeconfig);
        else config.loadFromDefault();
      } catch (error) {
        throw new BadInputError(`cannot read kubeconfig ${args.kubeconfig ?? ''}: ${(error as Error).message}`);
      }
      await applyServerSide(config, manifests);
      await waitForCrdsEstablished(config, manifests.filter((manifest) => manifest.kind === 'CustomResourceDefinition').map((manifest) => manifest.metadata.name));
      for (const manifest of manifests) ctx.stdout.write(`${manifest.kind.toLowerCase()}/${manifest.metadata.name} serverside-applied\n`);
    },
  };
}
