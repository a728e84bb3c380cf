/**
 * `prestage preflight` and `prestage report` on the test bed: three real CRI-O nodes, each pulling
 * from its OWN docker-registry (one storage, so the fixture release is in all of them) so each
 * registry's access log counts exactly that node's bytes; worker-0 holds some images already
 * (pulled through CRI beforehand), worker-1's image store is a tmpfs too small for its set.
 * The preflight's bytes per node are held against what the registry then served to that node's
 * CRI-O (its blob answers), the small node is NO-GO naming its shortfall, after staging the
 * staged nodes have nothing left to fetch, and the HTML report opens in a real headless Chromium
 * with the network cut off. Then a capped stage's time against the preflight's ETA.
 */
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Preflight, StagingReport } from '../src/api/preflight.js';
import type { NodePinnedImages } from '../src/api/prestage.js';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import { KubeClient } from '../src/kube/client.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { waitFor, type Daemon } from './cluster/processes.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { renderPage } from './harness/chromium.js';
import { runCli, startCli } from './support/cli.js';
import { startNodeAgent, withCri } from './support/agent-bed.js';

const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
const NAMESPACE = 'prestage';
const WORKER_SET = 'prestage-4.16.3-worker';
const CONTROL_PLANE_SET = 'prestage-4.16.3-control-plane';
/** worker-1's image store: far below what its set takes. */
const SMALL_STORE = 6 * 2 ** 20;
/** Images worker-0 pulls through CRI before the preflight. */
const PREPULLED = 8;
/**
 * The slow link's cap: under it every agent pulls one image at a time, each layer once. Low
 * enough that the bytes, not the per-pull costs a busy host stretches, make most of the stage.
 */
const LINK_RATE = '512KiB/s';

let dir: string;
let primary: RegistryHandle;
const nodeRegistries = new Map<string, RegistryHandle>();
let cluster: TestCluster;
let client: KubeClient;
let kube: string[];
let registryFlags: string[];
const agents = new Map<string, Daemon>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-preflight-'));
  const storageDir = inject('fixtureStorageDir');
  primary = await startRegistry({ storageDir });
  for (const name of ['master-0', 'worker-0', 'worker-1']) nodeRegistries.set(name, await startRegistry({ storageDir }));
  const mirrorsOf = (name: string) => ({ registryMirrors: { 'quay.io': nodeRegistries.get(name)!.host } });
  cluster = await startCluster({
    workers: 2,
    insecureRegistries: [primary.host, ...[...nodeRegistries.values()].map((registry) => registry.host)],
    perNode: { 'master-0': mirrorsOf('master-0'), 'worker-0': mirrorsOf('worker-0'), 'worker-1': { ...mirrorsOf('worker-1'), imageStoreBytes: SMALL_STORE } },
  });
  client = new KubeClient(cluster.kubeConfig);
  kube = ['--kubeconfig', cluster.kubeconfigPath];
  registryFlags = ['--mirror', `quay.io=${primary.host}`, '--insecure-registry', primary.host];
  const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--apply', ...kube]);
  expect([installed.code, installed.stderr]).toEqual([0, '']);
  // A short resync: an agent lists what its runtime stores on every pass, so a pull done beside it shows soon.
  for (const node of cluster.nodes) agents.set(node.name, await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, args: ['--resync', '2s'] }));
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.allSettled([...agents.values()].map((agent) => agent.stop(30_000)));
  await cluster?.stop();
  await Promise.allSettled([primary, ...nodeRegistries.values()].map((registry) => registry?.stop()));
  if (dir && !process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
});

/**
 * Bytes of the blob answers each node's registry gave since `offsets` (its access log's combined
 * lines): under a cap CRI-O pulls through its agent's relay, which reads each blob in paid Range
 * parts; the agent's own size reads add a few bytes of gzip trailers per layer.
 */
async function servedToNodes(offsets: ReadonlyMap<string, number>): Promise<Record<string, number>> {
  const served: Record<string, number> = {};
  for (const [node, registry] of nodeRegistries) {
    const log = (await readFile(registry.logFile, 'utf8')).slice(offsets.get(node) ?? 0);
    let bytes = 0;
    for (const match of log.matchAll(/"GET \/v2\/\S+\/blobs\/sha256:[a-f0-9]{64} HTTP\/[\d.]+" (200|206) (\d+) /g)) bytes += Number(match[2]);
    served[node] = bytes;
  }
  return served;
}

async function logOffsets(): Promise<Map<string, number>> {
  return new Map(await Promise.all([...nodeRegistries].map(async ([node, registry]) => [node, (await readFile(registry.logFile, 'utf8')).length] as const)));
}

async function statuses(): Promise<NodePinnedImages[]> {
  return (await client.get<{ items: NodePinnedImages[] }>(AGENT_PATHS.nodePinnedImages)).items;
}

function parsed(stdout: string): Preflight {
  return JSON.parse(stdout) as Preflight;
}

describe('preflight', () => {
  it("counts per node what the registry then serves it (within 1 %), names the node too small for its set, and after staging has nothing left to fetch; the report opens in a real browser", async () => {
    // worker-0 holds some of the worker set's images already, pulled through CRI (as a user or another tool would).
    const planned = await runCli(['plan', RELEASE, ...registryFlags, '-o', 'json']);
    expect([planned.code, planned.stderr]).toEqual([0, '']);
    const workerImages = (JSON.parse(planned.stdout) as { sets: Array<{ name: string; images: string[] }> }).sets.find((set) => set.name === WORKER_SET)!.images;
    const prepulled = workerImages.slice(0, PREPULLED);
    const worker0 = cluster.nodes.find((node) => node.name === 'worker-0')!;
    await withCri(worker0, async (cri) => {
      for (const image of prepulled) await cri.pullImage(image);
    });
    // Every agent has listed its runtime since: worker-0 names the images it pulled.
    await waitFor('the agents to list what their runtimes store', async () => {
      const listed = await statuses();
      const held = listed.find((status) => status.metadata.name === 'worker-0')?.status?.held;
      return listed.length === 3 && listed.every((status) => status.status?.held) && held && prepulled.every((image) => held.images.includes(image)) ? true : undefined;
    }, 60_000, 500);

    const offsets = await logOffsets();
    const before = await runCli(['preflight', RELEASE, ...registryFlags, '--link-rate', LINK_RATE, '-o', 'json', ...kube]);
    expect(before.code, before.stderr).toBe(1);
    const preflight = parsed(before.stdout);
    console.log(`$ prestage preflight ${RELEASE} --link-rate ${LINK_RATE} -o wide ...\n${(await runCli(['preflight', RELEASE, ...registryFlags, '--link-rate', LINK_RATE, '-o', 'wide', ...kube])).stdout}`);
    const byNode = new Map(preflight.nodes.map((node) => [node.node, node]));
    expect([...byNode.keys()].sort()).toEqual(['master-0', 'worker-0', 'worker-1']);
    expect(byNode.get('worker-0')!.present).toBe(PREPULLED);
    expect(byNode.get('worker-0')!.fetchBytes).toBeLessThan(byNode.get('worker-1')!.fetchBytes);
    expect(preflight.nodes.map((node) => [node.node, node.heldFrom, node.storage.rule, node.verdict])).toEqual([
      ['master-0', 'agent', 'agent', 'GO'],
      ['worker-0', 'agent', 'agent', 'GO'],
      ['worker-1', 'agent', 'agent', 'NO-GO'],
    ]);
    // The one reason: worker-1, its set, and by how much it is short.
    expect(preflight.reasons).toHaveLength(1);
    expect(preflight.reasons[0]).toMatch(new RegExp(`^worker-1: ${WORKER_SET} does not fit: needs .* of new layers, .* left of .* free after the agent's 0 B reserve: short by `));
    expect(before.stderr).toContain(`NO-GO: worker-1: ${WORKER_SET} does not fit`);

    // The control plane's set alone fits, and so does its stage in a window open for the next 3 h.
    const controlPlaneOnly = join(dir, 'control-plane.yaml');
    const manifests = await runCli(['plan', RELEASE, ...registryFlags, '-o', 'yaml']);
    await writeFile(controlPlaneOnly, manifests.stdout.split(/^---$/m).filter((document) => document.includes(`name: ${CONTROL_PLANE_SET}`)).join('---'));
    const hour = new Date().getUTCHours();
    const window = `${String(hour).padStart(2, '0')}:00-${String((hour + 3) % 24).padStart(2, '0')}:00`;
    const go = await runCli(['preflight', controlPlaneOnly, ...registryFlags, '--link-rate', LINK_RATE, '--window', window, '--window-tz', 'UTC', ...kube]);
    console.log(`$ prestage preflight control-plane.yaml --link-rate ${LINK_RATE} --window ${window} --window-tz UTC ...  (exit ${go.code})\n${go.stdout}`);
    expect([go.code, go.stderr]).toEqual([0, 'link cap: 512 KiB/s = 524 kB/s (4.19 Mbit/s)\n']);
    expect(go.stdout).toMatch(/^master-0 .* GO$/m);
    expect(go.stdout).toMatch(/window .*: fits$/m);
    expect(go.stdout.trimEnd().split('\n').at(-1)).toBe('GO: 1 node, 1 set, every node has the room and staging fits the window');

    // Staging as a user does it, under the cap; worker-1's agent refuses its set as the preflight said.
    const applied = await runCli(['apply', RELEASE, ...registryFlags, '--link-rate', LINK_RATE, ...kube]);
    expect([applied.code, applied.stderr]).toEqual([0, 'link cap: 512 KiB/s = 524 kB/s (4.19 Mbit/s)\n']);
    // From the sets applied (apply's own plan reads are before them) to the last set done.
    const appliedAt = performance.now();
    // As an admin watches it: wait's JSON events, the link's measured rate among them, for the report.
    const watching = startCli(['wait', CONTROL_PLANE_SET, '-o', 'json', '--timeout', '10m', ...kube]);
    await waitFor('master-0 and worker-0 to hold their sets, worker-1 to refuse', async () => {
      const sets = (await statuses()).flatMap((status) => (status.status?.pinnedImageSets ?? []).map((set) => ({ node: status.metadata.name, ...set })));
      const done = (node: string, name: string) => sets.some((set) => set.node === node && set.name === name && set.currentGeneration === set.desiredGeneration);
      const refused = sets.some((set) => set.node === 'worker-1' && set.lastFailedGenerationError?.includes('not enough disk'));
      return done('master-0', CONTROL_PLANE_SET) && done('worker-0', WORKER_SET) && refused ? true : undefined;
    }, 600_000, 250);
    const stagedSeconds = (performance.now() - appliedAt) / 1000;
    const waited = await watching.done;
    expect(waited.code, waited.stderr).toBe(0);
    const events = join(dir, 'wait.jsonl');
    await writeFile(events, waited.stdout);

    const served = await servedToNodes(offsets);
    console.log(`preflight fetch per node ${JSON.stringify(Object.fromEntries(preflight.nodes.map((node) => [node.node, node.fetchBytes])))}; the registries served their CRI-O ${JSON.stringify(served)}`);
    for (const node of ['master-0', 'worker-0']) {
      const predicted = byNode.get(node)!.fetchBytes;
      expect(Math.abs(served[node]! - predicted) / served[node]!).toBeLessThanOrEqual(0.01);
    }
    // Refused whole: nothing of it pulled, only the agent's size reads (a gzip trailer of 4 bytes per layer).
    expect(served['worker-1']).toBeLessThan(4 * 2 ** 10);
    // The ETA: the bytes the admitted sets take over the link at the cap.
    const eta = preflight.eta!;
    console.log(`eta ${eta.seconds} s for ${preflight.totals.linkBytes} bytes at ${eta.bytesPerSecond} B/s; the capped stage took ${stagedSeconds.toFixed(1)} s (error ${((100 * (eta.seconds - stagedSeconds)) / stagedSeconds).toFixed(1)} %)`);
    expect(preflight.totals.linkBytes).toBe(byNode.get('master-0')!.fetchBytes + byNode.get('worker-0')!.fetchBytes);
    // One stage's time on a shared 2-core host varies by itself: the same stage took 65-82 s in
    // runs minutes apart. So one run is held to a third here; the 15 % goal is the median error
    // over repeated stages (npm run bench:eta, docs/benchmarks.md).
    expect(Math.abs(eta.seconds - stagedSeconds) / stagedSeconds).toBeLessThanOrEqual(1 / 3);

    // After staging: the staged nodes have nothing left to fetch or write; worker-1 is still NO-GO.
    const after = await runCli(['preflight', ...registryFlags, '--link-rate', LINK_RATE, '-o', 'json', ...kube]);
    expect(after.code, after.stderr).toBe(1);
    const again = new Map(parsed(after.stdout).nodes.map((node) => [node.node, node]));
    expect([again.get('master-0')!.fetchBytes, again.get('master-0')!.writeBytes, again.get('worker-0')!.fetchBytes, again.get('worker-0')!.writeBytes]).toEqual([0, 0, 0, 0]);
    expect(again.get('worker-1')!.verdict).toBe('NO-GO');

    // The report: one page, opened by headless Chromium with the network cut off.
    const html = join(dir, 'staging.html');
    const reported = await runCli(['report', '--html', html, '--events', events, ...registryFlags, ...kube]);
    expect([reported.code, reported.stderr]).toEqual([0, `wrote ${html}: 3 nodes x 2 sets, NO-GO\n`]);
    const json = JSON.parse((await runCli(['report', ...registryFlags, '-o', 'json', '--no-preflight', ...kube])).stdout) as StagingReport;
    expect(json.cells.map((cell) => [cell.node, cell.set, cell.state])).toEqual([
      ['master-0', CONTROL_PLANE_SET, 'ready'],
      ['worker-0', WORKER_SET, 'ready'],
      ['worker-1', WORKER_SET, 'failed'],
    ]);
    const screenshot = join(dir, 'report.png');
    const { dom } = await renderPage(html, { screenshot, width: 1200, height: 1000 });
    for (const node of ['master-0', 'worker-0', 'worker-1']) expect(dom).toContain(`data-node="${node}"`);
    for (const set of [CONTROL_PLANE_SET, WORKER_SET]) expect(dom).toContain(`data-set="${set}"`);
    expect(dom).toMatch(/id="verdict"[^>]*>\s*NO-GO\s*</);
    expect(dom).toContain('not enough disk');
    // The link over the stage, from wait's events (one per snapshot with a measured rate): bars under the cap's line.
    const bars = [...dom.matchAll(/<rect class="bar"/g)].length;
    expect(bars).toBeGreaterThanOrEqual(2);
    expect(dom).toContain('cap 512.0 KiB/s');
    expect((await readFile(screenshot)).subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    // `PRESTAGE_DOCS_SCREENSHOT=DIR npm test -- test/preflight.test.ts` keeps the page and its picture for docs/preflight.md.
    if (process.env.PRESTAGE_DOCS_SCREENSHOT) {
      await mkdir(process.env.PRESTAGE_DOCS_SCREENSHOT, { recursive: true });
      await copyFile(screenshot, join(process.env.PRESTAGE_DOCS_SCREENSHOT, 'staging-report.png'));
      await copyFile(html, join(process.env.PRESTAGE_DOCS_SCREENSHOT, 'staging-report.html'));
    }
  }, 900_000);
});
