/**
 * The MCO backend against MCO's real daemon behaviour (test/mco/simulator.ts, FACTS §3), on a
 * real kube-apiserver with OpenShift's own CRDs of both API versions: 4.21 (v1) and 4.16
 * (v1alpha1, TechPreviewNoUpgrade). Timings are MCO's divided by the simulator's timeScale.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { formatRate } from '../src/units.js';
import { KubeClient } from '../src/kube/client.js';
import { MCO_GROUP, MCO_V1, mcoPaths, type McoVersions } from '../src/cluster/mco/backend.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { installMcoCrds, OPENSHIFT_4_16, OPENSHIFT_4_21 } from './mco/crds.js';
import { digestPullSpec, testPlan, writePlan } from './mco/plans.js';
import { McoSimulator } from './mco/simulator.js';
import { runCli } from './support/cli.js';

const jsonLines = (text: string) => text.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);

describe.each([
  { release: OPENSHIFT_4_21, versions: MCO_V1 },
  { release: OPENSHIFT_4_16, versions: { pinnedImageSets: 'v1alpha1', machineConfigNodes: 'v1alpha1' } as McoVersions },
])('MCO daemon behaviour, openshift/api $release.module', ({ release, versions }) => {
  const paths = mcoPaths(versions);
  let cluster: TestCluster;
  let client: KubeClient;
  let dir: string;
  let simulator: McoSimulator | undefined;
  const kube = () => ['--kubeconfig', cluster.kubeconfigPath];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'prestage-mco-daemon-'));
    cluster = await startCluster({ workers: 2 });
    client = new KubeClient(cluster.kubeConfig);
    await installMcoCrds(client, release);
  }, COLD_BUILD_TIMEOUT_MS);

  afterEach(async () => {
    expect(simulator?.errors ?? []).toEqual([]);
    simulator?.stop();
    simulator = undefined;
    // Sets of one test must not ride along in the next test's syncs.
    for (const set of (await client.get<{ items: Array<{ metadata: { name: string } }> }>(paths.pinnedImageSets)).items) await client.request('DELETE', `${paths.pinnedImageSets}/${set.metadata.name}`);
  });

  afterAll(async () => {
    simulator?.stop();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a 190-image control-plane set pulled across ~20 sync deadlines is progressing throughout and ready at the end', async () => {
    // MCO at 1/200 of its real time: a 600 ms deadline, 2 ms per inspect, 1 worker on masters, 58 ms
    // per image and a 5 ms pause after each: about 9.5 images per sync, 20 deadlines for 190 images.
    simulator = await McoSimulator.start(client, { pullMs: 300, imageMs: 58 }, { versions, timeScale: 200 });
    await runCli(['apply', writePlan(dir, testPlan('big', { imageCount: 190 })), ...kube()]);
    const result = await runCli(['wait', 'big-control-plane', '-o', 'json', '--fail-after', '2s', '--timeout', '120s', ...kube()]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(simulator.deadlinesMissed.get('master-0')).toBeGreaterThanOrEqual(15);
    const master = jsonLines(result.stdout).filter((e) => e['type'] === 'node' && e['node'] === 'master-0');
    const requeue = 'requeue: prefetching images incomplete after timeout: 2m0s';
    // 4.16-4.18 (v1alpha1) write the requeue into the Degraded condition. 4.19+ (v1) into the entries
    // only, and between deadlines Degraded (True) carries a generic message: wait remembers that the
    // node's last error was the deadline.
    const note = versions.machineConfigNodes === 'v1' ? `MCO reports Degraded since its last deadline (${requeue}); still pulling` : `MCO sync deadline passed, pulling on (${requeue})`;
    expect(master.some((e) => e['phase'] === 'progressing' && e['note'] === note)).toBe(true);
    expect(master.filter((e) => e['phase'] === 'degraded')).toEqual([]);
    expect(master.at(-1)).toMatchObject({ phase: 'done', currentGeneration: 1, desiredGeneration: 1 });

    // The pool's own count (poolSynchronizersStatus), as MCO's controller writes it.
    let status = '';
    for (const deadline = Date.now() + 10_000; Date.now() < deadline && !status.includes('pool master: 1/1'); await new Promise((r) => setTimeout(r, 200))) {
      status = (await runCli(['status', 'big-control-plane', ...kube()])).stdout;
    }
    expect(status).toMatch(/\n\npool master: 1\/1 nodes have every PinnedImageSet\n$/);
  });

  /**
   * The ETA wait prints (MCO's pace, pace.ts) against the simulated daemon: one node pulling (a
   * set of one role), so nothing shares its link; `imageMs` is the pull time the link rate gives
   * the average image. Predicted and actual are in MCO's real seconds (actual x timeScale).
   */
  it.each([
    { role: 'control-plane', node: 'master-0', scale: 100, realPullSeconds: 3 },
    { role: 'worker', node: 'worker-0', scale: 25, realPullSeconds: 0 },
  ] as const)('predicts a $role node\'s time ($node, $realPullSeconds s per image) within 10% of the daemon\'s', async ({ role, node, scale, realPullSeconds }) => {
    const full = testPlan(`eta-${role}`, { imageCount: 150 });
    const plan = { ...full, sets: full.sets.filter((s) => s.role === role) };
    const set = plan.sets[0]!;
    simulator = await McoSimulator.start(client, { pullMs: 0, imageMs: (realPullSeconds * 1000) / scale }, { versions, timeScale: scale });
    const rate = realPullSeconds ? Math.round(set.compressedBytes / set.images.length / realPullSeconds) : undefined;
    await runCli(['apply', writePlan(dir, plan), ...kube()]);
    const result = await runCli(['wait', set.name, '-o', 'json', '--timeout', '120s', ...(rate ? ['--link-rate', String(rate)] : []), ...kube()]);
    // The cap as understood, echoed in both units, is all stderr says.
    expect(result.stderr).toBe(rate ? `link cap: ${formatRate(rate)}\n` : '');
    expect(result.code).toBe(0);
    const events = jsonLines(result.stdout);
    const pace = events.find((e) => e['type'] === 'pace') as { nodes: Array<{ node: string; seconds: number; deadlines: number }> };
    const predicted = pace.nodes.find((n) => n.node === node)!;
    expect(events.some((e) => e['type'] === 'node' && e['node'] === node && e['phase'] === 'done')).toBe(true);
    // From the daemon's first sync to its last: the CLI's own start is not MCO's time.
    const { firstSync, completed } = simulator.timeline.get(node)!;
    const actual = ((completed! - firstSync) / 1000) * scale;
    console.log(`ETA ${role} ${node} (${versions.machineConfigNodes}): predicted ${predicted.seconds} s (${predicted.deadlines} deadlines), simulated daemon ${Math.round(actual)} s (${simulator.deadlinesMissed.get(node) ?? 0} deadlines), error ${Math.round((100 * (predicted.seconds - actual)) / actual)}%`);
    expect(Math.abs(predicted.seconds - actual) / actual).toBeLessThan(0.1);
  });

  it("a bad image in another set of the pool is named as that set's, and does not fail ours", async () => {
    const bad = digestPullSpec('missing-everywhere').replace('ocp-v4.0-art-dev', 'example-app');
    simulator = await McoSimulator.start(client, { pullMs: 300 }, { versions, timeScale: 10 });
    for (const node of ['worker-0', 'worker-1']) simulator.behave(node, { pullMs: 300, missingImages: [bad] });
    await client.request('POST', paths.pinnedImageSets, {
      body: { apiVersion: `${MCO_GROUP}/${versions.pinnedImageSets}`, kind: 'PinnedImageSet', metadata: { name: 'someone-elses', labels: { [`${MCO_GROUP}/role`]: 'worker' } }, spec: { pinnedImages: [{ name: bad }] } },
    });
    await runCli(['apply', writePlan(dir, testPlan('ours')), ...kube()]);
    const waited = await runCli(['wait', 'ours-worker', '--fail-after', '2s', '--timeout', '8s', ...kube()]);
    expect(waited.code).toBe(124);
    expect(waited.stdout).toContain(`note: error from set someone-elses (image ${bad}), not from this set`);
    expect(waited.stdout).not.toMatch(/ours-worker worker-\d: degraded/);
    const status = await runCli(['status', 'ours-worker', ...kube()]);
    expect(status.stdout).toMatch(/^worker-0 +ours-worker +0\/1\/1 +progressing +error from set someone-elses/m);

    // Once the other set is fixed (here: deleted), MCO's next sync finishes ours.
    await client.request('DELETE', `${paths.pinnedImageSets}/someone-elses`);
    const ready = await runCli(['wait', 'ours-worker', '--timeout', '30s', ...kube()]);
    expect(ready.code).toBe(0);
  });

  it('a bad image in our own set fails our set after --fail-after, naming the image', async () => {
    const plan = testPlan('mine');
    const bad = plan.sets[1]!.images[0]!;
    simulator = await McoSimulator.start(client, { pullMs: 300 }, { versions, timeScale: 10 });
    simulator.behave('worker-1', { pullMs: 300, badImages: [bad] });
    await runCli(['apply', writePlan(dir, plan), ...kube()]);
    const waited = await runCli(['wait', 'mine-worker', '--fail-after', '2s', '--timeout', '60s', ...kube()]);
    expect(waited.code).toBe(1);
    expect(waited.stderr).toMatch(new RegExp(`^prestage: error: set mine-worker failed on node worker-1 \\(degraded for \\d+ s\\): failed to pull image "${bad.replace(/[.]/g, '\\.')}" \\(5 tries\\)`));
  });

  it('an image the registry lacks fails at MCO\'s disk check (podman manifest inspect), naming it: our set fails', async () => {
    const plan = testPlan('lacking');
    const missing = plan.sets[1]!.images[0]!;
    simulator = await McoSimulator.start(client, { pullMs: 300 }, { versions, timeScale: 10 });
    simulator.behave('worker-0', { pullMs: 300, missingImages: [missing] });
    await runCli(['apply', writePlan(dir, plan), ...kube()]);
    const waited = await runCli(['wait', 'lacking-worker', '--fail-after', '2s', '--timeout', '60s', ...kube()]);
    expect(waited.code).toBe(1);
    expect(waited.stderr).toMatch(new RegExp(`^prestage: error: set lacking-worker failed on node worker-0 \\(degraded for \\d+ s\\): failed to execute podman manifest inspect for "${missing.replace(/[.]/g, '\\.')}": exit status 125\\n$`));
  });

  it('a targeted node that no MCO daemon reports fails wait after --fail-after with one line saying so', async () => {
    // A node joined after the daemons stopped: it has no MachineConfigNode.
    await client.request('POST', '/api/v1/nodes', { body: { metadata: { name: 'worker-7', labels: { 'node-role.kubernetes.io/worker': '' } } } });
    await runCli(['apply', writePlan(dir, testPlan('nodaemon')), ...kube()]);
    const waited = await runCli(['wait', 'nodaemon-worker', '--fail-after', '2s', '--timeout', '60s', ...kube()]);
    await client.request('DELETE', '/api/v1/nodes/worker-7');
    expect(waited.code).toBe(1);
    expect(waited.stderr).toMatch(/^prestage: error: set nodaemon-worker: node worker-7 has not reported for 2 s: no MachineConfigNode for this node: no MCO daemon reports it \(on 4\.16-4\.18 PinnedImageSets need TechPreviewNoUpgrade; check the machine-config-daemon pod on the node\)\n$/);
  });
});
