/**
 * `prestage report`'s numbers: nodes x sets as the backend reports them now, the preflight of the
 * sets on the cluster, and the link's use over time where something recorded it: `wait -o json`'s
 * link events (a file), else the charges on the agents' ledger Lease (its last entries).
 * Pure but for `ledgerSamples`' read of the Lease.
 */
import { PREFLIGHT_API_VERSION, type Preflight, type ReportCell, type StagingReport } from '../api/preflight.js';
import { LINK_LEASE, LINK_LEDGER_ANNOTATION } from '../api/names.js';
import type { NodeSetProgress, ProgressSnapshot } from './backend.js';
import type { KubeClient, KubeObject } from '../kube/client.js';
import { readLedger } from '../net/link-rate.js';

/** The ledger's samples: bytes charged per this many seconds. */
const BUCKET_SECONDS = 5;
/** A report draws at most this many samples (the newest). */
export const MAX_LINK_SAMPLES = 720;

export type LinkUse = NonNullable<StagingReport['link']>;

export function buildReport(backend: string, snapshot: ProgressSnapshot, now: number, extras: { preflight?: Preflight; link?: LinkUse } = {}): StagingReport {
  const cells = snapshot.sets.flatMap((set) => set.nodes.map(cellOf));
  const nodes = [...new Set(cells.map((cell) => cell.node))].sort();
  return {
    apiVersion: PREFLIGHT_API_VERSION,
    kind: 'StagingReport',
    time: new Date(now).toISOString().replace(/\.\d+Z$/, 'Z'),
    backend,
    sets: snapshot.sets.map((set) => set.name),
    nodes,
    cells,
    ...(extras.preflight ? { preflight: extras.preflight } : {}),
    ...(extras.link && extras.link.samples.length ? { link: extras.link } : {}),
    errors: cells.flatMap((cell) => (cell.error ? [{ node: cell.node, set: cell.set, error: cell.error }] : [])),
  };
}

function cellOf(progress: NodeSetProgress): ReportCell {
  const waiting = progress.phase !== 'done' && progress.note && /^paused /.test(progress.note) ? progress.note : undefined;
  const state: ReportCell['state'] =
    progress.phase === 'done' ? 'ready' : progress.phase === 'degraded' ? 'failed' : waiting ? 'waiting' : progress.phase === 'progressing' ? 'pulling' : 'pending';
  return {
    node: progress.node,
    set: progress.set,
    state,
    images: progress.imagesTotal ?? 0,
    pulled: progress.imagesDone ?? 0,
    ...(progress.bytes !== undefined ? { bytes: progress.bytes } : {}),
    ...(progress.pulledBytes !== undefined ? { pulledBytes: progress.pulledBytes } : {}),
    ...(progress.error ? { error: progress.error } : progress.unreported ? { error: progress.unreported } : {}),
    ...(waiting ? { waiting } : {}),
  };
}

/** `wait -o json` lines: the link events' measured rates (other events and bad lines are skipped). */
export function eventSamples(text: string): LinkUse | undefined {
  const samples: Array<{ time: string; bytesPerSecond: number }> = [];
  let cap: number | undefined;
  for (const line of text.split('\n')) {
    let event: { type?: unknown; time?: unknown; bytesPerSecond?: unknown; capBytesPerSecond?: unknown };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      continue;
    }
    if (event?.type !== 'link' || typeof event.time !== 'string' || Number.isNaN(Date.parse(event.time)) || !isBytes(event.bytesPerSecond)) continue;
    samples.push({ time: event.time, bytesPerSecond: event.bytesPerSecond });
    if (isBytes(event.capBytesPerSecond) && event.capBytesPerSecond > 0) cap = event.capBytesPerSecond;
  }
  return samples.length ? { source: 'wait -o json link events', ...(cap ? { capBytesPerSecond: cap } : {}), samples: samples.slice(-MAX_LINK_SAMPLES) } : undefined;
}

/** The agents' ledger: what each 5 s of its recent entries charged, as a rate. */
export async function ledgerSamples(client: KubeClient, namespace: string, capBytesPerSecond: number | undefined): Promise<LinkUse | undefined> {
  const lease = await client.find<KubeObject>(`/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases/${LINK_LEASE}`).catch(() => undefined);
  const buckets = new Map<number, number>();
  for (const entry of readLedger(lease?.metadata.annotations?.[LINK_LEDGER_ANNOTATION])) {
    if (!isBytes(entry[0]) || !isBytes(entry[1])) continue;
    const bucket = Math.floor(entry[0] / 1000 / BUCKET_SECONDS);
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + entry[1]);
  }
  if (!buckets.size) return undefined;
  const first = Math.min(...buckets.keys());
  const last = Math.max(...buckets.keys());
  const samples: LinkUse['samples'][number][] = [];
  for (let bucket = Math.max(first, last - MAX_LINK_SAMPLES + 1); bucket <= last; bucket++) {
    samples.push({ time: new Date(bucket * BUCKET_SECONDS * 1000).toISOString().replace(/\.\d+Z$/, 'Z'), bytesPerSecond: Math.round((buckets.get(bucket) ?? 0) / BUCKET_SECONDS) });
  }
  return { source: `the charges on Lease ${namespace}/${LINK_LEASE} (the agents' ledger, its last entries)`, ...(capBytesPerSecond ? { capBytesPerSecond } : {}), samples };
}

function isBytes(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}
