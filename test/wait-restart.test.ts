/**
 * wait survives a kube-apiserver restart: its watches break, it re-watches from the last
 * resourceVersion (or re-lists on 410 Gone), and it still reaches the right answer. The test
 * bed has no restart call, so the test kills its own cluster's kube-apiserver process and
 * starts it again with the same command line (same port, same etcd).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../src/kube/client.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { Daemon, waitFor } from './cluster/processes.js';
import { installMcoCrds } from './mco/crds.js';
import { testPlan, writePlan } from './mco/plans.js';
import { McoSimulator } from './mco/simulator.js';
import { runCli, startCli } from './support/cli.js';

let cluster: TestCluster;
let client: KubeClient;
let simulator: McoSimulator;
let restarted: Daemon | undefined;

beforeAll(async () => {
  cluster = await startCluster({ workers: 2 });
  client = new KubeClient(cluster.kubeConfig);
  await installMcoCrds(client);
  simulator = await McoSimulator.start(client, { pullMs: 300 });
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  simulator?.stop();
  await restarted?.stop();
  await cluster?.stop();
});

/** The cluster's kube-apiserver process: its binary, with a --cert-dir inside the cluster's dir. */
function apiServerProcess(): { pid: number; argv: string[] } {
  for (const entry of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean);
    } catch {
      continue;
    }
    if (argv[0] === cluster.binaries['kube-apiserver'] && argv.some((arg) => arg.startsWith('--cert-dir=') && arg.includes(cluster.dir))) return { pid: Number(entry), argv };
  }
  throw new Error('kube-apiserver process not found');
}

function gone(pid: number): boolean {
  try {
    return /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}

async function restartApiServer(downMs: number): Promise<void> {
  const { pid, argv } = apiServerProcess();
  // SIGKILL, as a crash or a node reboot would: SIGTERM drains open watches for up to a minute.
  process.kill(pid, 'SIGKILL');
  await waitFor('kube-apiserver exit', async () => (gone(pid) ? true : undefined), 30_000, 50);
  await new Promise((resolve) => setTimeout(resolve, downMs));
  restarted = Daemon.start({ name: 'kube-apiserver (restarted)', command: argv[0]!, args: argv.slice(1), logPath: join(cluster.dir, 'kube-apiserver-restarted.log') });
  await waitFor('restarted kube-apiserver', async () => ((await client.find('/api/v1/namespaces/default').catch(() => undefined)) ? true : undefined), 120_000, 250);
}

describe('wait across an API server restart', () => {
  it('re-watches after the restart and exits 0 once every node is done', async () => {
    simulator.behave('worker-1', { pullMs: 6_000 });
    const plan = testPlan('restart');
    const dir = cluster.dir;
    await runCli(['apply', writePlan(dir, plan), '--kubeconfig', cluster.kubeconfigPath]);
    const wait = startCli(['wait', 'restart-worker', '-o', 'json', '--timeout', '200s', '--kubeconfig', cluster.kubeconfigPath]);
    const waiting = wait.done;
    // Its first event: it has read the sets and watches them (its start-up reads are not what this tests).
    await waitFor('wait to watch', async () => (wait.stdout().includes('"type"') ? true : undefined), 60_000, 100);
    await waitFor('worker-0 done', async () => {
      const status = await runCli(['status', 'restart-worker', '-o', 'json', '--kubeconfig', cluster.kubeconfigPath]);
      return status.stdout.includes('"phase": "done"') ? true : undefined;
    }, 30_000, 200);
    await restartApiServer(1_000);
    const result = await waiting;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/watch interrupted, re-watching/);
    const events = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({ type: 'set', set: 'restart-worker', ready: true, nodesDone: 2, nodesTotal: 2 });
    expect(events.some((e) => e['node'] === 'worker-1' && e['phase'] === 'done')).toBe(true);
    // Only what a restarting API server answers: nothing there, then 503/429 while it starts (the daemon requeues).
    expect(simulator.errors.filter((e) => !/cannot reach|: 503 ServiceUnavailable|: 429 TooManyRequests/.test(e.message))).toEqual([]);
    // Its own waits allow the restarted kube-apiserver 120 s (a loaded 2-core machine needs over 60), and wait 200 s in all.
  }, 260_000);
});
