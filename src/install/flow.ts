/**
 * `prestage install`'s flow: the objects it renders, and `--apply` against a cluster (CRDs first,
 * the namespace and cache before the agents that name the cache's address, the OpenShift mirror
 * set, `--no-cache`'s deletions), in kubectl's dry-run modes.
 */
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
import { ClusterError } from '../errors.js';
import { RegistryClient } from '../registry/client.js';
import { parseReference } from '../registry/reference.js';
import { AGENT_NAME, CACHE_NAME } from '../api/names.js';
import { applyInMode, dryRunWords, waitForCrdsEstablished, type DryRunMode, type Manifest } from './apply.js';
import { applyCacheMirrorSet, removeCacheMirrorSet, servesMirrorSets } from './cache-mirror-set.js';
import { cacheManifests, cacheMirrorArg, cacheMirrorArgsOf, cacheObjectPaths, cacheTreeArgsOf, HOST_IP_ADDRESS, type CacheOptions } from './cache.js';
import { cacheLeafArg, CACHE_LEAF_LABEL, leafCollections, leafManifests, leafNames, LEAF_SELECTOR } from './cache-leaves.js';
import { leafObjectName } from '../api/cache-tree.js';
import { ADMISSION_POLICY_MIN_MINOR, installManifests, type InstallOptions } from './manifests.js';

/** Where the flow's lines go: results to `out`, warnings to `warn` (both one line, no newline). */
export interface InstallIo {
  out(line: string): void;
  warn(line: string): void;
}

/** The agent's objects as the flags give them (openshift, admission policy and cache address decided by the flow). */
export type AgentInstall = Omit<InstallOptions, 'openshift' | 'admissionPolicy' | 'cacheMirrorArg'> & { readonly namespace: string };

export interface InstallRequest {
  readonly agent: AgentInstall;
  /** --openshift / --no-openshift; undefined: detected from security.openshift.io. */
  readonly openshift?: boolean;
  /** --cache: its options; --no-cache: false (unwire and delete); neither: undefined (keep an earlier one). */
  readonly cache: CacheOptions | false | undefined;
  readonly dryRun: DryRunMode;
}

/** Without --apply: every object, the cache's address taken from the flags. */
export async function renderInstall(agent: AgentInstall, openshift: boolean, cache: CacheOptions | undefined, warn: (line: string) => void): Promise<Manifest[]> {
  if (!cache) return installManifests({ ...agent, openshift });
  const mirrorArg = cache.nodePort !== undefined ? cacheMirrorArg(cache.upstream, HOST_IP_ADDRESS, cache.nodePort) : cacheMirrorArg(cache.upstream, cache.clusterIP as string);
  return [...installManifests({ ...agent, openshift, cacheMirrorArg: mirrorArg }), ...cacheManifests({ ...cache, image: await resolveCacheImage(cache.image, warn) })];
}

/** `install --apply`: server-side apply of everything, in order; with a dry run, nothing changes. */
export async function applyInstall(client: KubeClient, request: InstallRequest, io: InstallIo): Promise<void> {
  const { agent, cache, dryRun } = request;
  const namespace = agent.namespace;
  const minor = await serverMinor(client);
  const admissionPolicy = minor >= ADMISSION_POLICY_MIN_MINOR;
  if (!admissionPolicy) {
    io.warn(
      `Kubernetes 1.${minor} has no node-name claim in pod-bound tokens (1.${ADMISSION_POLICY_MIN_MINOR}+), so the admission policies that keep each agent to its own node's NodePinnedImages and its own Leases are left out: any agent may write any node's status and take the other nodes' Leases`,
    );
  }
  const openshift = request.openshift ?? (await client.find('/apis/security.openshift.io/v1')) !== undefined;
  const agentManifests = installManifests({ ...agent, openshift, admissionPolicy });
  const crds = agentManifests.filter((manifest) => manifest.kind === 'CustomResourceDefinition');
  const lines = await applyInMode(client, crds, dryRun);
  // A dry run created no CRD: there is nothing to wait for.
  if (dryRun === 'none') await waitForCrdsEstablished(client, crds.map((manifest) => manifest.metadata.name));
  let mirrorArg: string | undefined;
  let keptCache = false;
  const treeArgs: string[] = [];
  const cacheLines: string[] = [];
  if (cache) {
    // The namespace first, then the cache; its Service's ClusterIP goes into the agents' flags.
    await applyInMode(client, agentManifests.filter((manifest) => manifest.kind === 'Namespace'), dryRun);
    const cacheList = cacheManifests({ ...cache, image: await resolveCacheImage(cache.image, io.warn) });
    cacheLines.push(...(await applyInMode(client, cacheList, dryRun)));
    if (cache.nodePort !== undefined) mirrorArg = cacheMirrorArg(cache.upstream, HOST_IP_ADDRESS, cache.nodePort);
    // Read once: the agents' flag and, in a tree, each leaf's upstream.
    const rootIP = cache.nodePort === undefined || cache.tree ? await cacheClusterIP(client, namespace, dryRun) : undefined;
    if (cache.nodePort === undefined) mirrorArg = cacheMirrorArg(cache.upstream, rootIP!);
    const tree = cache.tree;
    const wanted = new Set<string>();
    if (tree) {
      // Root first: each leaf proxies the root's ClusterIP; then the agents get each leaf's.
      const nodes = tree.label !== undefined ? ((await client.get<{ items?: Array<{ metadata: { labels?: Record<string, string> } }> }>('/api/v1/nodes', { limit: '1000' })).items ?? []).map((node) => ({ labels: node.metadata.labels ?? {} })) : [];
      const leaves = leafNames(tree, nodes);
      for (const leaf of leaves) {
        cacheLines.push(...(await applyInMode(client, leafManifests({ ...cache, image: imageOf(cacheList) }, tree, leaf, rootIP!), dryRun)));
        wanted.add(leaf);
        treeArgs.push(cacheLeafArg(leaf, await cacheClusterIP(client, namespace, dryRun, leafObjectName(CACHE_NAME, leaf))));
      }
      // The agents refuse a label without leaves: no node carries it, no tree.
      if (tree.label !== undefined && leaves.length > 0) treeArgs.push(`--cache-leaf-label=${tree.label}`);
      if (tree.label !== undefined && leaves.length === 0) io.warn(`no node has the label ${tree.label}: no leaf caches, the nodes pull from the root cache`);
    }
    // A smaller tree (or none): the leaves no longer wanted go.
    cacheLines.push(...(await deleteLeaves(client, namespace, dryRun, wanted)));
  } else if (cache === undefined) {
    // Installing again (a new agent image, say) keeps the cache an earlier `install --cache` set up.
    mirrorArg = await keptCacheMirrorArg(client, namespace, agent.agentArgs ?? []);
    keptCache = mirrorArg !== undefined;
    if (keptCache) treeArgs.push(...(await keptCacheTreeArgs(client, namespace, agent.agentArgs ?? [])));
  }
  const manifests = installManifests({ ...agent, agentArgs: [...(agent.agentArgs ?? []), ...treeArgs], openshift, admissionPolicy, cacheMirrorArg: mirrorArg });
  lines.push(...(await applyInMode(client, manifests.filter((manifest) => manifest.kind !== 'CustomResourceDefinition'), dryRun)), ...cacheLines);
  for (const line of lines) io.out(line);
  if (keptCache) io.out(`agents keep pulling through the cache: ${mirrorArg} (install --no-cache --apply turns it off)`);
  else if (mirrorArg) io.out(`agents pull through the cache: ${mirrorArg}${dryRunWords(dryRun)}`);
  const leafArgs = treeArgs.filter((arg) => arg.startsWith('--cache-leaf='));
  if (leafArgs.length > 0) io.out(`agents pull through ${leafArgs.length} leaf cache${leafArgs.length === 1 ? '' : 's'} first: ${leafArgs.map((arg) => arg.slice('--cache-leaf='.length)).join(', ')}${dryRunWords(dryRun)}`);
  // OpenShift: the MCO wires every node (MCO-pinned ones too) by an ImageDigestMirrorSet; it goes with the cache.
  if (!keptCache && (await servesMirrorSets(client))) {
    const clusterIP = cache && cache.nodePort === undefined ? mirrorArg?.split('=').at(-1) : undefined;
    if (cache && !clusterIP) io.warn(`--cache-node-port: an ImageDigestMirrorSet names one address for every node, so none is written; MCO-pinned nodes pull straight from ${cache.upstream}`);
    const mirrorLines = cache && clusterIP ? await applyCacheMirrorSet(client, cache.upstream, clusterIP, dryRun) : await removeCacheMirrorSet(client, dryRun);
    for (const line of mirrorLines) io.out(line);
  }
  // --no-cache: the nodes are unwired above (the agents remove their drop-in), then the cache itself goes.
  if (cache === false) for (const line of [...(await deleteLeaves(client, namespace, dryRun, new Set())), ...(await deleteCache(client, namespace, dryRun))]) io.out(line);
  if (dryRun !== 'none') io.out(dryRun === 'client' ? 'Dry run (client): nothing sent to the cluster but reads; nothing changed.' : 'Dry run (checked by the API server): nothing changed.');
}

/** The cache Service's ClusterIP; in a dry run the one it has now, or a placeholder for one not there yet. */
async function cacheClusterIP(client: KubeClient, namespace: string, dryRun: DryRunMode, name = CACHE_NAME): Promise<string> {
  const path = `/api/v1/namespaces/${namespace}/services/${name}`;
  const service = dryRun === 'none' ? await client.get<{ spec?: { clusterIP?: string } }>(path) : await client.find<{ spec?: { clusterIP?: string } }>(path);
  const clusterIP = service?.spec?.clusterIP;
  if (dryRun !== 'none' && (!clusterIP || clusterIP === 'None')) return '<cluster IP>';
  if (!clusterIP || clusterIP === 'None') throw new ClusterError(`service ${namespace}/${name} has no ClusterIP`);
  return clusterIP;
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

/** The running DaemonSet's `--cache-leaf`/`--cache-leaf-label` flags, kept with its `--cache-mirror`. */
async function keptCacheTreeArgs(client: KubeClient, namespace: string, agentArgs: readonly string[]): Promise<string[]> {
  const daemonSet = await client.find<Parameters<typeof cacheTreeArgsOf>[0] & KubeObject>(`/apis/apps/v1/namespaces/${namespace}/daemonsets/${AGENT_NAME}`);
  return cacheTreeArgsOf(daemonSet).filter((arg) => !agentArgs.includes(arg));
}

/** The image the root's Deployment runs (resolved once, reused for the leaves). */
function imageOf(manifests: readonly Manifest[]): string {
  const deployment = manifests.find((manifest) => manifest.kind === 'Deployment') as unknown as { spec: { template: { spec: { containers: Array<{ image: string }> } } } };
  return deployment.spec.template.spec.containers[0]!.image;
}

/** Deletes the leaves' objects (by LEAF_SELECTOR) except those of the `keep` leaves. */
async function deleteLeaves(client: KubeClient, namespace: string, dryRun: DryRunMode, keep: ReadonlySet<string>): Promise<string[]> {
  const lines: string[] = [];
  for (const { kind, path } of leafCollections(namespace)) {
    const list = await client.get<{ items?: KubeObject[] }>(path, { labelSelector: LEAF_SELECTOR, limit: '100' });
    for (const item of list.items ?? []) {
      if (keep.has(item.metadata.labels?.[CACHE_LEAF_LABEL] ?? '')) continue;
      try {
        if (dryRun !== 'client') await client.request('DELETE', `${path}/${item.metadata.name}`, { query: { propagationPolicy: 'Foreground', dryRun: dryRun === 'server' ? 'All' : undefined } });
        lines.push(`${kind}/${item.metadata.name} deleted${dryRunWords(dryRun)}`);
      } catch (error) {
        if (!(error instanceof KubeApiError && error.status === 404)) throw error;
      }
    }
  }
  return lines;
}

/** Deletes the cache's objects (its stored blobs go with the PVC; a --cache-host-path directory stays on its node). */
async function deleteCache(client: KubeClient, namespace: string, dryRun: DryRunMode): Promise<string[]> {
  const lines: string[] = [];
  for (const { kind, name, path } of cacheObjectPaths(namespace)) {
    try {
      if (dryRun === 'client') {
        if (!(await client.find(path))) continue;
      } else {
        await client.request('DELETE', path, { query: { propagationPolicy: 'Foreground', dryRun: dryRun === 'server' ? 'All' : undefined } });
      }
      lines.push(`${kind}/${name} deleted${dryRunWords(dryRun)}`);
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

/** `registry:2` → `registry@sha256:...` when its registry answers within a few seconds; else the tag, with a warning. */
async function resolveCacheImage(image: string, warn: (line: string) => void): Promise<string> {
  const ref = parseReference(image);
  if (ref.digest) return image;
  const client = new RegistryClient({ mirrors: [], pullSecrets: [], insecureRegistries: [], retry: { attempts: 1, baseDelayMs: 250, maxDelayMs: 1_000 }, concurrency: 2, stallTimeoutMs: 5_000, connectTimeoutMs: 5_000 });
  try {
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer within 10 s')), 10_000).unref());
    const { digest } = await Promise.race([client.fetchManifest(ref), timeout]);
    return `${image.replace(/:[^:/@]+$/, '')}@${digest}`;
  } catch (error) {
    warn(`cannot resolve --cache-image ${image} to a digest (${(error as Error).message.split('\n')[0]}); the tag is used`);
    return image;
  } finally {
    await Promise.race([client.close(), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]).catch(() => undefined);
  }
}
