/**
 * Refuse to start a transfer that cannot fit or cannot be written: oc-mirror's users find out
 * hours in. Free space is what an unprivileged writer may use (`bavail`), not what the
 * filesystem has left.
 */
import { mkdtemp, rmdir, stat, statfs } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { BadInputError, systemErrorText } from '../errors.js';
import { formatBytes } from '../units.js';

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

/** `fix` says what to do, e.g. "or choose another --output-dir". */
export async function ensureFreeSpace(dir: string, needed: number, fix: string, statFs: StatFs = statfs): Promise<void> {
  (await freeSpaceCheck(dir, fix, statFs))(needed);
}

/**
 * The free space of `dir` now, and a check of a need against it that throws a one-line error
 * naming the shortfall: for a need that grows as it is learned, checked against what was
 * free before anything was written.
 */
export async function freeSpaceCheck(dir: string, fix: string, statFs: StatFs = statfs): Promise<(needed: number) => void> {
  const fs = await statFs(dir);
  return (needed) => {
    const short = spaceShortfall(needed, fs);
    if (short > 0) {
      throw new BadInputError(`not enough free space in ${dir}: ${formatBytes(needed)} more is needed, ${formatBytes(freeBytes(fs))} is free (short by ${formatBytes(short)}); free up space there ${fix}`);
    }
  };
}

/**
 * Check that `dir` (or, while it does not exist, the nearest directory it would be created
 * in) can be written, before any work that would fail there later: by creating and removing a
 * probe directory, which also catches /proc and read-only mounts that access(2) lets pass for
 * root. `fix` says what to do instead, e.g. "pass --work-dir DIR".
 */
export async function ensureWritableDir(dir: string, what: string, fix: string): Promise<void> {
  let existing = resolve(dir);
  let found = await stat(existing).catch(() => undefined);
  while (!found) {
    existing = dirname(existing);
    found = await stat(existing).catch(() => undefined);
  }
  if (!found.isDirectory()) throw new BadInputError(`cannot write ${what} into ${dir}: ${existing} is a file, not a directory; ${fix}`);
  try {
    await rmdir(await mkdtemp(join(existing, '.prestage-probe-')));
  } catch (error) {
    throw new BadInputError(`cannot write ${what} into ${dir}: ${systemErrorText(error as NodeJS.ErrnoException)}; ${fix}`);
  }
}
