/** `prestage install`: render (`-o yaml`) or server-side apply (`--apply`) the agent and its API. */
import type { Argv } from 'yargs';
import { KubeApiError, KubeClient, type KubeObject } from '../kube/client.js';
import { loadKubeconfig } from '../kube/kubeconfig.js';
import { BadInputError, ClusterError } from '../errors.js';
import { applyServerSide, waitForCrdsEstablished } from '../install/apply.js';
import { ADMISSION_POLICY_MIN_MINOR, DEFAULT_IMAGE_STORE, installManifests, renderInstallYaml } from '../install/manifests.js';
import { parseReference } from '../registry/reference.js';
import { findCredential, parsePullSecretFile } from '../registry/credentials.js';
import { RegistryClient } from '../registry/client.js';
import type { Manifest } from '../install/apply.js';
import { applyCacheMirrorSet, removeCacheMirrorSet, servesMirrorSets } from '../install/cache-mirror-set.js';
import { cacheManifests, cacheMirrorArg as cacheMirrorArg_, cacheMirrorArgsOf, cacheObjectPaths, checkCacheOptions, DEFAULT_CACHE_IMAGE, DEFAULT_CACHE_SIZE, DEFAULT_CACHE_UPSTREAM, HOST_IP_ADDRESS, type CacheOptions } from '../install/cache.js';
import { integerAtLeast, linkRate, sizeQuantity } from './flag-values.js';
import type { CommandContext } from './context.js';
import { AGENT_NAME } from '../api/names.js';
import { CACHE_NAME } from '../api/names.js';

export function installCommand(ctx: CommandContext) {
  return {
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
      const agentArgs: string[] = [
        ...args['agent-arg'],
        ...(args['link-rate'] !== undefined ? [`--link-rate=${Math.round(args['link-rate'])}`] : []),
        ...(args['max-pulling-nodes'] !== undefined ? [`--max-pulling-nodes=${args['max-pulling-nodes']}`] : []),
      ];
      const pullSecretNames = checkedPullSecretNames(args['pull-secret-name']);
      const options = { namespace: args.namespace, image, agentArgs, imageStore: args['image-store'], pullSecretNames };
      const cache = args.cache ? cacheOptionsFrom(args) : undefined;
      if (!args.apply) {
        let cacheManifestList: Manifest[] = [];
        let cacheMirrorArg: string | undefined;
        if (cache) {
          if (cache.clusterIP === undefined && cache.nodePort === undefined) {
            throw new BadInputError("--cache without --apply needs the address the nodes reach the cache at: --cache-cluster-ip IP (a free address of the service CIDR) or --cache-node-port PORT; with --apply the Service's ClusterIP is read");
          }
          cacheManifestList = cacheManifests({ ...cache, image: await resolveCacheImage(cache.image, ctx) });
          cacheMirrorArg = cache.nodePort !== undefined ? cacheMirrorArg_(cache.upstream, HOST_IP_ADDRESS, cache.nodePort) : cacheMirrorArg_(cache.upstream, cache.clusterIP as string);
        }
        const manifests = [...installManifests({ ...options, openshift: args.openshift === true, cacheMirrorArg }), ...cacheManifestList];
        ctx.stdout.write(args.output === 'json' ? `${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: manifests }, null, 2)}\n` : renderInstallYaml(manifests));
        return;
      }
      const client = new KubeClient(await loadKubeconfig({ kubeconfig: args.kubeconfig, context: args.context }));
      const minor = await serverMinor(client);
      const admissionPolicy = minor >= ADMISSION_POLICY_MIN_MINOR;
      if (!admissionPolicy) {
        ctx.stderr.write(
          `prestage: warning: Kubernetes 1.${minor} has no node-name claim in pod-bound tokens (1.${ADMISSION_POLICY_MIN_MINOR}+), so the admission policies that keep each agent to its own node's NodePinnedImages and its own Leases are left out: any agent may write any node's status and take the other nodes' Leases\n`,
        );
      }
      const openshift = args.openshift ?? (await client.find('/apis/security.openshift.io/v1')) !== undefined;
      const agentManifests = installManifests({ ...options, openshift, admissionPolicy });
      const crds = agentManifests.filter((manifest) => manifest.kind === 'CustomResourceDefinition');
      await applyServerSide(client, crds);
      await waitForCrdsEstablished(client, crds.map((manifest) => manifest.metadata.name));
      const applied: Manifest[] = [];
      let cacheMirrorArg: string | undefined;
      let keptCache = false;
      if (cache) {
        // The namespace first, then the cache; its Service's ClusterIP goes into the agents' flags.
        const namespaceObject = agentManifests.filter((manifest) => manifest.kind === 'Namespace');
        await applyServerSide(client, namespaceObject);
        const cacheList = cacheManifests({ ...cache, image: await resolveCacheImage(cache.image, ctx) });
        await applyServerSide(client, cacheList);
        applied.push(...cacheList);
        if (cache.nodePort !== undefined) cacheMirrorArg = cacheMirrorArg_(cache.upstream, HOST_IP_ADDRESS, cache.nodePort);
        else {
          const service = await client.get<{ spec?: { clusterIP?: string } }>(`/api/v1/namespaces/${args.namespace}/services/${CACHE_NAME}`);
          const clusterIP = service.spec?.clusterIP;
          if (!clusterIP || clusterIP === 'None') throw new ClusterError(`service ${args.namespace}/${CACHE_NAME} has no ClusterIP`);
          cacheMirrorArg = cacheMirrorArg_(cache.upstream, clusterIP);
        }
      } else if (args.cache === undefined) {
        // Installing again (a new agent image, say) keeps the cache an earlier `install --cache` set up.
        cacheMirrorArg = await keptCacheMirrorArg(client, args.namespace, options.agentArgs);
        keptCache = cacheMirrorArg !== undefined;
      }
      const manifests = installManifests({ ...options, openshift, admissionPolicy, cacheMirrorArg });
      await applyServerSide(client, manifests.filter((manifest) => manifest.kind !== 'CustomResourceDefinition'));
      for (const manifest of [...manifests, ...applied]) ctx.stdout.write(`${manifest.kind.toLowerCase()}/${manifest.metadata.name} serverside-applied\n`);
      if (keptCache) ctx.stdout.write(`agents keep pulling through the cache: ${cacheMirrorArg} (install --no-cache --apply turns it off)\n`);
      else if (cacheMirrorArg) ctx.stdout.write(`agents pull through the cache: ${cacheMirrorArg}\n`);
      // OpenShift: the MCO wires every node (MCO-pinned ones too) by an ImageDigestMirrorSet; it goes with the cache.
      if (!keptCache && (await servesMirrorSets(client))) {
        const clusterIP = cache && cache.nodePort === undefined ? cacheMirrorArg?.split('=').at(-1) : undefined;
        if (cache && !clusterIP) ctx.stderr.write(`prestage: warning: --cache-node-port: an ImageDigestMirrorSet names one address for every node, so none is written; MCO-pinned nodes pull straight from ${cache.upstream}\n`);
        const lines = clusterIP ? await applyCacheMirrorSet(client, cache!.upstream, clusterIP) : await removeCacheMirrorSet(client);
        for (const line of lines) ctx.stdout.write(`${line}\n`);
      }
      // --no-cache: the nodes are unwired above (the agents remove their drop-in), then the cache itself goes.
      if (args.cache === false) for (const line of await deleteCache(client, args.namespace)) ctx.stdout.write(`${line}\n`);
    },
  };
}

/** `--pull-secret-name`: Secret names (DNS subdomains), never the cache's upstream credentials. */
function checkedPullSecretNames(names: readonly string[]): string[] {
  for (const name of names) {
    if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name)) throw new BadInputError(`--pull-secret-name ${name} is not a Secret name (lower-case letters, digits, '-' and '.', at most 253)`);
    if (name === CACHE_NAME) throw new BadInputError(`--pull-secret-name ${name}: that Secret holds the cache's upstream credentials, which only the cache reads; name another Secret`);
  }
  return [...new Set(names)].sort();
}

/**
 * The `--cache-mirror` flag the running DaemonSet has from an earlier `install --cache`, while the
 * cache's Service is still there (its address is the one the flag names); else undefined.
 */
async function keptCacheMirrorArg(client: KubeClient, namespace: string, agentArgs: readonly string[]): Promise<string | undefined> {
  const daemonSet = await client.find<Parameters<typeof cacheMirrorArgsOf>[0] & KubeObject>(`/apis/apps/v1/namespaces/${namespace}/daemonsets/${AGENT_NAME}`);
  const [kept] = cacheMirrorArgsOf(daemonSet).filter((arg) => !agentArgs.includes(arg));
  if (kept === undefined) return undefined;
  return (await client.find(`/api/v1/namespaces/${namespace}/services/${CACHE_NAME}`)) ? kept : undefined;
}

/** Deletes the cache's objects (its stored blobs go with the PVC; a --cache-host-path directory stays on its node). */
async function deleteCache(client: KubeClient, namespace: string): Promise<string[]> {
  const lines: string[] = [];
  for (const { kind, name, path } of cacheObjectPaths(namespace)) {
    try {
      await client.request('DELETE', path, { query: { propagationPolicy: 'Foreground' } });
      lines.push(`${kind}/${name} deleted`);
    } catch (error) {
      if (!(error instanceof KubeApiError && error.status === 404)) throw error;
    }
  }
  return lines;
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

/** The --cache-* flags, checked; credentials read from the pull secret's entry for the upstream (never printed). */
function cacheOptionsFrom(args: any): CacheOptions {
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
  };
  checkCacheOptions(options);
  try {
    parseReference(options.image);
  } catch (error) {
    throw new BadInputError(`--cache-image: ${(error as Error).message}`);
  }
  return options;
}

/** `registry:2` → `registry@sha256:...` when its registry answers within a few seconds; else the tag, with a warning. */
async function resolveCacheImage(image: string, ctx: CommandContext): Promise<string> {
  const ref = parseReference(image);
  if (ref.digest) return image;
  const client = new RegistryClient({ mirrors: [], pullSecrets: [], insecureRegistries: [], retry: { attempts: 1, baseDelayMs: 250, maxDelayMs: 1_000 }, concurrency: 2, stallTimeoutMs: 5_000, connectTimeoutMs: 5_000 });
  try {
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer within 10 s')), 10_000).unref());
    const { digest } = await Promise.race([client.fetchManifest(ref), timeout]);
    return `${image.replace(/:[^:/@]+$/, '')}@${digest}`;
  } catch (error) {
    ctx.stderr.write(`prestage: warning: cannot resolve --cache-image ${image} to a digest (${(error as Error).message.split('\n')[0]}); the tag is used\n`);
    return image;
  } finally {
    await Promise.race([client.close(), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]).catch(() => undefined);
  }
}
