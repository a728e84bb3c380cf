import { readdirSync, readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

/**
 * `npm test`: three projects, run as vitest's groups, one group after the other (sequence.groupOrder):
 * 1. unit: the unit tests beside the modules (pure, in-process), three at a time;
 * 2. integration: files that start their own registries, proxies, CLI processes and cluster test
 *    beds (API server, etcd, CRI-O per node), each on free ports in its own temp dir, two at a time;
 * 3. host: the files that run kubelets or kube-proxy, which share the host's iptables chains and
 *    cgroup hierarchies, one at a time and alone.
 * vitest puts every project whose files run one at a time into one chain, so "one at a time" is
 * a group of its own here, not a project setting (docs/development.md has the measurements).
 * PRESTAGE_TEST_SERIAL=1 runs every file one at a time (for a clean reading of one file's time).
 */
const serial = process.env.PRESTAGE_TEST_SERIAL === '1';

const testFiles = readdirSync(new URL('./test/', import.meta.url)).filter((name) => name.endsWith('.test.ts'));
const importing = (pattern: RegExp): string[] =>
  testFiles.filter((name) => pattern.test(readFileSync(new URL(`./test/${name}`, import.meta.url), 'utf8'))).map((name) => `test/${name}`);

/**
 * Files on the cluster test bed: every test file that imports the cluster harness (test/cluster)
 * or the MCO simulator (test/mco). Found by their imports, so a new file cannot miss its lane by
 * being left off a list.
 */
export const CLUSTER_FILES = importing(/from '\.\/(cluster|mco)\//);

/** Files that start kubelets or kube-proxy (test/cluster/kubelet.ts, kube-proxy.ts): host state. */
export const HOST_FILES = importing(/from '\.\/cluster\/(kubelet|kube-proxy)\.js'/);

const integration = {
  testTimeout: 60_000,
  hookTimeout: 600_000,
  globalSetup: ['test/support/global-setup.ts'],
};

export default defineConfig({
  test: {
    fileParallelism: !serial,
    // The default summary, then the ten slowest files and one plain closing line for CI.
    reporters: ['default', './test/support/closing-line-reporter.ts'],
    projects: [
      { extends: true, test: { name: 'unit', include: ['src/**/*.test.ts', 'test/harness/*.test.ts'], testTimeout: 60_000, maxWorkers: serial ? 1 : 3, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'integration', include: ['test/*.test.ts'], exclude: HOST_FILES, ...integration, maxWorkers: serial ? 1 : 2, sequence: { groupOrder: 1 } } },
      { extends: true, test: { name: 'host', include: HOST_FILES, ...integration, maxWorkers: 1, sequence: { groupOrder: 2 } } },
    ],
  },
});
