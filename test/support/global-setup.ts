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
import { buildCatalogFixture, type CatalogTruth } from '../../fixtures/catalog.js';
import { RegistryContent } from '../../fixtures/repositories.js';
import { testbedBinaries } from '../cluster/binaries.js';
import { startRegistry } from '../harness/index.js';

declare module 'vitest' {
  export interface ProvidedContext {
    fixtureStorageDir: string;
    fixtureTruth: FixtureTruth;
    catalogTruth: CatalogTruth;
  }
}

interface Prepared {
  readonly root: string;
  readonly storageDir: string;
  readonly truth: FixtureTruth;
  readonly catalog: CatalogTruth;
}

/**
 * Every project that names this setup runs it (today the integration project alone), in the one
 * vitest process: the first prepares, any other reuses (globalThis, as each project may load this
 * module anew), and the last teardown removes the storage.
 */
const shared = globalThis as typeof globalThis & { prestageFixture?: { prepared: Promise<Prepared>; users: number } };

async function prepare(): Promise<Prepared> {
  await testbedBinaries();
  const started = Date.now();
  const root = await mkdtemp(join(tmpdir(), 'prestage-fixture-'));
  const storageDir = join(root, 'storage');
  const fixture = buildReleaseFixture();
  // The operator catalog, its bundles and their images, beside the release in the same storage.
  const operators = new RegistryContent();
  const catalog = buildCatalogFixture(operators);
  const registry = await startRegistry({ storageDir });
  try {
    await pushFixture(registry.url, fixture);
    await pushFixture(registry.url, { blobs: operators.blobs, repositories: operators.toRepositories() });
  } finally {
    await registry.stop();
  }
  console.log(`fixture release built and pushed in ${Date.now() - started} ms`);
  return { root, storageDir, truth: fixture.truth, catalog };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  shared.prestageFixture ??= { prepared: prepare(), users: 0 };
  const state = shared.prestageFixture;
  state.users++;
  const { root, storageDir, truth, catalog } = await state.prepared;
  project.provide('fixtureStorageDir', storageDir);
  project.provide('fixtureTruth', truth);
  project.provide('catalogTruth', catalog);
  return async () => {
    if (--state.users > 0) return;
    shared.prestageFixture = undefined;
    await rm(root, { recursive: true, force: true });
  };
}
