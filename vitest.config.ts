import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 600_000,
    // Integration suites start real servers (registry, API server, CRI-O); two cores.
    fileParallelism: false,
    globalSetup: ['test/support/global-setup.ts'],
    // The default summary, then one plain closing line for CI.
    reporters: ['default', './test/support/closing-line-reporter.ts'],
  },
});
