import { readdirSync, readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';
import { spreadSequencer } from './test/support/sequencer.js';

/**
 * `npm test`: two projects, run as vitest's groups, one after the other (sequence.groupOrder):
 * 1. unit: the unit tests beside the modules (pure, in-process), three at a time;
 * 2. integration: files that start their own registries, proxies, CLI processes and cluster test
 *    beds (API server, etcd, CRI-O per node), each on free ports in its own temp dir, three at a
 *    time (measured on 2 cores: 1142-1332 s against 1440 s two at a time; they wait on links,
 *    leases and scaled timers as much as on the CPU). The files that run kubelets or
 *    kube-proxy share the host's iptables chains: they take turns by a lock
 *    (test/cluster/host-lock.ts), and the sequencer spreads them through the run so that they
 *    seldom wait for it.
 * vitest runs every project whose files go one at a time in one chain (measured: a registry and a
 * cluster lane of one worker each ran one after the other), hence a lock, not a third lane.
 * PRESTAGE_TEST_SERIAL=1 runs every file one at a time (for a clean reading of one file's time);
 * PRESTAGE_TEST_WORKERS=N runs N integration files at a time.
 */
const serial = process.env.PRESTAGE_TEST_SERIAL === '1';
const workers = process.env.PRESTAGE_TEST_WORKERS ?? '3';
if (!/^[1-9]\d*$/.test(workers)) throw new Error(`PRESTAGE_TEST_WORKERS=${workers}: give how many integration files run at a time, a whole number such as 3`);
const integrationWorkers = Number(workers);

const testFiles = readdirSync(new URL('./test/', import.meta.url)).filter((name) => name.endsWith('.test.ts'));
const importing = (pattern: RegExp): string[] =>
  testFiles.filter((name) => pattern.test(readFileSync(new URL(`./test/${name}`, import.meta.url), 'utf8'))).map((name) => `test/${name}`);

/**
 * Files that start kubelets or kube-proxy (they import test/cluster/kubelet.ts or kube-proxy.ts):
 * they hold the host lock. Found by their imports, so no list needs keeping.
 */
export const HOST_FILES = importing(/from '\.\/cluster\/(kubelet|kube-proxy)\.js'/);

const integration = {
  testTimeout: 60_000,
  hookTimeout: 600_000,
  globalSetup: ['test/support/global-setup.ts'],
};

export default defineConfig({
  test: {
    fileParallelism: !serial,
    sequence: { sequencer: spreadSequencer(HOST_FILES) },
    // The default summary, then the ten slowest files and one plain closing line for CI.
    reporters: ['default', './test/support/closing-line-reporter.ts'],
    projects: [
      { extends: true, test: { name: 'unit', include: ['src/**/*.test.ts', 'test/harness/*.test.ts'], testTimeout: 60_000, maxWorkers: serial ? 1 : 3, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'integration', include: ['test/*.test.ts'], ...integration, maxWorkers: serial ? 1 : integrationWorkers, sequence: { groupOrder: 1 } } },
    ],
  },
});
