/**
 * Refuse to start a transfer that cannot fit: oc-mirror's users find out hours in. Free space
 * is what an unprivileged writer may use (`bavail`), not what the filesystem has left.
 */
import { statfs } from 'node:fs/promises';
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
