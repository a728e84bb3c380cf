/**
 * `--to VERSION` over several hops: where the update graph is read (`--graph`, else the
 * cluster's ClusterVersion spec.upstream), from which release (`--from`, else the one the
 * cluster runs) and in which channel; the path is chosen by src/graph/ and handed on as a list of
 * releases. A `--to` the cluster offers itself (status.availableUpdates) stays one hop, as the
 * CVO would take it, without reading any graph.
 */
import type { Argv } from 'yargs';
import semver from 'semver';
import { BadInputError } from '../errors.js';
import type { PathInput } from '../plan/path-plan.js';
import { releaseToPlan, type ToFlags } from './plan-options.js';
import { transportOptionsFrom, type RegistryFlags } from './registry-options.js';
import { readImageSetConfiguration } from '../config/image-set-config.js';

/** The CVO's upstream when none is named (graph/read.ts RED_HAT_UPDATE_SERVICE, not loaded until a graph is read). */
const RED_HAT_GRAPH = 'https://api.openshift.com/api/upgrades_info/v1/graph';

export interface PathFlags extends ToFlags {
  from?: string;
  channel?: string;
  graph?: string;
  'control-plane-only-update': boolean;
  arch: string;
}

const releaseVersion = (value: string | undefined) => {
  if (value !== undefined && !semver.valid(value)) throw new BadInputError(`--from ${value}: not a release version; name one such as 4.16.3`);
  return value;
};

export function withPathOptions<T>(y: Argv<T>): Argv<T & PathFlags> {
  return y
    .option('from', { type: 'string', coerce: releaseVersion, describe: 'With --to: the release the path starts from [default: the one the cluster runs]' })
    .option('channel', { type: 'string', describe: 'With --to: the update channel whose graph the path follows [default: the cluster\'s spec.channel when it holds --to, else stable-MAJOR.MINOR of --to]' })
    .option('graph', { type: 'string', describe: 'With --to: the update graph, an update service URL (…/api/upgrades_info/v1/graph, asked as the CVO asks it) or a file of its JSON [default: the cluster\'s ClusterVersion spec.upstream]' })
    .option('control-plane-only-update', { type: 'boolean', default: false, describe: 'With --to: a Control Plane Only update (even minor to the next even one, worker pools paused until the last hop): workers get no node OS of the hops before it' })
    .check((argv) => {
      const needsTo = ['from', 'channel', 'graph'].filter((flag) => argv[flag] !== undefined);
      if (argv['control-plane-only-update']) needsTo.push('control-plane-only-update');
      // A config's platform channel names the path's end instead.
      if (needsTo.length > 0 && argv['to'] === undefined && argv['config'] === undefined) throw new BadInputError(`--${needsTo[0]} plans a path to a release: add --to VERSION`);
      return true;
    }) as unknown as Argv<T & PathFlags>;
}

/** What to plan: one release (a pullspec), or a path of several hops. */
export type PlanTarget = { readonly release: string } | { readonly path: PathInput };

/**
 * The release or the path `flags` name; `warn` gets each risk taken and each note on the graph.
 * A path of one hop is that hop's release.
 */
export async function targetToPlan(flags: PathFlags & RegistryFlags & { config?: string }, warn: (line: string) => void): Promise<PlanTarget> {
  if (flags.to === undefined && flags.release === undefined && flags.config !== undefined) return targetToPlan({ ...flags, ...pathFromConfig(flags.config, flags.graph), config: undefined }, warn);
  const graphWanted = flags.from !== undefined || flags.graph !== undefined || flags['control-plane-only-update'] || flags.channel !== undefined;
  if (flags.to === undefined || !graphWanted) {
    try {
      return { release: await releaseToPlan(flags, warn) };
    } catch (error) {
      if (flags.to === undefined || !(error instanceof BadInputError) || !error.message.includes('not an update this cluster offers')) throw error;
      // Not one hop away: a path over the graph the cluster's CVO reads, when it names one.
      const cluster = await clusterUpdateSource(flags);
      if (!cluster.upstream) throw new BadInputError(`${error.message}; for a path of several hops name the update graph with --graph (Red Hat's: https://api.openshift.com/api/upgrades_info/v1/graph), as ClusterVersion spec.upstream is empty`);
      return pathTarget(flags, cluster, warn);
    }
  }
  const cluster = flags.from === undefined || flags.graph === undefined ? await clusterUpdateSource(flags) : {};
  return pathTarget(flags, cluster, warn);
}

interface UpdateSource {
  readonly version?: string;
  readonly channel?: string;
  readonly upstream?: string;
}

/** What the cluster's CVO asks its update service: its version, channel and upstream. */
async function clusterUpdateSource(flags: ToFlags): Promise<UpdateSource> {
  const [{ connectCluster }, { readClusterVersion }] = await Promise.all([import('../cluster/connect.js'), import('../cluster/live-cluster.js')]);
  const cv = await readClusterVersion(await connectCluster(flags), '--to');
  const version = cv.status?.desired?.version;
  return { ...(version ? { version } : {}), ...(cv.spec?.channel ? { channel: cv.spec.channel } : {}), ...(cv.spec?.upstream ? { upstream: cv.spec.upstream } : {}) };
}

async function pathTarget(flags: PathFlags & RegistryFlags, cluster: UpdateSource, warn: (line: string) => void): Promise<PlanTarget> {
  const to = flags.to!;
  const from = flags.from ?? cluster.version;
  if (!from) throw new BadInputError('--to: the cluster\'s ClusterVersion names no desired version to start the path from; pass --from VERSION');
  const where = flags.graph ?? cluster.upstream;
  if (!where) throw new BadInputError('--to: no update graph to follow: pass --graph URL|FILE (Red Hat\'s: https://api.openshift.com/api/upgrades_info/v1/graph), or --kubeconfig of a cluster whose ClusterVersion names spec.upstream');
  const channel = flags.channel ?? channelFor(to, cluster.channel, warn);
  // The update service's own channel grammar; the name also becomes a file in a path's bundle.
  if (!/^[0-9a-z][0-9a-z.-]*$/.test(channel)) throw new BadInputError(`channel ${JSON.stringify(channel)}: not a channel name (lower-case letters, digits, '.', '-'), such as stable-4.18`);
  const [{ readGraph, graphArch }, { choosePath, pathRiskLines }, { registryDispatcher }] = await Promise.all([import('../graph/read.js'), import('../graph/path.js'), import('../registry/transport.js')]);
  const dispatcher = registryDispatcher(transportOptionsFrom(flags, undefined, warn));
  let graph;
  try {
    graph = await readGraph(where, { channel, arch: graphArch(flags.arch), version: from }, dispatcher);
  } finally {
    await dispatcher.destroy();
  }
  const path = choosePath(graph, { from, to, allowNotRecommended: flags['allow-not-recommended'], controlPlaneOnly: flags['control-plane-only-update'] });
  for (const line of pathRiskLines(path)) warn(line);
  if (path.hops.length === 1 && !path.controlPlaneOnly) return { release: path.hops[0]!.to.payload };
  return {
    path: {
      from: path.from,
      to: path.to,
      ...(path.channel !== undefined ? { channel: path.channel } : {}),
      graph: path.source,
      controlPlaneOnly: path.controlPlaneOnly,
      hops: path.hops.map((hop) => ({ from: hop.from.version, to: hop.to.version, pullSpec: hop.to.payload, risks: hop.risks.map((r) => ({ name: r.name, message: r.message, ...(r.url ? { url: r.url } : {}) })), why: hop.why })),
      refused: path.refused,
      equallyShort: path.equallyShort,
      notes: path.notes,
    },
  };
}

/** The cluster's channel when it is of --to's minor or later, else stable-MAJOR.MINOR of --to (said once). */
function channelFor(to: string, clusterChannel: string | undefined, warn: (line: string) => void): string {
  const minor = `${semver.major(to)}.${semver.minor(to)}`;
  const held = clusterChannel && /-(\d+\.\d+)$/.exec(clusterChannel)?.[1];
  if (clusterChannel && held && semver.gte(`${held}.0`, `${minor}.0`)) return clusterChannel;
  const channel = `stable-${minor}`;
  warn(`following channel ${channel}${clusterChannel ? ` (the cluster's ${clusterChannel} holds no ${minor} release)` : ''}; --channel names another (eus-${minor} for a Control Plane Only update)`);
  return channel;
}

/**
 * The path an ImageSetConfiguration names: its platform channel with shortestPath, from
 * minVersion to maxVersion (oc-mirror's meaning), over the graph --graph names, else
 * UPDATE_URL_OVERRIDE as oc-mirror reads it, else Red Hat's.
 */
function pathFromConfig(file: string, graph: string | undefined): Pick<PathFlags, 'from' | 'to' | 'channel' | 'graph'> {
  const channels = readImageSetConfiguration(file).platform?.channels ?? [];
  const at = (i: number) => `--config ${file}: mirror.platform.channels[${i}]`;
  if (channels.length === 0) throw new BadInputError(`--config ${file}: no mirror.platform.channels and no release named; name the release as SOURCE or --to VERSION, or add a channel with minVersion, maxVersion and shortestPath: true`);
  if (channels.length > 1) throw new BadInputError(`--config ${file}: ${channels.length} platform channels; prestage carries one upgrade path: keep the channel of the path (e.g. eus-4.18 with minVersion and maxVersion)`);
  const channel = channels[0]!;
  if (channel.type !== 'ocp') throw new BadInputError(`${at(0)}: type ${channel.type}: prestage plans OpenShift (ocp) releases`);
  if (!channel.minVersion || !channel.maxVersion) throw new BadInputError(`${at(0)} (${channel.name}): name minVersion (the release the cluster runs) and maxVersion (the target)`);
  if (!channel.shortestPath || channel.full) throw new BadInputError(`${at(0)} (${channel.name}): without shortestPath: true oc-mirror carries every release from ${channel.minVersion} to ${channel.maxVersion}; prestage carries the path the cluster takes: set shortestPath: true`);
  return { from: channel.minVersion, to: channel.maxVersion, channel: channel.name, graph: graph ?? (process.env['UPDATE_URL_OVERRIDE'] || RED_HAT_GRAPH) };
}
