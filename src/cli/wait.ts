/**
 * `prestage wait [SETS..]`: watch until every target node has every set (exit 0), a node stays
 * degraded past --fail-after (exit 1), or --timeout passes (exit 124).
 */
import type { Argv } from 'yargs';
import type { PinningBackend } from '../cluster/backend.js';
import { LinkMeter, type LinkEvent } from '../cluster/link-meter.js';
import { cacheEvent, cacheTreeReaders, type CacheCounters, type CacheEvent, type CacheMetricsReader } from '../cluster/cache-metrics.js';
import type { ClusterClient } from '../cluster/connect.js';
import { waitForSets, type NodeEvent, type SetEvent, type WaitEvent, type WaitTracker } from '../cluster/wait.js';
import type { McoVersions } from '../cluster/mco/backend.js';
import { DEFAULT_FAIL_AFTER_MS, DEFAULT_TIMEOUT_MS, mcoPace, mcoWaitDefaults, paceLines, predictMcoNodes } from '../cluster/mco/pace.js';
import { mcoNodeWork, runningVersion } from '../cluster/mco/pace-work.js';
import { columnsOf, fitLine, isLiveTerminal } from '../terminal-line.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { linkRate, positiveLongDuration } from './flag-values.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { formatBytes, formatSeconds } from '../units.js';
import { printable } from '../terminal-text.js';
import { renderEvent } from './documents.js';

export interface WaitFlags {
  /** Milliseconds, given as 90s, 30m, 2h; undefined: 60m, or on MCO what its pace asks for. */
  timeout?: number;
  /** Milliseconds; undefined: 10m, or on MCO what its pace asks for. */
  'fail-after'?: number;
  /** Bytes per second of the link the nodes pull over (shared); for MCO's predicted pace. */
  'link-rate'?: number;
  output: 'text' | 'json' | 'yaml';
  /** Where `install --cache` put the cache. */
  'cache-namespace': string;
}

/** How often the cache's counters are read while waiting (and once more at the end). */
const CACHE_READ_INTERVAL_MS = 10_000;

export function withWaitOptions<T>(y: Argv<T>): Argv<T & WaitFlags> {
  return y
    .option('timeout', { type: 'string', coerce: positiveLongDuration('timeout'), describe: 'Give up after this long (exit 124), e.g. 90s, 30m, 2h, 720h (at most 8760h) [default: 60m; on MCO at least twice the slowest node\'s predicted time]' })
    .option('fail-after', { type: 'string', coerce: positiveLongDuration('fail-after'), describe: 'Fail (exit 1) when a node stays degraded this long (90s, 30m, 2h; at most 8760h); nodes retry until then [default: 10m; on MCO at least the time its next sync takes to retry a pull]' })
    .option('link-rate', { type: 'string', coerce: linkRate('link-rate'), describe: 'The slow link\'s rate (bytes: 20MiB/s, 5MB/s, 20Mi; bits: 40Mbit/s, 40Mbps): stage and apply store it on the sets as a cap prestage\'s agents share out; on MCO, which cannot be capped, its predicted pace counts the bytes with it' })
    .option('output', { alias: 'o', choices: ['text', 'json', 'yaml'] as const, default: 'text' as const, describe: 'text: progress lines (redrawn on a terminal); json: one event per line; yaml: the same events, one YAML document each (---); each event one object whose type is set, node, link, pace or cache' })
    .option('cache-namespace', { type: 'string', default: 'prestage', describe: 'Namespace of the in-cluster cache (install --cache): its upstream bytes and hit ratio since wait started are shown; nothing when there is none' }) as unknown as Argv<T & WaitFlags>;
}

/** Prints wait's events: JSON lines, a redrawn line per set on a terminal, or one plain line per change. */
export class WaitPrinter {
  private drawn = 0;
  private readonly reportedErrors = new Set<string>();
  private readonly tty: boolean;
  private tracker: WaitTracker | undefined;
  /** One line per cache (the root, each leaf), in the order they were first seen. */
  private readonly cacheLines = new Map<string, string>();
  private readonly cacheMeter = new LinkMeter('cache');

  constructor(
    private readonly out: NodeJS.WritableStream,
    private readonly output: 'text' | 'json' | 'yaml',
    term: string | undefined = process.env.TERM,
  ) {
    // Redrawn in place only on a terminal that takes escape codes; elsewhere a line per change.
    this.tty = output === 'text' && isLiveTerminal(out, term);
  }

  /** MCO's predicted pace and the limits it sets: lines, or one JSON event. */
  printPace(lines: readonly string[], reasons: readonly string[], event: Record<string, unknown>): void {
    if (this.output !== 'text') return void this.out.write(renderEvent(this.output, event));
    this.out.write([...lines, ...reasons].map((l) => `${l}\n`).join(''));
  }

  /** The cache's figures: a line of its own, or on a terminal the last line of the redrawn block. */
  printCache(event: CacheEvent): void {
    if (this.output !== 'text') return void this.out.write(renderEvent(this.output, event));
    // The root's upstream is where bytes cross the link: its rate, against the cap the agents report (a leaf's upstream is the root).
    const onLink = event.tier !== 'leaf';
    const line = cacheLine(event, onLink ? this.cacheMeter.sample({ bytes: event.upstreamBytes, ...(this.tracker?.lastLink?.capBytesPerSecond ? { capBytesPerSecond: this.tracker.lastLink.capBytesPerSecond } : {}) }, Date.parse(event.time)) : undefined);
    if (line === this.cacheLines.get(event.cache)) return;
    this.cacheLines.set(event.cache, line);
    if (!this.tty) return void this.out.write(`${line}\n`);
    if (this.tracker) this.print([], this.tracker);
  }

  print(events: readonly WaitEvent[], tracker: WaitTracker): void {
    this.tracker = tracker;
    if (this.output !== 'text') {
      for (const event of events) this.out.write(renderEvent(this.output, event));
      return;
    }
    if (!this.tty) {
      for (const event of events) this.out.write(`${event.type === 'node' ? nodeLine(event) : event.type === 'link' ? linkLine(event) : setLine(event)}\n`);
      return;
    }
    // Terminal: the first error of each node stays on screen; the set lines are redrawn below.
    let text = this.drawn ? `\x1b[${this.drawn}A` : '';
    for (const event of events) {
      if (event.type === 'node' && event.error && !this.reportedErrors.has(`${event.set}/${event.node}/${event.error}`)) {
        this.reportedErrors.add(`${event.set}/${event.node}/${event.error}`);
        text += `\x1b[2K${nodeLine(event)}\n`;
      }
    }
    const lines = [...tracker.summaries().map(setLine), ...(tracker.lastLink ? [linkLine(tracker.lastLink)] : []), ...this.cacheLines.values()];
    // Cut to the terminal's width: a redrawn line that wraps would be redrawn as two.
    const columns = columnsOf(this.out);
    text += lines.map((l) => `\x1b[2K${fitLine(l, columns)}\n`).join('');
    this.drawn = lines.length;
    this.out.write(text);
  }
}

function nodeLine(e: NodeEvent): string {
  const images = e.imagesTotal ? ` ${e.imagesDone ?? 0}/${e.imagesTotal} images` : '';
  const bytes = e.bytes ? ` ${formatBytes(e.pulledBytes ?? 0)}/${formatBytes(e.bytes)}` : '';
  const message = e.error ?? (e.note ? `note: ${e.note}` : undefined);
  // A node's error and note are its agent's (or MCO's) words: escaped, a compromised node draws nothing.
  return `${e.time} ${e.set} ${e.node}: ${e.phase} (generation ${e.currentGeneration}/${e.desiredGeneration})${images}${bytes}${message ? `: ${printable(message)}` : ''}`;
}

function setLine(e: SetEvent): string {
  const bytes = e.bytes ? `  ${formatBytes(e.pulledBytes ?? 0)}/${formatBytes(e.bytes)}` : '';
  const eta = e.etaSeconds !== undefined ? `  ETA ${formatSeconds(e.etaSeconds)}` : '';
  return `${e.set}: ${e.nodesDone}/${e.nodesTotal} nodes done${bytes}${eta}${e.ready ? '  ready' : ''}`;
}

function cacheLine(e: CacheEvent, link?: LinkEvent): string {
  const hits = e.hitRatio !== undefined ? `, blob hits ${e.hits} of ${e.hits + e.misses} (${Math.round(e.hitRatio * 100)}%)` : '';
  const rate = link?.bytesPerSecond !== undefined ? `, upstream ${formatBytes(link.bytesPerSecond)}/s${link.capBytesPerSecond ? ` of the ${formatBytes(link.capBytesPerSecond)}/s cap` : ''}` : '';
  const held = e.heldBytes !== undefined ? `; holds ${formatBytes(e.heldBytes)}` : '';
  return `cache ${e.cache}${e.tier ? ` (${e.tier})` : ''}: ${formatBytes(e.upstreamBytes)} from ${e.tier === 'leaf' ? 'the root' : 'upstream'}, ${formatBytes(e.servedBytes)} served to nodes${hits}${rate} (since wait started)${held}`;
}

/** `link: 1.9 MiB/s of the 2.0 MiB/s cap, 12.4 MiB to start, ETA 6s` (the nodes' pulls over the link since wait started). */
export function linkLine(e: LinkEvent): string {
  const rate = e.bytesPerSecond !== undefined ? `${formatBytes(e.bytesPerSecond)}/s` : 'measuring';
  const cap = e.capBytesPerSecond ? ` of the ${formatBytes(e.capBytesPerSecond)}/s cap` : ' (no cap)';
  const pending = e.pendingBytes ? `, ${formatBytes(e.pendingBytes)} to start` : '';
  const eta = e.etaSeconds !== undefined ? `, ETA ${formatSeconds(e.etaSeconds)}` : '';
  return `link: ${rate}${cap}${pending}${eta}; ${formatBytes(e.bytes)} pulled over it since wait started`;
}


/** MCO's predicted pace for `sets` (printed), and the limits that follow from it for flags not given. */
async function waitLimits(cluster: WaitCluster | undefined, sets: readonly string[] | undefined, flags: WaitFlags, printer: WaitPrinter): Promise<{ timeoutMs: number; failAfterMs: number; predictedEndMs?: Map<string, number> }> {
  const given = { timeoutMs: flags.timeout ?? DEFAULT_TIMEOUT_MS, failAfterMs: flags['fail-after'] ?? DEFAULT_FAIL_AFTER_MS };
  if (!cluster?.mco || cluster.backend.kind !== 'mco') return given;
  const works = await mcoNodeWork(cluster.client, cluster.backend, cluster.mco, sets);
  if (works.length === 0) return given;
  const pace = mcoPace(await runningVersion(cluster.client));
  const predictions = predictMcoNodes(works, pace, flags['link-rate']);
  const defaults = mcoWaitDefaults(predictions, pace);
  const limits = { timeoutMs: flags.timeout ?? defaults.timeoutMs, failAfterMs: flags['fail-after'] ?? defaults.failAfterMs };
  const reasons = [...(flags.timeout === undefined ? [defaults.reasons[0]!] : []), ...(flags['fail-after'] === undefined ? [defaults.reasons[1]!] : [])];
  printer.printPace(paceLines(predictions, pace, flags['link-rate'], formatBytes), reasons, { type: 'pace', mcoVersion: pace.version ?? null, deadlineSeconds: pace.deadlineSeconds, ...(flags['link-rate'] ? { linkBytesPerSecond: flags['link-rate'] } : {}), nodes: predictions, timeoutSeconds: limits.timeoutMs / 1000, failAfterSeconds: limits.failAfterMs / 1000 });
  const now = Date.now();
  return { ...limits, predictedEndMs: new Map(predictions.map((p) => [p.node, now + p.seconds * 1000])) };
}

/** The cluster wait talks to: its client, and MCO's API versions where the backend is MCO. */
export interface WaitCluster {
  readonly client: ClusterClient;
  readonly backend: PinningBackend;
  readonly mco?: McoVersions;
}

export async function runWait(backend: PinningBackend, sets: readonly string[] | undefined, flags: WaitFlags, ctx: CommandContext, cluster?: WaitCluster): Promise<void> {
  const printer = new WaitPrinter(ctx.stdout, flags.output);
  const client = cluster?.client;
  const limits = await waitLimits(cluster, sets, flags, printer);
  const readers = client ? await cacheTreeReaders(client, flags['cache-namespace']) : [];
  const caches = (await Promise.all(readers.map((reader) => CacheFigures.start(reader, (event) => printer.printCache(event), (line) => ctx.log.warn(line), (line) => ctx.log.debug(line))))).filter((figures) => figures !== undefined);
  try {
    await waitForSets(backend, sets, {
      ...limits,
      onEvents: (events, tracker) => printer.print(events, tracker),
      onRetry: (error, delayMs) => ctx.log.warn(`watch interrupted, re-watching in ${delayMs} ms: ${error.message}`),
    });
  } finally {
    await Promise.all(caches.map((figures) => figures.stop()));
  }
}

/** The cache's counters read at the start (the baseline), every few seconds, and at the end. */
class CacheFigures {
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> = Promise.resolve();
  private warned = false;

  private constructor(
    private readonly reader: CacheMetricsReader,
    private readonly baseline: CacheCounters,
    private readonly onEvent: (event: CacheEvent) => void,
    private readonly warn: (line: string) => void,
  ) {}

  /** Undefined when there is no cache (no Service), or its counters cannot be read (said once). */
  static async start(reader: CacheMetricsReader, onEvent: (event: CacheEvent) => void, warn: (line: string) => void, debug: (line: string) => void): Promise<CacheFigures | undefined> {
    const first = await reader.read();
    if ('absent' in first) {
      debug(`no cache figures: ${first.absent}`);
      return undefined;
    }
    if ('error' in first) {
      warn(`cache figures unavailable: ${first.error}`);
      return undefined;
    }
    const figures = new CacheFigures(reader, first.counters, onEvent, warn);
    figures.timer = setInterval(() => (figures.reading = figures.reading.then(() => figures.read())), CACHE_READ_INTERVAL_MS);
    figures.timer.unref();
    return figures;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.reading;
    await this.read();
  }

  private async read(): Promise<void> {
    const reading = await this.reader.read();
    if ('counters' in reading) return this.onEvent(cacheEvent(this.reader.name, this.baseline, reading.counters, new Date().toISOString(), this.reader.tier));
    if ('error' in reading && !this.warned) {
      this.warned = true;
      this.warn(`cache figures unavailable: ${reading.error}`);
    }
  }
}

export function waitCommand(ctx: CommandContext, scriptName: string) {
  return typedCommand({
    builder: (y: Argv) => withKubeOptions(withWaitOptions(y.positional('sets', { type: 'string', array: true, describe: 'PinnedImageSet names' }))),
    handler: async (args) => {
      const cluster = await clusterFrom(args as KubeFlags, scriptName);
      const sets = (args.sets as string[] | undefined)?.length ? (args.sets as string[]) : undefined;
      await runWait(cluster.backend, sets, args as WaitFlags, ctx, cluster);
    },
  });
}
