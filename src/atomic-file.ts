/**
 * Files other programs read (GitOps manifests, CRI-O drop-ins, bundles) are written
 * atomically: a temp file in a directory the reader does not scan, fsync, rename.
 */
import { open, rename, mkdir, unlink } from 'node:fs/promises';
import { dirname, join, basename } from 'node:path';

/** `tempDir` must be on the same filesystem as `path`; default: beside it, with a dot name. */
export async function writeFileAtomic(path: string, data: string | Buffer, tempDir = dirname(path)): Promise<void> {
  await mkdir(tempDir, { recursive: true });
  const temp = join(tempDir, `.${basename(path)}.${process.pid}.${Date.now()}.tmp`);
  const handle = await open(temp, 'w', 0o644);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temp, path);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
  // Make the rename itself durable.
  const dir = await open(dirname(path), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
