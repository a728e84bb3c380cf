import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { PlanRelease } from '../plan/types.js';
import { releaseTags, SyncBehind } from './create.js';

const release = (architecture: string, multiArch = false): PlanRelease => ({
  pullSpec: `quay.io/openshift-release-dev/ocp-release@sha256:${'a'.repeat(64)}`,
  digest: `sha256:${'a'.repeat(64)}`,
  manifestDigest: `sha256:${'a'.repeat(64)}`,
  version: '4.16.3',
  architecture,
  multiArch,
  channels: [],
});

describe('release tags for the mirror', () => {
  it('spells the architecture as OpenShift release tags do, -multi for a multi-arch release', () => {
    expect(releaseTags(release('amd64'))).toEqual(['4.16.3-x86_64']);
    expect(releaseTags(release('arm64'))).toEqual(['4.16.3-aarch64']);
    expect(releaseTags(release('s390x'))).toEqual(['4.16.3-s390x']);
    expect(releaseTags(release('arm64', true))).toEqual(['4.16.3-multi']);
  });

  it('adds the tag the release was named by, once', () => {
    expect(releaseTags(release('amd64'), '4.16.3-x86_64')).toEqual(['4.16.3-x86_64']);
    expect(releaseTags(release('amd64'), 'latest-4.16')).toEqual(['4.16.3-x86_64', 'latest-4.16']);
  });
});

describe('syncing blobs behind the transfer', () => {
  it('syncs big blobs as they come and small ones at the end; a failed fsync fails the bundle, after every fsync settled', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'prestage-sync-'));
    try {
      await writeFile(join(dir, 'big'), Buffer.alloc(2 * 1024 * 1024));
      await writeFile(join(dir, 'small'), 'x');
      const ok = new SyncBehind();
      ok.add(join(dir, 'big'), 2 * 1024 * 1024);
      ok.add(join(dir, 'small'), 1);
      await expect(ok.finish()).resolves.toBeUndefined();

      const failing = new SyncBehind();
      failing.add(join(dir, 'gone'), 2 * 1024 * 1024);
      failing.add(join(dir, 'big'), 2 * 1024 * 1024);
      await failing.settled();
      await expect(failing.finish()).rejects.toMatchObject({ code: 'ENOENT' });
      // A small blob that is missing fails only at the end, where it is synced.
      const late = new SyncBehind();
      late.add(join(dir, 'gone-small'), 1);
      await expect(late.settled()).resolves.toBeUndefined();
      await expect(late.finish()).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
