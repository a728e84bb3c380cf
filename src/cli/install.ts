/** `prestage install`: render (`-o yaml`) or server-side apply (`--apply`) the agent and its API. */
import type { Argv } from 'yargs';
import { KubeApiError, KubeClient } from '../cluster/kube.js';
import { loadKubeconfig } from '../cluster/kubeconfig.js';
import { BadInputError, ClusterError } from '../errors.js';
import { applyServerSide, waitForCrdsEstablished } from '../install/apply.js';
import { ADMISSION_POLICY_MIN_MINOR, DEFAULT_IMAGE_STORE, installManifests, renderInstallYaml } from '../install/manifests.js';
import { parseReference } from '../registry/reference.js';
import type { CommandContext } from './context.js';

export function installCommand(ctx: CommandContext) {
  return {
    builder: (y: Argv) =>
      y
        .option('image', { type: 'string', describe: 'The agent image the DaemonSet runs (required): build and push it with `prestage image push`' })
        .option('namespace', { alias: 'n', type: 'string', default: 'prestage', describe: 'Namespace of the agent' })
        .option('image-store', { type: 'string', default: DEFAULT_IMAGE_STORE, describe: "CRI-O's storage root (crio.conf `root`), mounted read-only for the disk check" })
        .option('agent-arg', { type: 'string', array: true, default: [] as string[], describe: 'Extra `prestage agent` flag for the DaemonSet (repeatable)' })
        .option('openshift', { type: 'boolean', describe: 'Render the SecurityContextConstraints OpenShift needs (with --apply: detected from security.openshift.io)' })
        .option('output', { alias: 'o', choices: ['yaml', 'json'] as const, default: 'yaml' as const, describe: 'Output format when rendering' })
        .option('apply', { type: 'boolean', default: false, describe: 'Apply server-side (field manager prestage) instead of printing' })
        .option('kubeconfig', { type: 'string', describe: 'Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)' })
        .option('context', { type: 'string', describe: 'Kubeconfig context (default: its current-context)' }),
    handler: async (args: any) => {
      const image: string | undefined = args.image;
      if (!image) throw new BadInputError('--image is required: the agent image, e.g. REGISTRY/prestage:VERSION (build and push it with `prestage image push REGISTRY/prestage:VERSION`)');
      let reference;
      try {
        reference = parseReference(image);
      } catch (error) {
        throw new BadInputError(`--image: ${(error as Error).message}`);
      }
      if (!reference.tag && !reference.digest) throw new BadInputError(`--image ${image} names no tag or digest: pin the version the nodes run, e.g. ${image}:0.1.0`);
      if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(args.namespace)) throw new BadInputError(`--namespace ${args.namespace} is not a namespace name (lower-case letters, digits and '-', at most 63)`);
      const options = { namespace: args.namespace, image, agentArgs: args['agent-arg'], imageStore: args['image-store'] };
      if (!args.apply) {
        const manifests = installManifests({ ...options, openshift: args.openshift === true });
        ctx.stdout.write(args.output === 'json' ? `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: manifests }, null, 2)}\n` : renderInstallYaml(manifests));
        return;
      }
      const client = new KubeClient(await loadKubeconfig({ kubeconfig: args.kubeconfig, context: args.context }));
      const minor = await serverMinor(client);
      const admissionPolicy = minor >= ADMISSION_POLICY_MIN_MINOR;
      if (!admissionPolicy) {
        ctx.stderr.write(
          `prestage: warning: Kubernetes 1.${minor} has no node-name claim in pod-bound tokens (1.${ADMISSION_POLICY_MIN_MINOR}+), so the admission policy that keeps each agent to its own node's NodePinnedImages is left out: any agent may write any node's status\n`,
        );
      }
      const openshift = args.openshift ?? (await client.find('/apis/security.openshift.io/v1')) !== undefined;
      const manifests = installManifests({ ...options, openshift, admissionPolicy });
      const crds = manifests.filter((manifest) => manifest.kind === 'CustomResourceDefinition');
      await applyServerSide(client, crds);
      await waitForCrdsEstablished(client, crds.map((manifest) => manifest.metadata.name));
      await applyServerSide(client, manifests.filter((manifest) => manifest.kind !== 'CustomResourceDefinition'));
      for (const manifest of manifests) ctx.stdout.write(`${manifest.kind.toLowerCase()}/${manifest.metadata.name} serverside-applied\n`);
    },
  };
}

/** The API server's minor version (`/version`; `29+` on some distributions). */
async function serverMinor(client: KubeClient): Promise<number> {
  let version: { major?: string; minor?: string; gitVersion?: string };
  try {
    version = await client.get('/version');
  } catch (error) {
    if (error instanceof KubeApiError) throw new ClusterError(`cannot read the server version: ${error.message}`);
    throw error;
  }
  const minor = Number.parseInt(version.minor ?? '', 10);
  if (version.major !== '1' || !Number.isFinite(minor)) throw new ClusterError(`the API server reports version ${version.gitVersion ?? JSON.stringify(version)}, not Kubernetes 1.x`);
  return minor;
}
