/**
 * `npm run bench:eta`: the error of `prestage preflight`'s ETA against the time a capped stage then
 * really takes on the test bed (the goal: |median error| <= 15 %). The test bed: master-0 and
 * worker-0 with real CRI-O, each pulling from its OWN docker-registry (one storage, holding the
 * fixture release, pushed fresh by this bench), real `prestage agent` processes (`--resync 2s`,
 * with the link relay, as the DaemonSet runs them). The CLI runs in-process (runCli, as the tests
 * run it). For each cap in BENCH_RATES (default "512KiB/s,1MiB/s"), BENCH_ROUNDS rounds (default 3):
 *   `preflight RELEASE --link-rate R -o json` (GO, exit 0 expected): its eta.seconds;
 *   `apply RELEASE --link-rate R`: from its return until every set is current on every node it
 *   selects (NodePinnedImages polled every 250 ms): the measured seconds;
 *   then the nodes emptied: the sets deleted, the agents' unpins awaited (CRI), the images removed
 *   through CRI, and the agents' statuses awaited until `held` no longer names them.
 * Printed: per round eta, measured, error = (eta - measured) / measured; per rate the median and
 * the worst error; the goal line. Exits 0 whether the goal is met or not.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Preflight } from '../src/api/preflight.js';
import { isSetDone, type NodePinnedImages, type PinnedImageSet } from '../src/api/prestage.js';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import { KubeClient } from '../src/kube/client.js';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { startCluster, type TestCluster } from '../test/cluster/index.js';
import { waitFor, type Daemon } from '../test/cluster/processes.js';
import { startRegistry, type RegistryHandle } from '../test/harness/index.js';
import { startNodeAgent, withCri } from '../test/support/agent-bed.js';
import { runCli } from '../test/support/cli.js';
import { median } from './median.js';

const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
const NAMESPACE = 'prestage';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const RATES = (process.env.BENCH_RATES ?? '512KiB/s,1MiB/s').split(',').map((rate) => rate.trim()).filter(Boolean);
const GOAL = 0.15;
const NODES = ['master-0', 'worker-0'];

const started = performance.now();
const dir = await mkdtemp(join(tmpdir(), 'prestage-bench-eta-'));
const storageDir = join(dir, 'storage');
const registries: RegistryHandle[] = [];
const agents: Daemon[] = [];
let cluster: TestCluster | undefined;
try {
  const fixture = buildReleaseFixture();
  const primary = await startRegistry({ storageDir });
  registries.push(primary);
  await pushFixture(primary.url, fixture);
  const nodeRegistries = new Map<string, RegistryHandle>();
  for (const name of NODES) {
    const registry = await startRegistry({ storageDir });
    registries.push(registry);
    nodeRegistries.set(name, registry);
  }
  cluster = await startCluster({
    workers: 1,
    insecureRegistries: registries.map((registry) => registry.host),
    perNode: Object.fromEntries(NODES.map((name) => [name, { registryMirrors: { 'quay.io': nodeRegistries.get(name)!.host } }])),
  });
  const bed = cluster;
  const client = new KubeClient(bed.kubeConfig);
  const kube = ['--kubeconfig', bed.kubeconfigPath];
  const registryFlags = ['--mirror', `quay.io=${primary.host}`, '--insecure-registry', primary.host];
  const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:bench', '--apply', ...kube]);
  if (installed.code !== 0) throw new Error(`install exited ${installed.code}: ${installed.stderr}`);
  for (const node of bed.nodes) agents.push(await startNodeAgent(bed, node, { dir, namespace: NAMESPACE, args: ['--resync', '2s'] }));
  const statuses = async () => (await client.get<{ items: NodePinnedImages[] }>(AGENT_PATHS.nodePinnedImages)).items;
  await waitFor('the agents to report what their runtimes store', async () => {
    const listed = await statuses();
    return listed.length === NODES.length && listed.every((status) => status.status?.held) ? true : undefined;
  }, 60_000, 500);
  console.log(`bench:eta  ${NODES.join(' + ')}, ${fixture.blobs.size} blobs in one storage behind ${registries.length} registries; set up in ${Math.round((performance.now() - started) / 1000)} s`);

  const rows: Array<{ rate: string; round: number; eta: number; measured: number; error: number }> = [];
  for (const rate of RATES) {
    for (let round = 1; round <= ROUNDS; round++) {
      const pre = await runCli(['preflight', RELEASE, ...registryFlags, '--link-rate', rate, '-o', 'json', ...kube]);
      if (pre.code !== 0) throw new Error(`preflight at ${rate} (round ${round}) exited ${pre.code}, not GO: ${pre.stderr.slice(-2000)}`);
      const eta = (JSON.parse(pre.stdout) as Preflight).eta;
      if (!eta) throw new Error(`preflight at ${rate} (round ${round}) gave no ETA`);

      const applied = await runCli(['apply', RELEASE, ...registryFlags, '--link-rate', rate, ...kube]);
      if (applied.code !== 0) throw new Error(`apply at ${rate} (round ${round}) exited ${applied.code}: ${applied.stderr.slice(-2000)}`);
      const appliedAt = performance.now();
      const sets = (await client.get<{ items: PinnedImageSet[] }>(AGENT_PATHS.pinnedImageSets)).items;
      const uids = new Set(sets.map((set) => set.metadata.uid));
      await waitFor(`every set current on every node at ${rate}`, async () => {
        const listed = (await statuses()).map((status) => (status.status?.pinnedImageSets ?? []).filter((set) => uids.has(set.uid)));
        const reported = new Set(listed.flat().map((set) => set.uid));
        return listed.length === NODES.length && listed.every((own) => own.length > 0 && own.every(isSetDone)) && reported.size === uids.size ? true : undefined;
      }, 1_800_000, 250);
      const measured = (performance.now() - appliedAt) / 1000;
      const row = { rate, round, eta: eta.seconds, measured, error: (eta.seconds - measured) / measured };
      rows.push(row);
      console.log(`  ${rate} round ${round}: eta ${eta.seconds.toFixed(1)} s (${eta.pullSeconds.toFixed(1)} s of pulls beyond bytes), measured ${measured.toFixed(1)} s`);

      // Empty the nodes for the next round.
      const images = new Set(sets.flatMap((set) => set.spec.pinnedImages.map((image) => image.name)));
      for (const set of sets) await client.request('DELETE', `${AGENT_PATHS.pinnedImageSets}/${set.metadata.name}`);
      const named = (image: { repoDigests: readonly string[] }) => image.repoDigests.some((name) => images.has(name));
      await waitFor('the agents to unpin', async () => ((await Promise.all(bed.nodes.map((node) => withCri(node, async (cri) => (await cri.listImages()).some((image) => image.pinned && named(image)))))).some(Boolean) ? undefined : true), 120_000, 500);
      for (const node of bed.nodes) {
        await withCri(node, async (cri) => {
          for (const image of await cri.listImages()) if (named(image)) await cri.removeImage(image.id);
        });
      }
      await waitFor("the agents' statuses to show the images gone", async () => {
        const listed = await statuses();
        return listed.every((status) => status.status?.held && !status.status.held.images.some((image) => images.has(image)) && (status.status.pinnedImageSets ?? []).every((set) => !uids.has(set.uid))) ? true : undefined;
      }, 60_000, 500);
    }
  }

  const pct = (error: number) => `${error >= 0 ? '+' : ''}${(100 * error).toFixed(1)} %`;
  console.log('\n  rate        round    eta s   measured s    error');
  for (const r of rows) console.log(`  ${r.rate.padEnd(10)}  ${String(r.round).padStart(5)}  ${r.eta.toFixed(1).padStart(7)}  ${r.measured.toFixed(1).padStart(11)}  ${pct(r.error).padStart(9)}`);
  let met = true;
  for (const rate of RATES) {
    const errors = rows.filter((r) => r.rate === rate).map((r) => r.error);
    const mid = median(errors);
    const worst = errors.reduce((a, b) => (Math.abs(b) > Math.abs(a) ? b : a));
    met &&= Math.abs(mid) <= GOAL;
    console.log(`  ${rate}: median error ${pct(mid)}, worst ${pct(worst)} (${errors.length} rounds)`);
  }
  console.log(`  goal |median error| <= ${100 * GOAL} % at every rate: ${met ? 'met' : 'not met'}`);
} finally {
  await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
  await cluster?.stop();
  await Promise.allSettled(registries.map((registry) => registry.stop()));
  await rm(dir, { recursive: true, force: true });
}
