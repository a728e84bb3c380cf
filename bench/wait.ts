/**
 * `npm run bench:wait`: `prestage wait` (the built bin, as a real process) on a real
 * kube-apiserver holding 1000 worker Node objects and their MachineConfigNodes, 2 sets on the
 * worker pool (2000 node × set pairs). Statuses change at a steady rate, as MCO's daemons
 * would: each pair gets desiredGeneration, later currentGeneration. Reports wait's peak RSS
 * (VmHWM) and the delay from each status write (request sent) to wait's JSON line for it.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pLimit from 'p-limit';
import { KubeClient } from '../src/kube/client.js';
import { MCO_PATHS } from '../src/cluster/mco/backend.js';
import { startCluster } from '../test/cluster/index.js';
import { installMcoCrds } from '../test/mco/crds.js';
import { testPlan, writePlan } from '../test/mco/plans.js';
import { DEFAULT_POOLS } from '../test/mco/simulator.js';

const NODES = Number(process.env.BENCH_NODES ?? 1000);
const WRITES_PER_SECOND = Number(process.env.BENCH_RATE ?? 200);
const BIN = fileURLToPath(new URL('../bin/prestage.js', import.meta.url));

const cluster = await startCluster({ workers: 0 });
try {
  const client = new KubeClient(cluster.kubeConfig);
  await installMcoCrds(client);
  for (const pool of DEFAULT_POOLS) await client.request('POST', MCO_PATHS.machineConfigPools, { body: pool });
  const names = Array.from({ length: NODES }, (_, i) => `bench-${String(i).padStart(4, '0')}`);
  const limit = pLimit(16);
  const setupStarted = performance.now();
  await Promise.all(
    names.map((name) =>
      limit(async () => {
        await client.request('POST', '/api/v1/nodes', { body: { metadata: { name, labels: { 'node-role.kubernetes.io/worker': '' } } } });
        await client.request('POST', MCO_PATHS.machineConfigNodes, {
          body: { apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfigNode', metadata: { name }, spec: { node: { name }, pool: { name: 'worker' }, configVersion: { desired: 'rendered-0' } } },
        });
      }),
    ),
  );
  // Two sets on the worker pool: the plan's worker set and a second worker-labelled one.
  const plan = testPlan('bench');
  const second = { ...plan.sets[1]!, name: 'bench-extra-worker' };
  await runBin(['apply', writePlan(cluster.dir, { ...plan, sets: [plan.sets[1]!, second] }), '--kubeconfig', cluster.kubeconfigPath, '--backend', 'mco']);
  const sets = [plan.sets[1]!.name, second.name];
  console.log(`bench:wait  ${NODES} nodes x ${sets.length} sets set up in ${Math.round(performance.now() - setupStarted)} ms; ${WRITES_PER_SECOND} status writes/s`);

  const wait = spawn(process.execPath, [BIN, 'wait', ...sets, '-o', 'json', '--timeout', '30m', '--kubeconfig', cluster.kubeconfigPath, '--backend', 'mco'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let peakKiB = 0;
  const sampler = setInterval(() => {
    try {
      peakKiB = Math.max(peakKiB, Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${wait.pid}/status`, 'utf8'))?.[1] ?? 0));
    } catch {
      // exited between samples
    }
  }, 100);
  const sent = new Map<string, number>();
  const delays: number[] = [];
  let firstLine!: () => void;
  const started = new Promise<void>((resolve) => (firstLine = resolve));
  createInterface({ input: wait.stdout }).on('line', (line) => {
    firstLine();
    const event = JSON.parse(line) as { type: string; set: string; node?: string; phase?: string };
    const at = sent.get(`${event.set}/${event.node}/${event.phase}`);
    if (event.type === 'node' && at !== undefined) delays.push(performance.now() - at);
  });
  const exited = new Promise<number>((resolve) => wait.once('close', (code) => resolve(code ?? 1)));
  await started;

  // Each pair: desiredGeneration 1 (progressing), then currentGeneration 1 (done), in two sweeps.
  const statuses = new Map<string, Array<{ name: string; desiredGeneration: number; currentGeneration?: number }>>();
  const writes = [
    ...names.flatMap((node) => sets.map((set) => ({ node, set, phase: 'progressing' as const }))),
    ...names.flatMap((node) => sets.map((set) => ({ node, set, phase: 'done' as const }))),
  ];
  const interval = 1000 / WRITES_PER_SECOND;
  const writesStarted = performance.now();
  const inFlight = pLimit(32);
  // One node's writes in order (each carries the node's whole list), as one daemon would write.
  const nodeQueues = new Map<string, Promise<void>>();
  const inOrder = (node: string, write: () => Promise<void>) => {
    const next = (nodeQueues.get(node) ?? Promise.resolve()).then(write);
    nodeQueues.set(node, next);
    return next;
  };
  await Promise.all(
    writes.map((w, i) =>
      new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, writesStarted + i * interval - performance.now()))).then(() =>
        inOrder(w.node, () => inFlight(async () => {
          const entries = statuses.get(w.node) ?? [];
          const rest = entries.filter((e) => e.name !== w.set);
          const entry = w.phase === 'progressing' ? { name: w.set, desiredGeneration: 1 } : { name: w.set, desiredGeneration: 1, currentGeneration: 1 };
          const next = [...rest, entry].sort((a, b) => a.name.localeCompare(b.name));
          statuses.set(w.node, next);
          sent.set(`${w.set}/${w.node}/${w.phase}`, performance.now());
          await client.request('PATCH', `${MCO_PATHS.machineConfigNodes}/${w.node}/status`, { body: { status: { pinnedImageSets: next } }, contentType: 'application/merge-patch+json' });
        })),
      ),
    ),
  );
  const stuck = setTimeout(() => wait.kill(), 60_000);
  const code = await exited;
  clearTimeout(stuck);
  clearInterval(sampler);
  delays.sort((a, b) => a - b);
  const pct = (p: number) => delays[Math.min(delays.length - 1, Math.floor((p / 100) * delays.length))]!;
  console.log(`  wait exit code ${code} after ${writes.length} writes in ${Math.round(performance.now() - writesStarted)} ms; ${delays.length} node events matched to writes`);
  console.log(`  peak RSS (VmHWM): ${(peakKiB / 1024).toFixed(1)} MiB   (target <= 150 MB)`);
  console.log(`  write -> output line delay: p50 ${pct(50).toFixed(0)} ms, p99 ${pct(99).toFixed(0)} ms, max ${pct(100).toFixed(0)} ms   (target p99 <= 1000 ms)`);
  if (code !== 0 || delays.length !== writes.length) process.exitCode = 1;
} finally {
  await cluster.stop();
}

function runBin(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`prestage ${args[0]} exited ${code}`))));
  });
}
