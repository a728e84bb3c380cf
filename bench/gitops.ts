/**
 * `npm run bench:gitops`: the set-status writer (the agent code that holds Lease
 * prestage-set-status-0, run in this process) on a real kube-apiserver holding 1000 Nodes and
 * their NodePinnedImages, 2 prestage.dev sets on every node. The agents' reports are simulated:
 * each node's status is written as an agent writes it (Pulling with progress, then Pinned), at a
 * steady rate. Measured on the writer's client: its status writes the API server accepted, per
 * second, and the time from the last node's report that it pinned to the
 * set's Ready. Baseline: one set-status write per node report (what a writer without coalescing,
 * or every agent writing the set, would send).
 */
import pino from 'pino';
import pLimit from 'p-limit';
import { CRDS } from '../src/api/prestage-crds.js';
import { GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION, type PinnedImageSet, type PinnedImageSetStatus, type SetStatus } from '../src/api/prestage.js';
import { applyServerSide, waitForCrdsEstablished, type Manifest } from '../src/install/apply.js';
import { KubeClient, type KubeObject } from '../src/kube/client.js';
import { runSetStatusWriter, type SetsCache } from '../src/agent/set-status-writer.js';
import { Informer, withoutFieldManagers } from '../src/kube/informer.js';
import { startCluster } from '../test/cluster/index.js';

const NODES = Number(process.env.BENCH_NODES ?? 1000);
const REPORTS_PER_SECOND = Number(process.env.BENCH_RATE ?? 200);
const IMAGES = 50;
const SETS = ['bench-a', 'bench-b'];
const image = (i: number) => `quay.io/bench/image@sha256:${i.toString(16).padStart(64, '0')}`;

const cluster = await startCluster({ workers: 0 });
const stop = new AbortController();
try {
  const client = new KubeClient(cluster.kubeConfig);
  await applyServerSide(cluster.kubeConfig, CRDS as unknown as Manifest[]);
  await waitForCrdsEstablished(cluster.kubeConfig, CRDS.map((crd) => crd.metadata.name));
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: 'prestage' } } });
  const names = Array.from({ length: NODES }, (_, i) => `bench-${String(i).padStart(4, '0')}`);
  const limit = pLimit(16);
  await Promise.all(names.map((name) => limit(async () => {
    await client.request('POST', '/api/v1/nodes', { body: { metadata: { name, labels: { 'prestage.dev/bench': '' } } } });
    await client.request('POST', `/apis/${GROUP}/${VERSION}/${NODE_PINNED_IMAGES}`, { body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'NodePinnedImages', metadata: { name }, spec: { nodeName: name } } });
  })));
  const uids = new Map<string, string>();
  for (const set of SETS) {
    const created = await client.request<KubeObject>('POST', `/apis/${GROUP}/${VERSION}/${PINNED_IMAGE_SETS}`, { body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'PinnedImageSet', metadata: { name: set }, spec: { nodeSelector: { matchLabels: { 'prestage.dev/bench': '' } }, pinnedImages: Array.from({ length: IMAGES }, (_, i) => ({ name: image(i) })) } } });
    uids.set(set, created.metadata['uid'] as string);
  }

  // Every status write of the writer that the API server accepted, and when every set was written Ready.
  const writes: number[] = [];
  const readySince = new Map<string, number>();
  let readyAt: number | undefined;
  class CountingClient extends KubeClient {
    override async request<T>(method: string, path: string, options: { query?: Record<string, unknown>; body?: unknown; contentType?: string } = {}): Promise<T> {
      const result = await super.request<T>(method, path, options as never);
      const match = /\/pinnedimagesets\/([^/]+)\/status$/.exec(path);
      if (method === 'PATCH' && match) {
        writes.push(performance.now());
        const status = (options.body as { status: SetStatus }).status;
        const ready = status.conditions?.find((condition) => condition.type === 'Ready')?.status === 'True';
        if (ready && !readySince.has(match[1]!)) readySince.set(match[1]!, performance.now());
        if (readySince.size === SETS.length) readyAt ??= performance.now();
      }
      return result;
    }
  }
  const writer = new CountingClient(cluster.kubeConfig);

  const log = pino({ level: process.env.BENCH_LOG ?? 'warn' });
  // The writer reads the sets from its agent's cache; here, a cache of their own, as an agent keeps it.
  const listeners = new Set<() => void>();
  const setsInformer = new Informer<KubeObject>(writer, `/apis/${GROUP}/${VERSION}/${PINNED_IMAGE_SETS}`, { onChange: () => listeners.forEach((listener) => listener()), slim: withoutFieldManagers });
  const listed = setsInformer.start(stop.signal);
  const setsCache: SetsCache = {
    pinnedImageSets: () => [...setsInformer.items.values()] as unknown as PinnedImageSet[],
    untilSetsListed: () => listed,
    onSetsChange: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  void runSetStatusWriter(writer, setsCache, { namespace: 'prestage', holder: 'bench-writer', log }, stop.signal);

  // The writer elected and its first pass written (every set's "no report yet") before the reports start.
  const electionDeadline = Date.now() + 300_000;
  while (writes.length < SETS.length && Date.now() < electionDeadline) await new Promise((resolve) => setTimeout(resolve, 100));
  if (writes.length < SETS.length) throw new Error('the set-status writer wrote nothing within 300 s');

  // Per node and set: a Pulling report (half the images pinned), then a Pinned one; 4 reports per node.
  const entry = (set: string, pinned: number): PinnedImageSetStatus => ({
    name: set, uid: uids.get(set)!, desiredGeneration: 1, ...(pinned === IMAGES ? { currentGeneration: 1 } : {}),
    images: Array.from({ length: IMAGES }, (_, i) => ({ name: image(i), state: i < pinned ? 'Pinned' : 'Pulling', attempts: 1 })),
  });
  const reports = [
    ...names.map((node) => ({ node, pinned: IMAGES / 2 })),
    ...names.map((node) => ({ node, pinned: IMAGES })),
  ];
  const interval = 1000 / REPORTS_PER_SECOND;
  const started = performance.now();
  const inFlight = pLimit(32);
  let lastPinSent = 0;
  await Promise.all(reports.map((report, i) =>
    new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, started + i * interval - performance.now()))).then(() => inFlight(async () => {
      await client.request('PATCH', `/apis/${GROUP}/${VERSION}/${NODE_PINNED_IMAGES}/${report.node}/status`, {
        body: { status: { pinnedImageSets: SETS.map((set) => entry(set, report.pinned)) } },
        contentType: 'application/merge-patch+json',
      });
      if (report.pinned === IMAGES) lastPinSent = Math.max(lastPinSent, performance.now());
    }))));
  const reportsDone = performance.now();
  const deadline = Date.now() + 60_000;
  while ((readyAt === undefined || readyAt < lastPinSent) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  const seconds = (reportsDone - started) / 1000;
  const during = writes.filter((at) => at >= started && at <= reportsDone);
  const perSecond = new Map<number, number>();
  for (const at of during) perSecond.set(Math.floor((at - started) / 1000), (perSecond.get(Math.floor((at - started) / 1000)) ?? 0) + 1);
  const peak = Math.max(0, ...perSecond.values());
  const baseline = (reports.length * SETS.length) / seconds;
  const rate = during.length / seconds;
  console.log(`bench:gitops  ${NODES} nodes x ${SETS.length} sets (${IMAGES} images), ${reports.length} node reports over ${seconds.toFixed(1)} s (${REPORTS_PER_SECOND}/s)`);
  console.log(`  set status writes: ${during.length} (${rate.toFixed(2)}/s mean, ${peak}/s peak in any second)`);
  console.log(`  baseline (one set write per node report and set): ${baseline.toFixed(0)}/s; ratio writer/baseline ${(rate / baseline).toFixed(4)}`);
  console.log(`  last node's pin (report written) -> every set Ready: ${readyAt === undefined ? 'not within 60 s' : `${Math.round(readyAt - lastPinSent)} ms`}`);
} finally {
  stop.abort();
  await cluster.stop();
}
