/**
 * Refuse to start a transfer that cannot fit or cannot be written: oc-mirror's users find out
 * hours in. Free space is what an unprivileged writer may use (`bavail`), not what the
 * filesystem has left.
 */
import { constants } from 'node:fs';
import { access, stat, statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import { BadInputError } from '../errors.js';
import { formatBytes } from '../render/table.js';

export interface FreeSpace {
  readonly bavail: number | bigint;
  readonly bsize: number | bigint;
}

export type StatFs = (dir: string) => Promise<FreeSpace>;

/** Bytes missing to write `needed` more bytes; 0 when it fits. */
export function spaceShortfall(needed: number, fs: FreeSpace): number {
  return Math.max(0, needed - freeBytes(fs));
}

export function freeBytes(fs: FreeSpace): number {
  return Number(fs.bavail) * Number(fs.bsize);
}

/** `fix` says what to do, e.g. "or choose another --to". */
export async function ensureFreeSpace(dir: string, needed: number, fix: string, statFs: StatFs = statfs): Promise<void> {
  const fs = await statFs(dir);
  const short = spaceShortfall(needed, fs);
  if (short > 0) {
    throw new BadInputError(`not enough free space in ${dir}: ${formatBytes(needed)} more is needed, ${formatBytes(freeBytes(fs))} is free (short by ${formatBytes(short)}); free up space there ${fix}`);
  }
}

const NOT_WRITABLE: Readonly<Record<string, string>> = { EROFS: 'read-only file system', EACCES: 'permission denied', EPERM: 'permission denied' };

/**
 * Check that `dir` (or, while it does not exist, the directory it would be created in) can be
 * written, before any work that would fail there later; nothing is created. `fix` names the
 * flag that picks another place, e.g. "pass --work-dir DIR".
 */
export async function ensureWritableDir(dir: string, what: string, fix: string): Promise<void> {
  let existing = dir;
  while ((await stat(existing).catch(() => undefined)) === undefined && dirname(existing) !== existing) existing = dirname(existing);
  try {
    await access(existing, constants.W_OK);
  } catch (err) {
    const reason = NOT_WRITABLE[(err as NodeJS.ErrnoException).code ?? ''];
    if (!reason) throw err;
    throw new BadInputError(`cannot write ${what} into ${dir} (${reason}); ${fix}`);
  }
}
