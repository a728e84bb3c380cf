/**
 * `npm run bench:preflight`: `prestage preflight -o json` (the built bin, as a real process) on a
 * real kube-apiserver holding 1000 Node objects (3 control-plane, 997 workers) and their
 * NodePinnedImages, with 2 prestage.dev PinnedImageSets (control-plane: the fixture release's 184
 * components and its release image; worker: the 55 that run on every node), the images in a real
 * registry (the test bed's fixture release, with its shared base layers). Each node's agent status
 * reports its image filesystem and what it stores: node i holds the first (i % 50) images of its
 * sets, and every node the current release's rebuilt components (not in the sets: preflight reads
 * their layers from the registry); every 100th node's disk is too small, every 10th also stores
 * two images by tag alone. Runs preflight 3 times: wall time from spawn to exit, peak RSS as
 * `/usr/bin/time -v` reports it (Maximum resident set size, the kernel's exact high-water mark).
 * The ETA's 50 MiB/s cap is the sets' prestage.dev/link-rate annotation (`preflight --link-rate` is
 * refused: Unknown argument). Should preflight without RELEASE be refused (exit 2), it is run on the
 * same two sets written as YAML (`preflight SETS.yaml`), and says so. Goal: <= 5 s, <= 200 MiB.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';
import pLimit from 'p-limit';
import type { Preflight } from '../src/api/preflight.js';
import { API_VERSION } from '../src/api/prestage.js';
import { toAgentPinnedImageSet } from '../src/api/desired-set.js';
import { ROLE_ANNOTATION } from '../src/api/set-metadata.js';
import { LINK_RATE_ANNOTATION } from '../src/api/staging.js';
import { AGENT_PATHS } from '../src/cluster/agent/backend.js';
import { KubeClient, type KubeObject } from '../src/kube/client.js';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { startCluster } from '../test/cluster/index.js';
import { startRegistry } from '../test/harness/index.js';
import { installPrestageCrds } from '../test/support/agent-bed.js';
import { median } from './median.js';

const NODES = Number(process.env.BENCH_NODES ?? 1000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CONTROL_PLANE = 3;
const GOAL = { seconds: 5, mib: 200 };
const BIN = fileURLToPath(new URL('../bin/prestage.js', import.meta.url));
const GiB = 2 ** 30;
/** 50 MiB/s, on the sets as `apply --link-rate 50MiB/s` stores it (preflight itself has no --link-rate flag). */
const LINK_RATE = 50 * 2 ** 20;

const started = performance.now();
const fixture = buildReleaseFixture();
const { truth } = fixture;
const registry = await startRegistry();
let cluster: Awaited<ReturnType<typeof startCluster>> | undefined;
const dir = await mkdtemp(join(tmpdir(), 'prestage-bench-preflight-'));
try {
  await pushFixture(registry.url, fixture);
  cluster = await startCluster({ workers: 0 });
  await installPrestageCrds(cluster);
  const client = new KubeClient(cluster.kubeConfig);

  const controlPlaneImages = [...truth.components.map((c) => c.pullSpec), `${truth.sourceRegistry}/${truth.releaseRepository}@${truth.release.image.digest}`];
  const workerImages = truth.components.filter((c) => c.role === 'all').map((c) => c.pullSpec);
  const sets = [
    { name: 'prestage-4.16.3-control-plane', role: 'control-plane' as const, images: controlPlaneImages },
    { name: 'prestage-4.16.3-worker', role: 'worker' as const, images: workerImages },
  ];
  const objects = sets.map((set) => toAgentPinnedImageSet({ ...set, labels: {}, annotations: { [ROLE_ANNOTATION]: set.role, [LINK_RATE_ANNOTATION]: String(LINK_RATE) } }));
  for (const body of objects) await client.request('POST', AGENT_PATHS.pinnedImageSets, { body });
  const setsFile = join(dir, 'sets.yaml');
  await writeFile(setsFile, objects.map((object) => yaml.dump(object)).join('---\n'));
  // Stored on every node beside the sets' images: the running release's rebuilt components.
  const rebuilt = truth.current.components.filter((c) => truth.current.rebuiltInTarget.includes(c.name)).map((c) => c.pullSpec);

  // master-0 (startCluster's) is the first control-plane node; the bench adds the rest.
  const names = ['master-0', ...Array.from({ length: NODES - 1 }, (_, i) => `bench-${String(i + 1).padStart(4, '0')}`)];
  const limit = pLimit(16);
  await Promise.all(
    names.map((name, i) =>
      limit(async () => {
        const controlPlane = i < CONTROL_PLANE;
        if (i > 0) {
          const labels: Record<string, string> = controlPlane ? { 'node-role.kubernetes.io/control-plane': '', 'node-role.kubernetes.io/master': '' } : { 'node-role.kubernetes.io/worker': '' };
          const node = await client.request<KubeObject>('POST', '/api/v1/nodes', { body: { metadata: { name, labels: { 'kubernetes.io/hostname': name, ...labels } } } });
          const resources = { cpu: '8', memory: '32Gi', pods: '250', 'ephemeral-storage': '120Gi' };
          await client.request('PUT', `/api/v1/nodes/${name}/status`, { body: { ...node, status: { capacity: resources, allocatable: resources } } });
        }
        const setImages = controlPlane ? controlPlaneImages : workerImages;
        const held = [...new Set([...setImages.slice(0, i % 50), ...rebuilt])].sort();
        const tight = i % 100 === 99;
        const created = await client.request<KubeObject>('POST', AGENT_PATHS.nodePinnedImages, { body: { apiVersion: API_VERSION, kind: 'NodePinnedImages', metadata: { name }, spec: { nodeName: name } } });
        await client.request('PUT', `${AGENT_PATHS.nodePinnedImages}/${name}/status`, {
          body: {
            ...created,
            status: {
              imageFilesystem: { capacityBytes: 120 * GiB, freeBytes: tight ? 16 * GiB + 2 ** 19 : (40 + (i % 60)) * GiB, reserveBytes: 16 * GiB },
              // Every 10th node also stores 2 images by tag alone (counted, not named).
              held: { count: held.length + (i % 10 === 5 ? 2 : 0), images: held },
              pinnedImageSets: [],
            },
          },
        });
      }),
    ),
  );
  console.log(`bench:preflight  ${NODES} nodes x ${sets.length} sets (${controlPlaneImages.length} + ${workerImages.length} images, ${fixture.blobs.size} blobs in ${registry.host}) set up in ${Math.round(performance.now() - started)} ms`);

  let args = ['preflight', '-o', 'json', '--kubeconfig', cluster.kubeconfigPath, '--backend', 'agent', '--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
  const runs: Array<{ seconds: number; mib: number; code: number; bytes: number; preflight: Preflight }> = [];
  for (let run = 1; run <= RUNS; run++) {
    const timeFile = join(dir, `time-${run}.txt`);
    let result = await runTimed(args, timeFile);
    if (run === 1 && result.code === 2) {
      // A usage error: this build refuses preflight without RELEASE; the same two sets as manifests instead.
      console.log(`  preflight (the sets on the cluster) refused, exit 2: ${result.stderr.trim()}\n  so: preflight ${setsFile} (the same two PinnedImageSets as YAML)`);
      args = [args[0]!, setsFile, ...args.slice(1)];
      result = await runTimed(args, timeFile);
    }
    if (result.code !== 0 && result.code !== 1) throw new Error(`preflight run ${run} exited ${result.code}: ${result.stderr.slice(-2000)}`);
    const mib = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(readFileSync(timeFile, 'utf8'))?.[1] ?? NaN) / 1024;
    runs.push({ seconds: result.seconds, mib, code: result.code, bytes: result.stdout.length, preflight: JSON.parse(result.stdout) as Preflight });
  }

  console.log('  run   wall s   peak RSS MiB   exit');
  runs.forEach((r, i) => console.log(`  ${String(i + 1).padStart(3)}   ${r.seconds.toFixed(2).padStart(6)}   ${r.mib.toFixed(1).padStart(12)}   ${String(r.code).padStart(4)}`));
  const seconds = median(runs.map((r) => r.seconds));
  const mib = median(runs.map((r) => r.mib));
  console.log(`  median ${seconds.toFixed(2).padStart(5)}   ${mib.toFixed(1).padStart(12)}`);
  const { totals, verdict, reasons, nodes, assumptions, eta } = runs[0]!.preflight;
  const noGo = nodes.filter((n) => n.verdict === 'NO-GO').length;
  const gib = (bytes: number) => `${(bytes / GiB).toFixed(2)} GiB`;
  console.log(`  JSON ${(runs[0]!.bytes / 2 ** 20).toFixed(1)} MiB; totals: ${totals.nodes} nodes, fetch ${gib(totals.fetchBytes)}, link ${gib(totals.linkBytes)}, write ${gib(totals.writeBytes)}; ETA ${eta ? `${Math.round(eta.seconds)} s at ${(eta.bytesPerSecond / 2 ** 20).toFixed(0)} MiB/s (${eta.rateFrom})` : 'none'}`);
  console.log(`  verdict ${verdict}: ${nodes.length - noGo} nodes GO, ${noGo} NO-GO, ${reasons.length} reasons (${reasons[0] ?? 'none'}${reasons.length > 1 ? ', ...' : ''})`);
  for (const line of assumptions) console.log(`  assumption: ${line.length > 160 ? `${line.slice(0, 160)}...` : line}`);
  if (totals.nodes !== NODES) console.log(`  WARNING: ${totals.nodes} nodes in the preflight, ${NODES} expected`);
  const met = seconds <= GOAL.seconds && mib <= GOAL.mib;
  console.log(`  goal <= ${GOAL.seconds} s and <= ${GOAL.mib} MiB (medians): ${met ? 'met' : 'not met'} (time ${seconds <= GOAL.seconds ? 'met' : 'not met'}, RSS ${mib <= GOAL.mib ? 'met' : 'not met'})`);
} finally {
  await cluster?.stop();
  await registry.stop();
  await rm(dir, { recursive: true, force: true });
}

/** The bin under `/usr/bin/time -v -o FILE` (its exit code is preflight's); wall time from spawn to exit. */
function runTimed(args: string[], timeFile: string): Promise<{ code: number; seconds: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const at = performance.now();
    const child = spawn('/usr/bin/time', ['-v', '-o', timeFile, process.execPath, BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? -1, seconds: (performance.now() - at) / 1000, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
  });
}
