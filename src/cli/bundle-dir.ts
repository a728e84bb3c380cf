/**
 * `bundle create`'s directory flag. It was `--to`, which is a release version in `plan` and
 * `stage`: `bundle create R --to 4.16.3` quietly wrote ./4.16.3. Now `--output-dir` (as `plan`'s
 * and `bundle push`'s); `--to` is kept as a deprecated alias that warns and refuses a version.
 */
import type { Argv } from 'yargs';
import { BadInputError } from '../errors.js';

export interface BundleDirFlags {
  'output-dir'?: string;
  to?: string;
}

export const DEPRECATED_TO = 'bundle create --to is deprecated (--to is a release version in plan and stage): use --output-dir';

/** 4.16.3, 4.16, 4.16.0-rc.1: what `--to` means in plan and stage. */
const VERSION_LIKE = /^v?\d+\.\d+(\.\d+)?([-+][\w.-]*)?$/;

export function withBundleDirOption<T>(y: Argv<T>): Argv<T & BundleDirFlags> {
  return y
    .option('output-dir', { type: 'string', describe: 'Bundle directory to write (an OCI image layout); a rerun resumes it' })
    .option('to', { type: 'string', hidden: true, describe: 'Deprecated: --output-dir' }) as unknown as Argv<T & BundleDirFlags>;
}

/** The bundle directory the flags name; a deprecated `--to` warns. */
export function bundleDirFrom(flags: BundleDirFlags, warn: (line: string) => void): string {
  const { 'output-dir': outputDir, to } = flags;
  if (outputDir !== undefined && to !== undefined) throw new BadInputError('bundle create: give --output-dir only (--to is its deprecated name)');
  if (to !== undefined) {
    if (VERSION_LIKE.test(to)) throw new BadInputError(`bundle create --to ${to}: looks like a release version, but here it would be the bundle directory; name the release as SOURCE and the directory with --output-dir`);
    warn(DEPRECATED_TO);
  }
  const dir = outputDir ?? to;
  if (dir === undefined || dir.trim() === '') throw new BadInputError('bundle create: name the bundle directory with --output-dir DIR');
  return dir;
}
