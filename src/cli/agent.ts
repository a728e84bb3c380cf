/**
 * `prestage agent`: the per-node daemon (run by the DaemonSet `prestage install` renders).
 * JSON logs on stderr, `/metrics` and `/healthz` on one port, until SIGTERM.
 */
import { readFileSync, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Logger } from 'pino';
import type { Argv } from 'yargs';
import { ConfigLock, CrioRuntime, DEFAULT_CRIO_SOCKET, lockedReload, reloadCrioFoundInProc, reloadWithSignal, reloadWithSystemctl, type CrioReload } from '../agent/crio.js';
import { serveAgentHttp } from '../agent/http.js';
import { RegistryImageSizes } from '../agent/image-sizes.js';
import { CACHE_DROP_IN_NAME, leafOf, parseCacheMirrors, syncCacheDropIn } from '../agent/cache-mirror.js';
import { chooseLeaf, DEFAULT_LEAF_LABEL, parseCacheLeaves } from '../api/cache-tree.js';
import { KubeAgentCluster } from '../agent/kube.js';
import { AgentMetrics } from '../agent/metrics.js';
import { cachedImages, LeaseCacheWarmer, TreeCacheWarmer } from '../agent/cache-warm.js';
import { LeasePacer } from '../agent/pacing.js';
import { runSetStatusWriter } from '../agent/set-status-writer.js';
import { NodeAgent } from '../agent/reconcile.js';
import { QuietCollector } from '../agent/quiet-collector.js';
import { connectCluster } from '../cluster/connect.js';
import { BadInputError, ClusterError, ExitCode, PrestageError } from '../errors.js';
import { createLogger, type LogLevel } from '../telemetry/log.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { integerAtLeast, linkRate, listenAddress, positiveSeconds, sizeAtLeast } from './flag-values.js';
import { LeaseLinkLedger } from '../agent/link-share.js';
import { LinkRelay } from '../agent/link-relay.js';
import { parseReference } from '../registry/reference.js';
import { LINK_RATE_ANNOTATION } from '../api/staging.js';
import { cacheLeafWarmPrefix, DEFAULT_PIN_DROP_IN } from '../api/names.js';
import { DEFAULT_REGISTRIES_CONF, DEFAULT_REGISTRIES_CONF_DIR } from '../api/names.js';

/** `agent --once`: a set failed on this node. Exit 1, as `wait` does. */
export class SetsFailedError extends PrestageError {
  readonly exitCode = ExitCode.failed;
}

export const DEFAULT_PULL_SECRET = '/var/lib/kubelet/config.json';
/** Quiet this long after a pass before the idle collection (a pass's follow-ups come within a second or two). */
const QUIET_COLLECT_MS = 5_000;

/** How long a leaf's warm waits for a leaf that does not answer: the root behind it holds everything. */
const LEAF_UNREACHABLE_RETRY_MS = 10_000;

export function agentCommand(ctx: CommandContext) {
  return typedCommand({
    builder: (y: Argv) =>
      y
        .option('node-name', { type: 'string', default: process.env.NODE_NAME, describe: 'This node (default: $NODE_NAME)' })
        .option('kubeconfig', { type: 'string', describe: 'Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)' })
        .option('cri-socket', { type: 'string', default: DEFAULT_CRIO_SOCKET, describe: "CRI-O's socket" })
        .option('drop-in', { type: 'string', default: DEFAULT_PIN_DROP_IN, describe: 'The pinned_images drop-in the agent owns' })
        .option('reload', {
          type: 'string',
          default: 'sighup',
          describe:
            'How to reload CRI-O: sighup (SIGHUP to the crio process in /proc that reads the --drop-in directory; needs hostPID) | systemctl (nsenter -t 1 -m systemctl reload crio) | pidfile:<path> | pid:<pid> (goes stale when CRI-O restarts)',
        })
        .option('pull-secret', { type: 'string', default: DEFAULT_PULL_SECRET, describe: "The node's pull secret (kubelet config.json format)" })
        .option('registries-conf', { type: 'string', default: DEFAULT_REGISTRIES_CONF, describe: "CRI-O's registries.conf: where image sizes are read (mirrors first); a missing file = no mirrors" })
        .option('registries-conf-dir', { type: 'string', default: DEFAULT_REGISTRIES_CONF_DIR, describe: 'Its drop-in directory (*.conf, in name order)' })
        .option('cache-mirror', {
          type: 'string',
          array: true,
          default: [] as string[],
          describe: `SOURCE=HOST[:PORT][/PREFIX] (repeatable): pull SOURCE's images by digest through this plain-HTTP pull-through cache first, then as before; written to --registries-conf-dir/${CACHE_DROP_IN_NAME} (removed without the flag), CRI-O reloaded. Before pulls, one node at a time fills the cache with them (Lease prestage-cache-warm-0), then every node pulls from it. Image sizes are still read without it`,
        })
        .option('cache-leaf', {
          type: 'string',
          array: true,
          default: [] as string[],
          describe: "NAME=HOST[:PORT] (repeatable): a leaf of the cache tree, a plain-HTTP pull-through cache of --cache-mirror's cache. The node's leaf is asked first, then that root cache, then as before; before pulls the root is warmed, then the leaf from it (Lease prestage-cache-warm-leaf-<i>-0). The node's leaf: the one named by its --cache-leaf-label value, or by rendezvous hashing of the node's name",
        })
        .option('cache-leaf-label', { type: 'string', describe: `The Node label whose value names the node's leaf (e.g. ${DEFAULT_LEAF_LABEL}); a node without it, or whose value names no leaf, pulls from the root` })
        .option('concurrency', { type: 'number', default: 5, coerce: integerAtLeast('concurrency', 1), describe: 'Parallel pulls on a worker node' })
        .option('control-plane-concurrency', { type: 'number', default: 1, coerce: integerAtLeast('control-plane-concurrency', 1), describe: 'Parallel pulls on a control-plane node' })
        .option('reserve', { type: 'string', default: '16Gi', coerce: sizeAtLeast('reserve', 0), describe: 'Image filesystem space pre-loading leaves free, a size: 16Gi, 20G, 100GB, 1.5TiB, plain bytes (G = 10^9, Gi = 2^30)' })
        .option('min-throughput', { type: 'string', default: '1Mi', coerce: linkRate('min-throughput'), describe: 'Rate below which a pull of known size is stalled: bytes/s (1Mi, 1MiB/s, 1MB/s) or bits written with a b (8Mbit/s, 8Mbps)' })
        .option('permanent-failure-backoff', { type: 'string', default: 600, coerce: positiveSeconds('permanent-failure-backoff'), describe: 'How long (90s, 10m; bare: seconds) an image that failed permanently (ENOSPC, not found, denied) rests' })
        .option('resync', { type: 'string', default: 60, coerce: positiveSeconds('resync'), describe: 'Time (60s, 5m; bare: seconds) between full re-checks (drift repair, retries)' })
        .option('stall-timeout', {
          type: 'string',
          default: 300,
          coerce: positiveSeconds('stall-timeout'),
          describe: '/healthz answers 503 after this long (300s, 5m; bare: seconds) without progress (a pull attempt ended, a status written, a pass done); a pull within its own timeout counts as progress',
        })
        .option('max-pulling-nodes', { type: 'number', default: 0, coerce: integerAtLeast('max-pulling-nodes', 0), describe: 'Cluster-wide: at most this many nodes pull at once, via Leases (0: no limit)' })
        .option('link-rate', {
          type: 'string',
          coerce: linkRate('link-rate'),
          describe: `Cluster-wide cap on the slow link (bytes: 20MiB/s, 5MB/s; bits: 40Mbit/s, 40Mbps), for every set (a set's ${LINK_RATE_ANNOTATION} annotation may lower it): every node's pulls over the link draw on one budget (Lease prestage-link), at most the cap over any 5 s; with --cache-mirror the cap paces the cache warm, where bytes cross the link`,
        })
        .option('link-relay', {
          type: 'string',
          coerce: listenAddress('link-relay'),
          describe: `HOST:PORT to listen on (0: any port): under a cap CRI-O pulls through the agent (a digest-only mirror in --registries-conf-dir/${CACHE_DROP_IN_NAME}), which asks for each byte over the link only once the cap has room for it; without it a pull is charged whole before it starts and crosses at the link's speed`,
        })
        .option('link-relay-advertise', { type: 'string', default: process.env.POD_IP, describe: 'The address CRI-O dials for the relay (default: $POD_IP, else the --link-relay host)' })
        .option('namespace', {
          alias: 'lease-namespace',
          type: 'string',
          default: process.env.POD_NAMESPACE ?? 'prestage',
          describe: "The agent's namespace: its pull-slot Leases, and the Secrets sets name in spec.pullSecrets (default: $POD_NAMESPACE)",
        })
        .option('port', { type: 'number', default: 9464, coerce: integerAtLeast('port', 0), describe: 'Port for /metrics and /healthz (0: any)' })
        .option('once', { type: 'boolean', default: false, describe: 'One reconcile pass, then exit (1 if a set failed)' })
        .option('set-status', { type: 'boolean', default: true, describe: "Stand for the Lease prestage-set-status-0: its holder writes every PinnedImageSet's Ready/Reconciling/Stalled" }),
    handler: async (args) => {
      const nodeName: string | undefined = args['node-name'];
      if (!nodeName) throw new BadInputError('no node name: pass --node-name or set NODE_NAME (the DaemonSet sets it from spec.nodeName)');
      const level = (args['log-level'] === 'warn' ? 'info' : args['log-level']) as LogLevel;
      const log = createLogger(level, ctx.stderr).child({ node: nodeName });
      const cacheMirrors = parseCacheMirrors(args['cache-mirror']);
      // The cache tree: sorted by name, so every agent numbers the leaves' warm Leases alike.
      const cacheLeaves = parseCacheLeaves(args['cache-leaf']).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      if (cacheLeaves.length > 0 && cacheMirrors.length === 0) throw new BadInputError('--cache-leaf needs --cache-mirror: a leaf is a pull-through cache of the root cache --cache-mirror names');
      const leafLabel: string | undefined = args['cache-leaf-label'];
      if (leafLabel !== undefined && cacheLeaves.length === 0) throw new BadInputError('--cache-leaf-label needs --cache-leaf: the leaves whose names its values are');
      // Hash mode needs only the node's name; label mode its labels, known once the Node is read (until then: the root).
      let nodeLabels: () => Readonly<Record<string, string>> | undefined = () => undefined;
      const myLeaf = () => chooseLeaf({ name: nodeName, labels: nodeLabels() ?? {} }, cacheLeaves, leafLabel);
      const treeMirrors = () => {
        const leaf = myLeaf();
        return leaf ? cacheMirrors.map((mirror) => ({ ...mirror, leaf: leaf.location })) : cacheMirrors;
      };
      const metrics = new AgentMetrics();
      // The pin drop-in is staged in the directory CRI-O scans: no reload of ours while it is written.
      const configLock = new ConfigLock();
      const reload = lockedReload(configLock, reloadFrom(args.reload, dirname(args['drop-in'])));
      const runtime = await CrioRuntime.connect({ socketPath: args['cri-socket'], dropInPath: args['drop-in'], reload, lock: configLock });
      // Before any pull: the node's registries as the flags say (the cache first, or no cache drop-in). Again at
      // every resync: the MCO rewrites registries.conf when mirror sets change, and the carried entries must follow.
      let lastCacheError: string | undefined;
      // Repositories pulled past the cache while an image of theirs, which the cache served corrupt, is pulled again.
      const bypassed = new Map<string, number>();
      // Under a cap without a cache, CRI-O pulls the registries of capped images through the link relay (same drop-in).
      const relayLog = log.child({ component: 'link-relay' });
      let relay: LinkRelay | undefined;
      const relaySources = new Set<string>();
      const syncCache = async (first: boolean): Promise<void> => {
        try {
          const mirrors = cacheMirrors.length > 0 ? treeMirrors() : relay ? relay.mirrors([...relaySources]) : [];
          const { change, path } = await syncCacheDropIn({ registriesConf: args['registries-conf'], registriesConfDir: args['registries-conf-dir'], mirrors, bypass: [...bypassed.keys()], reload });
          lastCacheError = undefined;
          if (change !== 'unchanged' || (first && cacheMirrors.length > 0)) {
            log.info({ change, path, mirrors: mirrors.map((m) => `${m.source}=${m.location.replace(/\/[0-9a-f]{32}\//, '/***/')}`), ...(cacheLeaves.length > 0 ? { leaf: myLeaf()?.name ?? null } : {}) }, change === 'removed' ? 'cache drop-in removed, CRI-O reloaded' : change === 'written' ? 'cache drop-in written, CRI-O reloaded' : 'cache drop-in in place');
          }
        } catch (error) {
          // The direct path still works: pull without the cache rather than not at all. Said once per distinct error.
          const message = (error as Error).message;
          if (message !== lastCacheError) log.error({ err: message }, 'cannot bring the cache drop-in in line with --cache-mirror; pulls go where the node pulled before');
          lastCacheError = message;
        }
      };
      await syncCache(true);
      const cacheResync = setInterval(() => void syncCache(false), args.resync * 1000);
      cacheResync.unref();
      const imageSizes = new RegistryImageSizes({ registriesConf: args['registries-conf'], registriesConfDir: args['registries-conf-dir'], log });
      let agent: NodeAgent | undefined;
      const client = await connectCluster({ kubeconfig: args.kubeconfig });
      // Under a link cap, every node's pulls over the link are charged on one Lease.
      const ledger = new LeaseLinkLedger(client, { namespace: args.namespace, holder: nodeName, log });
      if (args['link-relay'] && cacheMirrors.length === 0) {
        relay = new LinkRelay({ listen: args['link-relay'], ...(args['link-relay-advertise'] ? { advertise: args['link-relay-advertise'] } : {}), registriesConf: args['registries-conf'], registriesConfDir: args['registries-conf-dir'], ledger, log: relayLog });
        await relay.start();
      }
      const linkRelay = relay && {
        wire: async (images: readonly string[]) => {
          const before = relaySources.size;
          for (const image of images) relaySources.add(registryOf(image));
          if (relaySources.size !== before) await syncCache(false);
          return lastCacheError === undefined;
        },
        open: relay.open.bind(relay),
      };
      // With --once the one pass below is the only one: informer events must not start another beside it.
      const cluster = new KubeAgentCluster(
        client,
        nodeName,
        log,
        () => {
          if (!args.once) agent?.trigger();
        },
        args.namespace,
        // A `prestage verify` request: a CRI check of the requested sets, answered in the status.
        () => {
          if (!args.once) void agent?.verify();
        },
      );
      nodeLabels = () => cluster.nodeLabels();
      const slots: number = args['max-pulling-nodes'];
      const pacer = slots > 0 ? new LeasePacer(client, { namespace: args.namespace, slots, holder: nodeName, log }) : undefined;
      // Through a cache: one node fills it, then all pull from it (each blob crosses the link once).
      // A tree: the root, then the node's leaf (each leaf a warm Lease of its own, warmed from the root).
      const rootWarmer = cacheMirrors.length > 0 ? new LeaseCacheWarmer(client, { namespace: args.namespace, holder: nodeName, mirrors: cacheMirrors, log, ...(cacheLeaves.length > 0 ? { cache: 'root' } : {}) }) : undefined;
      const leafWarmers = new Map(
        cacheLeaves.map((leaf, index) => [
          leaf.name,
          new LeaseCacheWarmer(client, {
            namespace: args.namespace,
            holder: nodeName,
            mirrors: cacheMirrors.map(({ source, location }) => ({ source, location: leafOf(location, leaf.location)! })),
            log,
            leasePrefix: cacheLeafWarmPrefix(index),
            cache: `leaf ${leaf.name}`,
            // The root holds it all: a leaf that does not answer is not waited for long.
            unreachableRetryMs: LEAF_UNREACHABLE_RETRY_MS,
          }),
        ]),
      );
      const cacheWarmer = rootWarmer && cacheLeaves.length > 0 ? new TreeCacheWarmer(rootWarmer, () => leafWarmers.get(myLeaf()?.name ?? ''), [...leafWarmers.values()]) : rootWarmer;
      agent = new NodeAgent({
        nodeName,
        runtime,
        cluster,
        log,
        metrics,
        concurrency: args.concurrency,
        controlPlaneConcurrency: args['control-plane-concurrency'],
        reserveBytes: args.reserve,
        ...(cacheMirrors.length > 0
          ? {
              cacheRoute: () => {
                const leaf = myLeaf();
                const root = cacheMirrors[0]!.location;
                return { ...(leaf ? { leaf: leaf.name } : {}), locations: [...(leaf ? [leafOf(root, leaf.location)!] : []), root] };
              },
            }
          : {}),
        minThroughputBytesPerSecond: args['min-throughput'],
        pullSecretPath: args['pull-secret'],
        imageSizes,
        resyncMs: args.resync * 1000,
        stallMs: args['stall-timeout'] * 1000,
        quietCollector: new QuietCollector({ afterMs: QUIET_COLLECT_MS }),
        permanentFailureBackoffMs: args['permanent-failure-backoff'] * 1000,
        pacer,
        linkLedger: ledger,
        ...(linkRelay ? { linkRelay } : {}),
        ...(args['link-rate'] ? { linkRate: args['link-rate'] } : {}),
        servedByCache: (image) => cachedImages([image], cacheMirrors).length > 0,
        cacheWarmer,
        bypassCache: async (image, error) => {
          const [ref] = cachedImages([image], cacheMirrors);
          if (!ref) return undefined;
          const repository = `${ref.registry}/${ref.repository}`;
          bypassed.set(repository, (bypassed.get(repository) ?? 0) + 1);
          log.warn({ image, repository, err: error }, 'the cache served a corrupt blob: pulling the image again past the cache');
          await syncCache(false);
          const ended = async () => {
            const left = (bypassed.get(repository) ?? 1) - 1;
            if (left > 0) bypassed.set(repository, left);
            else bypassed.delete(repository);
            await syncCache(false);
          };
          if (lastCacheError === undefined) return ended;
          await ended();
          return undefined;
        },
      });
      try {
        await cluster.start();
        if (args.once) {
          await untilLoaded(cluster, log, ONCE_LOAD_TIMEOUT_MS);
          if (leafLabel !== undefined) await syncCache(false);
          const status = await agent.reconcile();
          const failed = status.pinnedImageSets?.filter((set) => set.lastFailedGeneration === set.desiredGeneration) ?? [];
          for (const set of failed) log.error({ set: set.name, err: set.lastFailedGenerationError }, 'set failed');
          if (failed.length > 0) throw new SetsFailedError(`${failed.length} pinned image sets failed on ${nodeName}: ${failed.map((set) => `${set.name}: ${set.lastFailedGenerationError}`).join('; ')}`);
          return;
        }
        const stopping = new Promise<void>((resolve) => {
          process.once('SIGTERM', resolve);
          process.once('SIGINT', resolve);
        });
        const http = await serveAgentHttp(metrics.registry, () => agent.healthy(), args.port);
        log.info({ port: http.port, crio: args['cri-socket'], dropIn: args['drop-in'] }, 'agent started');
        // No pass before the Node and the sets are known (a pass without the Node's labels cannot select sets).
        // With leaves by label, the drop-in names the node's leaf once its labels are known.
        void untilLoaded(cluster, log).then(async () => {
          if (leafLabel !== undefined) await syncCache(false);
          agent.start();
        });
        const unwatch = watchOtherDropIns(args['drop-in'], () => cluster.loaded() && agent.trigger(), log);
        const setStatusStop = new AbortController();
        if (args['set-status']) void runSetStatusWriter(client, cluster, { namespace: args.namespace, holder: nodeName, log }, setStatusStop.signal).catch((error: Error) => log.error({ err: error.message }, 'set status writer ended'));
        await stopping;
        log.info('stopping');
        // Not awaited: a writer still waiting for the Lease has nothing to finish.
        setStatusStop.abort();
        unwatch();
        await agent.stop();
        await http.close();
        // CRI-O no longer asks a relay that is gone: the drop-in goes with it (the cache's stays).
        if (relay) {
          await relay.stop();
          relay = undefined;
          await syncCache(false);
        }
      } finally {
        clearInterval(cacheResync);
        pacer?.stop();
        await cacheWarmer?.close();
        await cluster.stop();
        await imageSizes.close();
        await relay?.stop();
        runtime.close();
      }
    },
  });
}

/**
 * Another writer's drop-in (MCO's 50-pinned-images) changed: carry its pins at once rather than at
 * the next resync. Returns the function that stops watching.
 */
/** The registry host of a pullspec: what the relay stands in for. */
function registryOf(image: string): string {
  return parseReference(image).registry;
}

function watchOtherDropIns(dropIn: string, onChange: () => void, log: Logger): () => void {
  const own = basename(dropIn);
  const warn = (error: Error) => log.warn({ err: error.message }, "cannot watch the drop-in directory; other writers' pins are carried at the next resync");
  try {
    const watcher = watch(dirname(dropIn), (_event, name) => {
      if (name && name !== own && !name.startsWith('.')) onChange();
    });
    watcher.on('error', warn);
    return () => watcher.close();
  } catch (error) {
    warn(error as Error);
    return () => undefined;
  }
}

/** `--once` gives up when the Node and the sets are not known by then. */
const ONCE_LOAD_TIMEOUT_MS = 60_000;
/** A still-waiting agent says so after this long, and every as long again. */
const LOAD_WARNING_MS = 30_000;

/** Resolves when the Node and the sets are loaded; warns while it waits; rejects past `timeoutMs`. */
async function untilLoaded(cluster: KubeAgentCluster, log: Logger, timeoutMs?: number): Promise<void> {
  const started = Date.now();
  const warn = setInterval(() => log.warn({ waitingFor: cluster.waitingFor(), seconds: Math.round((Date.now() - started) / 1000) }, 'waiting for the cluster before the first pass'), LOAD_WARNING_MS);
  warn.unref();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      cluster.untilLoaded(),
      ...(timeoutMs === undefined
        ? []
        : [new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new ClusterError(`waited ${Math.round(timeoutMs / 1000)} s for ${cluster.waitingFor()}`)), timeoutMs)))]),
    ]);
  } finally {
    clearInterval(warn);
    clearTimeout(timer);
  }
}

function reloadFrom(method: string, confDir: string): CrioReload {
  if (method === 'sighup') return reloadCrioFoundInProc(confDir);
  if (method === 'systemctl') return reloadWithSystemctl;
  const pid = /^pid:(\d+)$/.exec(method);
  if (pid) return reloadWithSignal(() => Number(pid[1]));
  const pidFile = /^pidfile:(.+)$/.exec(method);
  if (pidFile) return reloadWithSignal(() => Number(readFileSync(pidFile[1] as string, 'utf8').trim()));
  throw new BadInputError(`--reload must be sighup, systemctl, pid:<pid> or pidfile:<path>, got ${method}`);
}


