/**
 * `bundle push` of tar parts: unpack them into a layout under the bundle's directory (beside
 * parts.json, or `--work-dir`), into `<layout>` only: the name parts.json gives is a plain
 * name (bundle-names.ts), and no directory on the way is a link, so nothing is written or
 * removed outside that directory whatever the parts say.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { writeFileAtomic } from '../atomic-file.js';
import { BadInputError } from '../errors.js';
import { ARCHIVE_INDEX_FILE, LAYOUT_FILES, readAll, walkArchive, type OpenedArchive } from './archive.js';
import { isPlainFileName } from './bundle-names.js';
import { ensureFreeSpace } from './disk-space.js';
import { BLOBS_DIR, PARTIAL_DIR, blobPath, parseBundleFiles, partialPath, type LayoutFiles } from './layout.js';
import { hashBlobs } from './verify.js';

/** Create or truncate, never through a link left where the temp file goes. */
const WRITE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;

/** `base/<layout>`: a directory of `base` itself, refused when something other than a directory (a link) is there. */
export async function unpackDestination(base: string, layout: string): Promise<string> {
  const dest = join(base, layout);
  if (!isPlainFileName(layout) || dirname(resolve(dest)) !== resolve(base)) {
    throw new BadInputError(`bundle archive layout ${JSON.stringify(layout)} is not a plain directory name inside ${base}`);
  }
  await refuseLink(dest);
  return dest;
}

async function refuseLink(dir: string): Promise<void> {
  const found = await lstat(dir).catch(() => undefined);
  if (found && !found.isDirectory()) {
    throw new BadInputError(`cannot unpack the bundle into ${dir}: it is ${found.isSymbolicLink() ? 'a symbolic link' : 'a file'}, not a directory; remove it or choose another --work-dir`);
  }
}

/**
 * Unpack into `dest` (from unpackDestination), each blob verified as written and renamed into
 * place; blobs already there that still hash to their name are skipped, so an interrupted
 * unpack continues and a damaged one is repaired.
 */
export async function unpackArchive(archive: OpenedArchive, dest: string): Promise<void> {
  for (const dir of [dest, join(dest, 'blobs'), join(dest, BLOBS_DIR), join(dest, PARTIAL_DIR)]) await refuseLink(dir);
  await mkdir(join(dest, BLOBS_DIR), { recursive: true });
  await mkdir(join(dest, PARTIAL_DIR), { recursive: true });
  await ensureFreeSpace(dest, archive.index.bytes, 'or copy the parts to a larger disk');
  const layout: Record<string, string> = {};
  await walkArchive(archive, async (entry, size, body) => {
    if (entry.kind === 'layout') {
      layout[entry.name] = (await readAll(body)).toString('utf8');
      return;
    }
    if ((await stat(blobPath(dest, entry.digest)).catch(() => undefined))?.size === size && (await hashBlobs(dest, [entry.digest])).verified.has(entry.digest)) {
      body.resume();
      return;
    }
    const temp = partialPath(dest, entry.digest);
    const hash = createHash('sha256');
    const file = await open(temp, WRITE_NEW, 0o644);
    try {
      for await (const chunk of body) {
        hash.update(chunk as Buffer);
        await file.write(chunk as Buffer);
      }
      await file.sync();
    } finally {
      await file.close();
    }
    if (`sha256:${hash.digest('hex')}` !== entry.digest) {
      await rm(temp, { force: true });
      throw new BadInputError(`bundle archive in ${archive.dir}: blob ${entry.digest} does not match its digest; run \`prestage bundle verify\` on the archive`);
    }
    await rename(temp, blobPath(dest, entry.digest));
  });
  // The layout files last, as bundle create does: a layout with an index is complete.
  parseBundleFiles(layout as LayoutFiles, join(archive.dir, ARCHIVE_INDEX_FILE));
  for (const file of LAYOUT_FILES) await writeFileAtomic(join(dest, file), layout[file]!, join(dest, PARTIAL_DIR));
  await rm(join(dest, PARTIAL_DIR), { recursive: true, force: true });
}
