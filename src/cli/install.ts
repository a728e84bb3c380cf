/** `prestage install`: render (`-o yaml`) or server-side apply (`--apply`) the agent and its API. */
import type { Argv } from 'yargs';
import { BadInputError } from '../errors.js';
import { connectCluster } from '../cluster/connect.js';
import { applyInstall, renderInstall } from '../install/flow.js';
import { DEFAULT_IMAGE_STORE, renderInstallYaml } from '../install/manifests.js';
import { parseReference } from '../registry/reference.js';
import { findCredential, parsePullSecretFile } from '../registry/credentials.js';
import { checkCacheOptions, DEFAULT_CACHE_IMAGE, DEFAULT_CACHE_SIZE, DEFAULT_CACHE_UPSTREAM, type CacheOptions } from '../install/cache.js';
import { integerAtLeast, linkRate, sizeQuantity } from './flag-values.js';
import type { CommandContext } from './context.js';
import { CACHE_NAME } from '../api/names.js';
import { DEFAULT_LEAF_LABEL, MAX_CACHE_LEAVES } from '../api/cache-tree.js';
import { checkCacheTree } from '../install/cache-leaves.js';
import type { DryRun } from './dry-run.js';
import { DRY_RUN_MODES } from './dry-run-flag.js';
import { typedCommand } from './typed-command.js';

export function installCommand(ctx: CommandContext) {
  return typedCommand({
    builder: (y: Argv) =>
      y
        .option('image', { type: 'string', describe: 'The agent image the DaemonSet runs (required): build and push it with `prestage image push`' })
        .option('namespace', { alias: 'n', type: 'string', default: 'prestage', describe: 'Namespace of the agent' })
        .option('image-store', { type: 'string', default: DEFAULT_IMAGE_STORE, describe: "CRI-O's storage root (crio.conf `root`), mounted read-only for the disk check" })
        .option('pull-secret-name', {
          type: 'string',
          array: true,
          default: [] as string[],
          describe: "A Secret in the agent's namespace that sets may name in spec.pullSecrets (repeatable): the agent may get these Secrets by name and no other",
        })
        .option('agent-arg', { type: 'string', array: true, default: [] as string[], describe: 'Extra `prestage agent` flag for the DaemonSet (repeatable)' })
        .option('link-rate', { type: 'string', coerce: linkRate('link-rate'), describe: 'Cluster-wide cap on the slow link for every set (bytes: 20MiB/s, 5MB/s; bits: 40Mbit/s, 40Mbps): the agents\' --link-rate, one budget all nodes\' pulls draw on; with --cache it paces the cache warm' })
        .option('max-pulling-nodes', { type: 'number', coerce: integerAtLeast('max-pulling-nodes', 1), describe: 'At most this many nodes pull at once (the agents\' --max-pulling-nodes)' })
        .option('openshift', { type: 'boolean', describe: 'Render the SecurityContextConstraints OpenShift needs (with --apply: detected from security.openshift.io)' })
        .option('output', { alias: 'o', choices: ['yaml', 'json'] as const, default: 'yaml' as const, describe: 'Output format when rendering' })
        .option('apply', { type: 'boolean', default: false, describe: 'Apply server-side (field manager prestage) instead of printing' })
        .option('dry-run', { type: 'string', choices: DRY_RUN_MODES, default: 'none' as DryRun, describe: 'With --apply: client: show what would be applied, send no write; server: the API server checks each write and persists nothing; none: apply. A bare --dry-run is client' })
        .option('cache', {
          type: 'boolean',
          describe:
            'Also an in-cluster pull-through cache of --cache-upstream (distribution registry in proxy mode), and the agents pull through it (--cache-mirror). --no-cache --apply turns it off and deletes it; with neither, --apply keeps a cache an earlier install set up',
        })
        .option('cache-upstream', { type: 'string', default: DEFAULT_CACHE_UPSTREAM, describe: 'The registry host the cache stands in for' })
        .option('cache-image', { type: 'string', default: DEFAULT_CACHE_IMAGE, describe: 'The distribution registry image (resolved to a digest when its registry answers)' })
        .option('cache-size', { type: 'string', default: DEFAULT_CACHE_SIZE, coerce: sizeQuantity('cache-size'), describe: "The cache's PVC size (at least the plan's compressed bytes of the sets it serves): 500Gi, 500G, 1TB, 1.5TiB (G = 10^9, Gi = 2^30)" })
        .option('cache-storage-class', { type: 'string', describe: "The PVC's StorageClass (default: the cluster's default)" })
        .option('cache-host-path', { type: 'string', describe: 'A directory on --cache-node instead of a PVC' })
        .option('cache-node', { type: 'string', describe: 'The node of --cache-host-path (the cache runs there)' })
        .option('cache-pull-secret', { type: 'string', describe: "A pull secret (config.json) whose entry for --cache-upstream becomes the cache's upstream credentials (a Secret)" })
        .option('cache-cluster-ip', { type: 'string', describe: "The cache Service's ClusterIP (needed to render without --apply, which reads the one the Service gets)" })
        .option('cache-node-port', { type: 'number', describe: "Expose the cache on this NodePort and wire each node to its own address (where host-network traffic to ClusterIPs is not proxied)" })
        .option('cache-leaves', { type: 'number', describe: `With --cache --apply: N leaf caches (leaf-0..), each a cache of the root; the agents hash nodes over them (1..${MAX_CACHE_LEAVES})` })
        .option('cache-leaf-label', { type: 'string', describe: `With --cache --apply: one leaf cache per value of this node label (e.g. ${DEFAULT_LEAF_LABEL}) on the nodes with that value; nodes without it pull from the root` })
        .option('cache-leaf-size', { type: 'string', coerce: sizeQuantity('cache-leaf-size'), describe: "Each leaf's PVC size (default: --cache-size)" })
        .option('cache-leaf-host-path', { type: 'string', describe: "A directory on the node each leaf runs on, instead of a PVC" })
        .option('kubeconfig', { type: 'string', describe: 'Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)' })
        .option('context', { type: 'string', describe: 'Kubeconfig context (default: its current-context)' }),
    handler: async (args) => {
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
      const agentArgs: string[] = [
        ...args['agent-arg'],
        ...(args['link-rate'] !== undefined ? [`--link-rate=${Math.round(args['link-rate'])}`] : []),
        ...(args['max-pulling-nodes'] !== undefined ? [`--max-pulling-nodes=${args['max-pulling-nodes']}`] : []),
      ];
      const pullSecretNames = checkedPullSecretNames(args['pull-secret-name']);
      const agent = { namespace: args.namespace, image, agentArgs, imageStore: args['image-store'], pullSecretNames };
      const cache = args.cache ? cacheOptionsFrom(args) : undefined;
      if (!args.cache && [args['cache-leaves'], args['cache-leaf-label'], args['cache-leaf-size'], args['cache-leaf-host-path']].some((value) => value !== undefined)) throw new BadInputError('--cache-leaves, --cache-leaf-label, --cache-leaf-size and --cache-leaf-host-path go with --cache');
      if (cache?.tree && !args.apply) throw new BadInputError("--cache-leaves and --cache-leaf-label need --apply: the leaves' and the root's ClusterIPs are read from their Services");
      const warn = (line: string) => ctx.stderr.write(`prestage: warning: ${line}\n`);
      if (!args.apply) {
        if (args['dry-run'] !== 'none') throw new BadInputError(`--dry-run=${args['dry-run']} goes with --apply; without it install only prints and changes nothing`);
        if (cache && cache.clusterIP === undefined && cache.nodePort === undefined) {
          throw new BadInputError("--cache without --apply needs the address the nodes reach the cache at: --cache-cluster-ip IP (a free address of the service CIDR) or --cache-node-port PORT; with --apply the Service's ClusterIP is read");
        }
        const manifests = await renderInstall(agent, args.openshift === true, cache, warn);
        ctx.stdout.write(args.output === 'json' ? `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: manifests }, null, 2)}\n` : renderInstallYaml(manifests));
        return;
      }
      const client = await connectCluster({ kubeconfig: args.kubeconfig, context: args.context });
      await applyInstall(client, { agent, openshift: args.openshift, cache: args.cache === false ? false : cache, dryRun: args['dry-run'] }, { out: (line) => ctx.stdout.write(`${line}\n`), warn });
    },
  });
}

/** `--pull-secret-name`: Secret names (DNS subdomains), never the cache's upstream credentials. */
function checkedPullSecretNames(names: readonly string[]): string[] {
  for (const name of names) {
    if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name)) throw new BadInputError(`--pull-secret-name ${name} is not a Secret name (lower-case letters, digits, '-' and '.', at most 253)`);
    if (name === CACHE_NAME) throw new BadInputError(`--pull-secret-name ${name}: that Secret holds the cache's upstream credentials, which only the cache reads; name another Secret`);
  }
  return [...new Set(names)].sort();
}

/** The --cache-* flags (and --namespace) as the builder gives them. */
interface CacheFlags {
  readonly namespace: string;
  readonly 'cache-upstream': string;
  readonly 'cache-image': string;
  readonly 'cache-size': string;
  readonly 'cache-storage-class'?: string | undefined;
  readonly 'cache-host-path'?: string | undefined;
  readonly 'cache-node'?: string | undefined;
  readonly 'cache-pull-secret'?: string | undefined;
  readonly 'cache-cluster-ip'?: string | undefined;
  readonly 'cache-node-port'?: number | undefined;
  readonly 'cache-leaves'?: number | undefined;
  readonly 'cache-leaf-label'?: string | undefined;
  readonly 'cache-leaf-size'?: string | undefined;
  readonly 'cache-leaf-host-path'?: string | undefined;
}

/** The --cache-* flags, checked; credentials read from the pull secret's entry for the upstream (never printed). */
function cacheOptionsFrom(args: CacheFlags): CacheOptions {
  const upstream: string = args['cache-upstream'];
  let credentials: CacheOptions['credentials'];
  if (args['cache-pull-secret'] !== undefined) {
    const secret = parsePullSecretFile(args['cache-pull-secret']);
    const found = findCredential([secret], upstream, '');
    if (!found?.username || !found.password) throw new BadInputError(`--cache-pull-secret ${args['cache-pull-secret']} has no username and password for ${upstream}: add an auths entry for it, or leave the flag out for an anonymous upstream`);
    credentials = { username: found.username, password: found.password };
  }
  const options: CacheOptions = {
    namespace: args.namespace,
    upstream,
    image: args['cache-image'],
    size: args['cache-size'],
    storageClass: args['cache-storage-class'],
    hostPath: args['cache-host-path'],
    node: args['cache-node'],
    credentials,
    clusterIP: args['cache-cluster-ip'],
    nodePort: args['cache-node-port'],
    ...(args['cache-leaves'] !== undefined || args['cache-leaf-label'] !== undefined
      ? {
          tree: {
            ...(args['cache-leaves'] !== undefined ? { leaves: args['cache-leaves'] } : {}),
            ...(args['cache-leaf-label'] !== undefined ? { label: args['cache-leaf-label'] } : {}),
            size: args['cache-leaf-size'] ?? args['cache-size'],
            ...(args['cache-leaf-host-path'] !== undefined ? { hostPath: args['cache-leaf-host-path'] } : {}),
          },
        }
      : {}),
  };
  checkCacheOptions(options);
  if (options.tree) checkCacheTree(options.tree);
  try {
    parseReference(options.image);
  } catch (error) {
    throw new BadInputError(`--cache-image: ${(error as Error).message}`);
  }
  return options;
}
