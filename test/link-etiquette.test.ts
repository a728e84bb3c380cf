/**
 * Sharing the slow link politely, on the real thing: the test bed's kube-apiserver and 3 nodes
 * (one control plane, two workers), each with its own CRI-O pulling quay.io from the fixture
 * registry through the fault proxy (the link, which counts the bytes it carries per second),
 * and one real `prestage agent` process per node as the DaemonSet runs them.
 *
 * - a staging window: shut when the sets arrive (nothing pulls, each node says until when),
 *   open, closing mid-stage (no new pull starts), open again: the stage completes. The agents'
 *   wall clock is moved by the test (`support/clock-shift.mjs`), not waited for;
 * - pause and resume mid-stage: nothing pulled is lost, nothing is pulled twice;
 * - windows shut: no request crosses the link at all (the agents size and charge at the opening);
 * - `stage --link-rate` at 256 KiB/s (started while its window is shut: nothing at all
 *   crosses until it opens) and 64 KiB/s, the plan's own reads over the link too, and few large
 *   images (each layer more than 5 s of the cap) through the agents' link relay at 256 and
 *   64 KiB/s: the link never carries more than the cap averaged over any 5 s, from the first second.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { NodePinnedImages, PinnedImageSet } from '../src/api/prestage.js';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import { AGENT_NODE_OPTIONS } from '../src/install/manifests.js';
import { KubeClient } from '../src/kube/client.js';
import { formatBytes } from '../src/units.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { waitFor, type Daemon } from './cluster/processes.js';
import { linkWindows, startFaultProxy, type FaultProxy } from './harness/fault-proxy.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { startNodeAgent, withCri } from './support/agent-bed.js';
import { file, pushImage } from './support/built-images.js';
import { runCli } from './support/cli.js';

const NAMESPACE = 'prestage';
const MiB = 2 ** 20;
const CLOCK_SHIFT = fileURLToPath(new URL('./support/clock-shift.mjs', import.meta.url));
const truth = inject('fixtureTruth');

let dir: string;
let registry: RegistryHandle;
let link: FaultProxy;
let bigRegistry: RegistryHandle;
let bigLink: FaultProxy;
let largeSetFile: string;
let cluster: TestCluster;
let client: KubeClient;
let kube: string[];
let registryFlags: string[];
let clockFile: string;
const agents = new Map<string, Daemon>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-link-'));
  clockFile = join(dir, 'clock-offset');
  await writeFile(clockFile, '0');
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  link = await startFaultProxy({ upstream: registry.url });
  // Few large images, in a registry of their own behind a link of its own (large.example's mirror on the nodes).
  bigRegistry = await startRegistry();
  bigLink = await startFaultProxy({ upstream: bigRegistry.url });
  const large = await Promise.all([0, 1].map(async (n) => (await pushImage(bigRegistry.host, `prestage-test/large-${n}`, [[file(`large-${n}.bin`, randomBytes(1.5 * MiB))]], {})).replace(bigRegistry.host, 'large.example')));
  largeSetFile = join(dir, 'large-images.yaml');
  await writeFile(largeSetFile, [
    'apiVersion: machineconfiguration.openshift.io/v1',
    'kind: PinnedImageSet',
    'metadata:',
    '  name: large-images',
    '  labels:',
    '    machineconfiguration.openshift.io/role: master',
    'spec:',
    '  pinnedImages:',
    ...large.map((image) => `  - name: ${image}`),
    '',
  ].join('\n'));
  // Every test counts where the bytes leave for the cluster: heads too, each connection held to a 64 KiB TCP window as a link holds it.
  for (const proxy of [link, bigLink]) {
    proxy.setWindow(64 * 1024);
    proxy.countHeads(true);
  }
  cluster = await startCluster({ workers: 2, registryMirrors: { 'quay.io': link.host, 'large.example': bigLink.host }, insecureRegistries: [link.host, bigLink.host] });
  client = new KubeClient(cluster.kubeConfig);
  kube = ['--kubeconfig', cluster.kubeconfigPath];
  // The CLI reads the release straight from the registry (where it runs); the nodes pull over the link.
  registryFlags = ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host, '--no-cluster'];
  const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--apply', ...kube]);
  expect([installed.code, installed.stderr]).toEqual([0, '']);
  // Node as the DaemonSet runs it, and the shifted clock.
  const env = { ...process.env, NODE_OPTIONS: `${AGENT_NODE_OPTIONS} --import=${CLOCK_SHIFT}`, PRESTAGE_TEST_CLOCK_FILE: clockFile };
  for (const node of cluster.nodes) agents.set(node.name, await startNodeAgent(cluster, node, { dir, namespace: NAMESPACE, env, args: ['--concurrency', '4', '--control-plane-concurrency', '4'] }));
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.allSettled([...agents.values()].map((agent) => agent.stop(30_000)));
  await cluster?.stop();
  await link?.stop();
  await registry?.stop();
  await bigLink?.stop();
  await bigRegistry?.stop();
  if (dir && !process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
});

/** The agents' wall clock reads `hhmmss` UTC (today) now. */
async function setAgentClock(hhmmss: string): Promise<void> {
  const target = Date.parse(`${new Date().toISOString().slice(0, 10)}T${hhmmss}Z`);
  if (!Number.isFinite(target)) throw new Error(`not a time of day: ${hhmmss}`);
  await writeFile(clockFile, String(target - Date.now()));
}

/** The release's images each node stores now. */
async function storedCounts(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const node of cluster.nodes) counts[node.name] = await withCri(node, async (cri) => (await cri.listImages()).filter((image) => image.repoDigests.some((name) => name.startsWith('quay.io/openshift-release-dev/'))).length);
  return counts;
}

async function statuses(): Promise<NodePinnedImages[]> {
  return (await client.get<{ items: NodePinnedImages[] }>(AGENT_PATHS.nodePinnedImages)).items;
}

/** Every prestage set deleted, the agents' pins gone, and the release's images removed from every node: fresh nodes again. */
async function reset(): Promise<void> {
  const sets = (await client.get<{ items: PinnedImageSet[] }>(AGENT_PATHS.pinnedImageSets)).items;
  for (const set of sets) await client.request('DELETE', `${AGENT_PATHS.pinnedImageSets}/${set.metadata.name}`);
  await waitFor('the agents to unpin', async () => ((await Promise.all(cluster.nodes.map((node) => withCri(node, async (cri) => (await cri.listImages()).some((image) => image.pinned && image.repoDigests.some((name) => name.startsWith('quay.io/openshift-release-dev/'))))))).some(Boolean) ? undefined : true), 60_000, 500);
  for (const node of cluster.nodes) {
    await withCri(node, async (cri) => {
      for (const image of await cri.listImages()) if (image.repoDigests.some((name) => name.startsWith('quay.io/openshift-release-dev/'))) await cri.removeImage(image.id);
    });
  }
  expect(Object.values(await storedCounts())).toEqual([0, 0, 0]);
}

/** When either link last carried a byte (`performance.now()`; 0 before any since its stats were reset). */
function lastLinkByte(): number {
  return Math.max(link.stats.lastByteAt, bigLink.stats.lastByteAt);
}

/** Until neither link has carried a byte for `ms`. */
async function linkQuiet(ms: number): Promise<void> {
  await waitFor(`the links quiet for ${ms} ms`, async () => (performance.now() - lastLinkByte() >= ms ? true : undefined), 120_000, 250);
}

/** Once no set pins them any more, the images under `prefix` removed from every node. */
async function removeImages(prefix: string): Promise<void> {
  const named = (image: { repoDigests: readonly string[] }) => image.repoDigests.some((name) => name.startsWith(prefix));
  await waitFor('the agents to unpin', async () => ((await Promise.all(cluster.nodes.map((node) => withCri(node, async (cri) => (await cri.listImages()).some((image) => image.pinned && named(image)))))).some(Boolean) ? undefined : true), 60_000, 500);
  for (const node of cluster.nodes) {
    await withCri(node, async (cri) => {
      for (const image of await cri.listImages()) if (named(image)) await cri.removeImage(image.id);
    });
  }
}

/**
 * Every prestage set deleted, then until no pull is under way any more (the images each node
 * stores unchanged over 8 s): after a stage that gave up waiting, its pulls end before the nodes
 * are emptied, or one ending after the removal would store its image again.
 */
async function stopStaging(): Promise<void> {
  const sets = (await client.get<{ items: PinnedImageSet[] }>(AGENT_PATHS.pinnedImageSets)).items;
  for (const set of sets) await client.request('DELETE', `${AGENT_PATHS.pinnedImageSets}/${set.metadata.name}`);
  // Through the relay a pull crosses at the cap, so a big one may run longer than 8 s without
  // storing an image: the links quiet for 8 s too, or its last bytes would count in the next run.
  for (let before = JSON.stringify(await storedCounts()), byteAt = lastLinkByte(); ; ) {
    await sleep(8_000);
    const now = JSON.stringify(await storedCounts());
    if (now === before && lastLinkByte() === byteAt) return;
    [before, byteAt] = [now, lastLinkByte()];
  }
}

/** `pulled` log lines per node and image since `offsets` (the agents' log lengths then). */
function pullsSince(offsets: ReadonlyMap<string, number>): Map<string, Map<string, number>> {
  const pulls = new Map<string, Map<string, number>>();
  for (const [node, agent] of agents) {
    const counts = new Map<string, number>();
    for (const line of agent.logSince(offsets.get(node) ?? 0).split('\n')) {
      if (!line.includes('"msg":"pulled"')) continue;
      const image = (JSON.parse(line) as { image: string }).image;
      counts.set(image, (counts.get(image) ?? 0) + 1);
    }
    pulls.set(node, counts);
  }
  return pulls;
}

function logOffsets(): Map<string, number> {
  return new Map([...agents].map(([node, agent]) => [node, agent.logSince(0).length]));
}

describe('sharing the slow link', () => {
  it('keeps to a staging window: nothing starts outside it, a close mid-stage stops new pulls, and the stage completes once it reopens', async () => {
    // A window that holds the real clock for hours (the CLI's: a capped stage's own reads keep to
    // the window too), and the agents' clock moved outside it, to its close, then to its opening.
    const hour = new Date().getUTCHours();
    const hh = (h: number) => String((h + 24) % 24).padStart(2, '0');
    const at = (h: number) => `${hh(h)}:00`;
    const [start, end] = [at(hour - 1), at(hour + 3)];
    const window = `${start}-${end}`;
    const note = `paused until ${start} UTC (staging windows ${window})`;
    await setAgentClock(`${hh(hour + 9)}:00:00`);
    // From here until the window opens, nothing may cross the link: the agents size and charge at the opening.
    link.resetStats();
    // As a user runs it: stage plans, applies with the window and the cap on the sets, and waits.
    const staging = runCli(['stage', truth.release.pullSpec, ...registryFlags, '--window', window, '--window-tz', 'UTC', '--link-rate', '1MiB/s', '--timeout', '5m', ...kube]);
    // Each node says why it waits, and pulls nothing.
    await waitFor(`every node to report its sets paused until ${start}`, async () => {
      const entries = (await statuses()).flatMap((status) => status.status?.pinnedImageSets ?? []).filter((set) => set.name.startsWith('prestage-4.16.3-'));
      // One set per node: the control plane's on master-0, the workers' on each worker.
      return entries.length === 3 && entries.every((set) => set.waiting === note) ? true : undefined;
    }, 180_000, 500); // A deadline, not a pace: over 60 s seen on a busy 2-core host.
    expect(Object.values(await storedCounts())).toEqual([0, 0, 0]);
    // A window re-check (every 10 s) later still: no request at all has crossed the link while every window was shut.
    await sleep(12_000);
    console.log(`windows shut: ${link.stats.requests} requests, ${link.stats.bytesSent} bytes over the link`);
    expect({ requests: link.stats.requests, bytes: link.stats.bytesSent }).toEqual({ requests: 0, bytes: 0 });

    // The window opens 45 s before its close; the agents look again within 10 s, then size,
    // check and charge what it lets through before they pull.
    await setAgentClock(`${hh(hour + 2)}:59:15`);
    const closesAt = Date.now() + 45_000;
    // Staging under way in the window: the agents' reads over the link (their size reads come
    // before the first pull), or an image already stored. Before the close, however busy the host.
    await waitFor('staging to start in the window', async () => (link.stats.requests > 0 || Object.values(await storedCounts()).some((count) => count > 0) ? true : undefined), Math.max(1_000, closesAt - Date.now() - 1_000), 250);
    // Past the close, and past the pulls it found under way (non-strict: they finish, through the
    // relay at the cap, so until the link has been quiet a while).
    await sleep(Math.max(0, closesAt - Date.now()));
    await linkQuiet(3_000);
    const atClose = await storedCounts();
    // Shut again: nothing crosses the link, the agents' size reads included (they stop at the close).
    link.resetStats();
    await sleep(8_000);
    const later = await storedCounts();
    const whileShut = { requests: link.stats.requests, bytes: link.stats.bytesSent };
    const expected = await statuses();
    const incomplete = expected.flatMap((status) => status.status?.pinnedImageSets ?? []).filter((set) => set.currentGeneration !== set.desiredGeneration);
    console.log(`window closed mid-stage: images per node at the close ${JSON.stringify(atClose)}, 8 s later ${JSON.stringify(later)}; ${incomplete.length} node sets incomplete, waiting: ${incomplete[0]?.waiting}`);
    expect(later).toEqual(atClose);
    console.log(`window shut again: ${whileShut.requests} requests, ${whileShut.bytes} bytes over the link in 8 s`);
    expect(whileShut).toEqual({ requests: 0, bytes: 0 });
    expect(incomplete.length).toBeGreaterThan(0);
    expect(incomplete.every((set) => set.waiting === note)).toBe(true);

    // It opens again: the stage completes.
    await setAgentClock(`${hh(hour - 2)}:59:58`);
    const staged = await staging;
    console.log(`$ prestage stage ${truth.release.pullSpec} --window ${window} --window-tz UTC --link-rate 1MiB/s ...  (exit ${staged.code})\n${staged.stdout}`);
    // The one stderr line a capped stage gives: the cap it understood, in both units.
    expect([staged.code, staged.stderr]).toEqual([0, 'link cap: 1 MiB/s = 1.05 MB/s (8.39 Mbit/s)\n']);
    expect(staged.stdout).toContain(`note: ${note}`);
    expect(staged.stdout).toMatch(/^link: .* of the 1\.0 MiB\/s cap/m);
    await writeFile(clockFile, '0');
  }, 300_000);

  it('pauses and resumes mid-stage: what was pulled stays, nothing is pulled twice, and the stage completes', async () => {
    // The agents' clock is the real one again, whatever an earlier test left.
    await writeFile(clockFile, '0');
    await reset();
    const offsets = logOffsets();
    link.resetStats();
    const applied = await runCli(['apply', truth.release.pullSpec, ...registryFlags.slice(0, 4), '--link-rate', '1MiB/s', ...kube]);
    expect([applied.code, applied.stderr]).toEqual([0, 'link cap: 1 MiB/s = 1.05 MB/s (8.39 Mbit/s)\n']);
    await waitFor('some pulls', async () => (Object.values(await storedCounts()).reduce((a, b) => a + b, 0) >= 20 ? true : undefined), 60_000, 250);
    const paused = await runCli(['pause', ...kube]);
    expect([paused.code, paused.stderr]).toEqual([0, '']);
    expect(paused.stdout).toContain('paused prestage-4.16.3-worker (agent: no new pulls start; pulls under way finish; nothing is unpinned)');
    // Pulls under way finish (through the relay at the cap, so until the link has been quiet a
    // while, not a fixed time: on a busy host one took longer than 4 s); then nothing more.
    await linkQuiet(3_000);
    const atPause = await storedCounts();
    await sleep(6_000);
    expect(await storedCounts()).toEqual(atPause);
    const notes = (await statuses()).flatMap((status) => (status.status?.pinnedImageSets ?? []).map((set) => ({ node: status.metadata.name, set: set.name, done: set.currentGeneration === set.desiredGeneration, waiting: set.waiting })));
    expect(notes.filter((note) => !note.done).length).toBeGreaterThan(0);
    expect(notes.filter((note) => !note.done && !note.waiting?.startsWith('paused by prestage pause at '))).toEqual([]);
    const resumed = await runCli(['resume', ...kube]);
    expect([resumed.code, resumed.stderr]).toEqual([0, '']);
    const waited = await runCli(['wait', '--timeout', '5m', ...kube]);
    expect([waited.code, waited.stderr]).toEqual([0, '']);
    // Nothing lost: every node has at least what it had at the pause (all of its sets now); nothing pulled twice.
    const after = await storedCounts();
    for (const node of Object.keys(atPause)) expect(after[node]).toBeGreaterThanOrEqual(atPause[node]!);
    const pulls = pullsSince(offsets);
    const twice = [...pulls].flatMap(([node, counts]) => [...counts].filter(([, count]) => count > 1).map(([image]) => `${node} ${image}`));
    console.log(`pause/resume: images per node at the pause ${JSON.stringify(atPause)}, at the end ${JSON.stringify(after)}; pulls per node ${JSON.stringify(Object.fromEntries([...pulls].map(([node, counts]) => [node, counts.size])))}, pulled twice: ${twice.length}`);
    expect(twice).toEqual([]);
    // The whole stage, its pause and resume included, under the cap: no 5 s above it.
    const windows = linkWindows(link.stats.perSecond, 5);
    console.log(`pause/resume at --link-rate 1MiB/s: ${formatBytes(link.stats.bytesSent)} in ${windows.seconds} s; max over 5 s ${(windows.maxBytesPerSecond / MiB).toFixed(3)} of the cap, mean ${(windows.meanBytesPerSecond / MiB).toFixed(3)}`);
    expect(windows.maxBytesPerSecond).toBeLessThanOrEqual(MiB * 1.05);
  }, 420_000);

  it('holds the link to the cap from the first second at 256 KiB/s and 64 KiB/s, for many small images and for few large ones, counted where the bytes leave for the cluster (heads too, a 64 KiB TCP window); a capped stage started while its window is shut sends nothing at all until it opens', async () => {
    await writeFile(clockFile, '0');
    // The CLI reads the release over the link as well: its manifests, configs, layer tails and payload are the stage's first bytes there.
    const overLink = ['--mirror', `quay.io=${link.host}`, '--insecure-registry', link.host, '--no-cluster'];
    const report = (what: string, proxy: FaultProxy, cap: number) => {
      const windows = linkWindows(proxy.stats.perSecond, 5);
      const first = Math.min(...proxy.stats.perSecond.keys());
      console.log(
        `${what}: ${formatBytes(proxy.stats.bytesSent)} in ${proxy.stats.requests} requests over ${windows.seconds} s; max over 5 s ${formatBytes(windows.maxBytesPerSecond)}/s (${(windows.maxBytesPerSecond / cap).toFixed(3)} of ${formatBytes(cap)}/s), mean ${(windows.meanBytesPerSecond / cap).toFixed(3)}\n` +
          `per second (KiB): ${[...proxy.stats.perSecond].sort((a, b) => a[0] - b[0]).map(([second, bytes]) => `${second - first}:${Math.round(bytes / 1024)}`).join(' ')}`,
      );
      return windows.maxBytesPerSecond / cap;
    };
    // Many small images: the fixture release's, 58 a node. Each stage runs its first 40 s (the
    // plan's reads, the agents' sizing and the first pulls, where the most crossed in a window)
    // and gives up waiting (exit 124); the sets are then deleted and the nodes emptied, the link
    // still counted: the pulls under way finish in the count.
    const stage = async (cap: number | undefined, extra: readonly string[] = []) => {
      link.resetStats();
      const rate = cap === undefined ? [] : ['--link-rate', String(cap)];
      const staged = await runCli(['stage', truth.release.pullSpec, ...overLink, ...rate, ...extra, '--timeout', '40s', ...kube]);
      if (cap !== undefined || staged.code !== 0) {
        expect(staged.code, staged.stderr).toBe(124);
        const lines = staged.stderr.replace(/^link cap: .*\n/, '').trim().split('\n');
        expect(lines.filter((line) => !line.startsWith('prestage: warning: ')), staged.stderr).toHaveLength(1);
      }
      await stopStaging();
      await reset();
      return staged;
    };
    // Few large images: two of one 1.5 MiB layer each, for the control plane: each layer is more
    // than 5 s of either cap, so only a pull whose every part is paid before it is asked for keeps it.
    const large = async (cap: number | undefined) => {
      bigLink.resetStats();
      const rate = cap === undefined ? [] : ['--link-rate', String(cap)];
      const applied = await runCli(['apply', largeSetFile, ...rate, ...kube]);
      expect([applied.code, applied.stderr.replace(/^link cap: .*\n/, '')]).toEqual([0, '']);
      const waited = await runCli(['wait', '--timeout', '3m', ...kube]);
      expect([waited.code, waited.stderr]).toEqual([0, '']);
      await client.request('DELETE', `${AGENT_PATHS.pinnedImageSets}/large-images`);
      await removeImages('large.example/');
    };
    await reset();
    // Uncapped, both carry more than a cap over some 5 s: the checks below can fail.
    await stage(undefined);
    expect(report('small images, uncapped', link, MiB)).toBeGreaterThan(1.05);
    await large(undefined);
    expect(report('large images, uncapped', bigLink, 256 * 1024)).toBeGreaterThan(1.05);

    // (1 MiB/s: the pause test's whole stage holds it, measured the same way.)
    const ratios: Array<[string, number]> = [];
    // 256 KiB/s with a window that opens at the next minute: until then, nothing crosses the
    // link, the CLI's own plan included (it waits for the opening), then the cap holds from its first second.
    const now = new Date();
    const opensAt = Math.ceil((now.getTime() + 1) / 60_000) * 60_000;
    const hhmm = (at: number) => new Date(at).toISOString().slice(11, 16);
    link.resetStats();
    const windowed = stage(256 * 1024, ['--window', `${hhmm(opensAt)}-${hhmm(opensAt + 30 * 60_000)}`, '--window-tz', 'UTC']);
    await sleep(Math.max(0, opensAt - Date.now() - 1_000));
    const beforeOpening = { requests: link.stats.requests, bytes: link.stats.bytesSent };
    console.log(`window shut until ${hhmm(opensAt)} UTC: ${beforeOpening.requests} requests, ${beforeOpening.bytes} bytes over the link`);
    expect(beforeOpening).toEqual({ requests: 0, bytes: 0 });
    const staged = await windowed;
    expect(staged.stderr).toContain("--window: the staging windows are shut; the plan's reads over the link wait for the opening");
    ratios.push(['small 256 KiB/s', report('small images at 256 KiB/s, from the opening', link, 256 * 1024)]);
    await stage(64 * 1024);
    ratios.push(['small 64 KiB/s', report('small images at 64 KiB/s', link, 64 * 1024)]);
    await large(256 * 1024);
    ratios.push(['large 256 KiB/s', report('large images at 256 KiB/s', bigLink, 256 * 1024)]);
    await large(64 * 1024);
    ratios.push(['large 64 KiB/s', report('large images at 64 KiB/s', bigLink, 64 * 1024)]);
    console.log(`max over any 5 s / cap: ${ratios.map(([what, ratio]) => `${what} ${ratio.toFixed(3)}`).join(', ')}`);
    // Every byte (the plan's reads, the agents' size reads, the pulls through the relay, the
    // answers' heads) is paid on the ledger before it is asked for, and counted until 5 s after it crossed.
    for (const [what, ratio] of ratios) expect(ratio, what).toBeLessThanOrEqual(1.05);
  }, 900_000);
});
