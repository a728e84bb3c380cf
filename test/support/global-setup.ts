/**
 * vitest globalSetup. First the test prerequisites (scripts/build-testbed.sh: Debian packages and
 * the cluster test bed, cached after the first run), so `npm test` works on a fresh machine; then
 * the synthetic release, built once per run and pushed into a storage directory that every test
 * file serves with its own real registries (anonymous, Basic, token, TLS). Registries are
 * started by the files; only the bytes are shared.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { pushFixture } from '../../fixtures/push.js';
import { buildReleaseFixture, type FixtureTruth } from '../../fixtures/release.js';
import { testbedBinaries } from '../cluster/binaries.js';
import { startRegistry } from '../harness/index.js';

declare module 'vitest' {
  export interface ProvidedContext {
    fixtureStorageDir: string;
    fixtureTruth: FixtureTruth;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await testbedBinaries();
  const started = Date.now();
  const root = await mkdtemp(join(tmpdir(), 'prestage-fixture-'));
  const storageDir = join(root, 'storage');
  const fixture = buildReleaseFixture();
  const registry = await startRegistry({ storageDir });
  try {
    await pushFixture(registry.url, fixture);
  } finally {
    await registry.stop();
  }
  console.log(`fixture release built and pushed in ${Date.now() - started} ms`);
  project.provide('fixtureStorageDir', storageDir);
  project.provide('fixtureTruth', fixture.truth);
  return async () => {
    await rm(root, { recursive: true, force: true });
  };
}
