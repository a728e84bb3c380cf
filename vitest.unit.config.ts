import { defineConfig } from 'vitest/config';

/** `npm run test:unit`: the unit tests beside the modules, without the test bed or the fixture release. */
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    testTimeout: 60_000,
  },
});
