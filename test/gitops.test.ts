/**
 * GitOps controllers' view of prestage.dev sets, on the test bed: the real API server, CRI-O per
 * node and the real `prestage agent` per node (as the DaemonSet runs it; the one holding the
 * set-status Lease writes the sets' status). What the controllers see is computed by their own
 * code: a real kubectl (`wait --for=condition=Ready`), kstatus from sigs.k8s.io/cli-utils (Flux's
 * health checks) and Argo CD's Lua health script under gopher-lua, both in tools/testbed/gitops-check.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { API_VERSION, GROUP, PINNED_IMAGE_SETS, VERSION, type PinnedImageSet, type SetStatus } from '../src/api/prestage.js';
import { KubeClient } from '../src/kube/client.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { waitFor, type Daemon } from './cluster/processes.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { runCli } from './support/cli.js';
import { pinState, startNodeAgent } from './support/agent-bed.js';

const run = promisify(execFile);
const HEALTH_LUA = fileURLToPath(new URL('../docs/argocd/prestage.dev_PinnedImageSet-health.lua', import.meta.url));
const NAMESPACE = 'prestage';
const truth = inject('fixtureTruth');
const IMAGES = truth.components.slice(0, 2).map((component) => component.pullSpec);
/** A digest no registry has, under the component repository the mirror serves. */
const MISSING = `quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:${'0badc0de'.repeat(8)}`;
const SETS = `/apis/${GROUP}/${VERSION}/${PINNED_IMAGE_SETS}`;

let dir: string;
let registry: RegistryHandle;
let cluster: TestCluster;
let client: KubeClient;
const agents: Daemon[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-gitops-'));
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  cluster = await startCluster({ workers: 1, registryMirrors: { 'quay.io': registry.host }, insecureRegistries: [registry.host] });
  client = new KubeClient(cluster.kubeConfig);
  const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--apply', '--kubeconfig', cluster.kubeconfigPath]);
  expect(installed.code).toBe(0);
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
  await cluster?.stop();
  await registry?.stop();
  if (dir && !process.env.PRESTAGE_TESTBED_KEEP) await rm(dir, { recursive: true, force: true });
});

function set(name: string, images: readonly string[]): PinnedImageSet {
  return { apiVersion: API_VERSION, kind: 'PinnedImageSet', metadata: { name }, spec: { pinnedImages: images.map((image) => ({ name: image })) } };
}

const read = (name: string) => client.get<PinnedImageSet & { status: SetStatus }>(`${SETS}/${name}`);

/** What Flux (kstatus) and Argo CD (the shipped Lua) make of the set as the API server returns it now. */
async function controllersSee(name: string): Promise<{ kstatus: string; argocd: string; kstatusMessage: string; argocdMessage: string }> {
  const object = JSON.stringify(await read(name));
  const check = async (...args: string[]) => {
    const child = run(cluster.binaries['gitops-check'], args);
    child.child.stdin!.end(object);
    return JSON.parse((await child).stdout) as { status: string; message: string };
  };
  const [kstatus, argocd] = await Promise.all([check('kstatus'), check('argocd-health', HEALTH_LUA)]);
  return { kstatus: kstatus.status, kstatusMessage: kstatus.message, argocd: argocd.status, argocdMessage: argocd.message };
}

/** A real `kubectl wait --for=condition=Ready`: its exit code and output. */
async function kubectlWait(name: string, timeout: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(cluster.binaries.kubectl, ['--kubeconfig', cluster.kubeconfigPath, 'wait', '--for=condition=Ready', `pinnedimageset/${name}`, `--timeout=${timeout}`]);
    return { code: 0, output: (stdout + stderr).trim() };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, output: (failed.stdout + failed.stderr).trim() };
  }
}

describe('a prestage.dev set as GitOps controllers read it', () => {
  it('reads not ready as created, before any status is written: kstatus InProgress, Argo CD Progressing, kubectl wait times out', async () => {
    await client.request('POST', SETS, { body: set('release', IMAGES) });
    const created = await read('release');
    // The CRD's default: the API server drops status on create and fills in observedGeneration 0.
    expect(created.metadata.generation).toBe(1);
    expect(created.status).toEqual({ observedGeneration: 0 });
    expect(await controllersSee('release')).toEqual({
      kstatus: 'InProgress',
      kstatusMessage: 'PinnedImageSet generation is 1, but latest observed generation is 0',
      argocd: 'Progressing',
      argocdMessage: "the set's generation 1 is not observed yet",
    });
    const waited = await kubectlWait('release', '3s');
    expect(waited.code).toBe(1);
    expect(waited.output).toMatch(/timed out waiting for the condition on pinnedimagesets\/release/);
  });

  it('goes Reconciling, then Ready once every node pinned every image; kubectl wait returns then', async () => {
    // Every node's agent but the last: the set cannot be Ready while one selected node has not
    // reported, whatever the pulls' speed, so Reconciling is seen for certain, not by a race.
    const [last, ...first] = [...cluster.nodes].reverse();
    const start = async (node: typeof last): Promise<void> => {
      agents.push(await startNodeAgent(cluster, node!, { dir, namespace: NAMESPACE, logName: `agent-${node!.name}.log` }));
    };
    for (const node of first.reverse()) await start(node);
    const seen = new Set<string>();
    const observe = async (wanted: string): Promise<true | undefined> => {
      const status = (await read('release')).status;
      for (const condition of status.conditions ?? []) if (condition.status === 'True') seen.add(`${condition.type}:${condition.reason}`);
      return seen.has(wanted) && status.readyNodes === (wanted === 'Ready:Staged' ? cluster.nodes.length : first.length) ? true : undefined;
    };
    const waiting = kubectlWait('release', '300s');
    await waitFor('release Reconciling on all nodes but one', () => observe('Reconciling:Staging'), 300_000, 100);
    const reconciling = (await read('release')).status.conditions!.find((condition) => condition.type === 'Reconciling')!;
    expect(reconciling.message).toBe(`${first.length}/${cluster.nodes.length} nodes hold every image; waiting on ${last!.name} (no report from its agent yet)`);
    await start(last);
    await waitFor('release Ready', () => observe('Ready:Staged'), 300_000, 100);
    const waited = await waiting;
    expect(waited).toEqual({ code: 0, output: 'pinnedimageset.prestage.dev/release condition met' });
    // In the order first seen: Reconciling while a node lacked the images, then Ready.
    expect([...seen]).toEqual(['Reconciling:Staging', 'Ready:Staged']);
    const { status } = await read('release');
    console.log(`$ kubectl wait --for=condition=Ready pinnedimageset/release --timeout=300s\n${waited.output}\nstatus: ${JSON.stringify(status, null, 2)}`);
    expect(status).toMatchObject({ observedGeneration: 1, nodes: cluster.nodes.length, readyNodes: cluster.nodes.length });
    expect(status.conditions!.find((condition) => condition.type === 'Ready')!.message).toBe(`${cluster.nodes.length}/${cluster.nodes.length} nodes hold and pin all 2 images`);
    expect(await controllersSee('release')).toMatchObject({ kstatus: 'Current', argocd: 'Healthy' });
    for (const node of cluster.nodes) expect(await pinState(node, IMAGES)).toEqual(Object.fromEntries(IMAGES.map((image) => [image, true])));
  });

  it('goes Stalled naming the image no registry has; kubectl wait times out while a node lacks it', async () => {
    await client.request('POST', SETS, { body: set('broken', [IMAGES[0]!, MISSING]) });
    const stalled = await waitFor('broken Stalled', async () => {
      const condition = (await read('broken')).status.conditions?.find((entry) => entry.type === 'Stalled');
      return condition?.status === 'True' ? condition : undefined;
    }, 300_000, 250);
    expect(stalled.reason).toBe('PinFailed');
    expect(stalled.message).toContain(`image ${MISSING}`);
    expect(stalled.message).toMatch(new RegExp(`^${cluster.nodes.length}/${cluster.nodes.length} nodes failed: `));
    console.log(`Stalled: ${JSON.stringify(stalled, null, 2)}`);
    const seen = await controllersSee('broken');
    console.log(`controllers: ${JSON.stringify(seen)}`);
    expect(seen).toMatchObject({ kstatus: 'Failed', argocd: 'Degraded' });
    expect(seen.argocdMessage).toContain(MISSING);
    const waited = await kubectlWait('broken', '3s');
    expect(waited.code).toBe(1);
  });

  it('a set pruned by the controller leaves no pins: the agents unpin what no set names', async () => {
    await client.request('DELETE', `${SETS}/broken`);
    await client.request('DELETE', `${SETS}/release`);
    for (const node of cluster.nodes) {
      await waitFor(`${node.name} unpins the pruned set's images`, async () => {
        const state = await pinState(node, IMAGES);
        return Object.values(state).every((pinned) => pinned !== true) ? state : undefined;
      }, 120_000, 250);
    }
  });
});
