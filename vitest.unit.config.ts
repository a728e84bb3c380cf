import { defineConfig } from 'vitest/config';

/** `npm run test:unit`: the unit tests beside the modules (and the harness's pure helpers), without the test bed or the fixture release: nothing beyond `npm ci`. */
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/harness/*.test.ts'],
    testTimeout: 60_000,
  },
});
