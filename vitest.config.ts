import { readdirSync, readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

/**
 * `npm test`: three projects, each at its own pace.
 * - unit: the unit tests beside the modules (pure, in-process), in parallel;
 * - registry: integration files that start their own registries, proxies and CLI processes on
 *   free ports (no cluster), one at a time;
 * - cluster: files on the cluster test bed (API server, kubelets, CRI-O, iptables, cgroups: host
 *   state), one at a time, as before.
 * Meant to let the two one-at-a-time lanes overlap; measured with vitest 4.1 they ran one after
 * the other (docs/development.md). PRESTAGE_TEST_SERIAL=1 runs every file one at a time (as before, for a clean reading).
 */
const serial = process.env.PRESTAGE_TEST_SERIAL === '1';

/**
 * Files on the cluster test bed: every test file that imports the cluster harness (test/cluster)
 * or the MCO simulator (test/mco). Found by their imports, so a new file cannot land in the
 * parallel registry lane by being left off a list.
 */
export const CLUSTER_FILES = readdirSync(new URL('./test/', import.meta.url))
  .filter((name) => name.endsWith('.test.ts'))
  .filter((name) => /from '\.\/(cluster|mco)\//.test(readFileSync(new URL(`./test/${name}`, import.meta.url), 'utf8')))
  .map((name) => `test/${name}`);

const integration = {
  testTimeout: 60_000,
  hookTimeout: 600_000,
  globalSetup: ['test/support/global-setup.ts'],
};

export default defineConfig({
  test: {
    // Two cores: one worker each for the registry and cluster files, one for the unit files while they last.
    maxWorkers: serial ? 1 : 3,
    fileParallelism: !serial,
    // The default summary, then the ten slowest files and one plain closing line for CI.
    reporters: ['default', './test/support/closing-line-reporter.ts'],
    projects: [
      { extends: true, test: { name: 'unit', include: ['src/**/*.test.ts', 'test/harness/*.test.ts'], testTimeout: 60_000 } },
      { extends: true, test: { name: 'registry', include: ['test/*.test.ts'], exclude: CLUSTER_FILES, ...integration, fileParallelism: false } },
      { extends: true, test: { name: 'cluster', include: CLUSTER_FILES, ...integration, fileParallelism: false } },
    ],
  },
});
