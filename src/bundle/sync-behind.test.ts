import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SyncBehind, syncDir } from './sync-behind.js';

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

      await expect(syncDir(dir)).resolves.toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
