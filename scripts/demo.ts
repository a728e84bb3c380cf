/**
 * `npm run demo [-- PLAN FLAGS]`: works with no route to any public registry. Builds the
 * synthetic OpenShift 4.16.3 release, serves it from a local Debian docker-registry, and runs
 * `prestage plan` on it, reading quay.io through a --mirror to the local registry.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import { main } from '../src/cli/main.js';
import { startRegistry } from '../test/harness/index.js';

if (!existsSync('/usr/bin/docker-registry')) {
  console.error('demo: needs Debian\'s registry: apt-get install -y docker-registry');
  process.exit(2);
}

const work = await mkdtemp(join(tmpdir(), 'prestage-demo-'));
const registry = await startRegistry({ storageDir: join(work, 'storage') });
try {
  const fixture = buildReleaseFixture();
  await pushFixture(registry.url, fixture);
  const release = `quay.io/${fixture.truth.releaseRepository}:${fixture.truth.release.tag}`;
  const args = ['plan', release, '--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host, ...process.argv.slice(2)];
  console.error(`demo: fixture release served at ${registry.url}; running: prestage ${args.join(' ')}\n`);
  process.exitCode = await main(args, { scriptName: 'prestage' });
} finally {
  await registry.stop();
  await rm(work, { recursive: true, force: true });
}
