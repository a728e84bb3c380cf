/**
 * `bundle create`'s directory flag, `--output-dir` (as `plan`'s and `bundle push`'s). It was
 * once `--to`, which is a release version in `plan` and `stage`; `--to` now means that in
 * `bundle create` too (the release, or the end of a path), and a directory given to it is refused
 * naming `--output-dir`.
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Argv } from 'yargs';
import { ARCHIVE_INDEX_FILE } from '../bundle/archive.js';
import { BadInputError } from '../errors.js';

export interface BundleDirFlags {
  'output-dir'?: string;
}

/** The one line for `bundle create --to DIR`. */
export function toIsNoDirectory(value: string): string {
  return `bundle create --to ${value}: --to is a release version (as in plan and stage), not the bundle directory; name the directory with --output-dir ${value}`;
}

export function withBundleDirOption<T>(y: Argv<T>): Argv<T & BundleDirFlags> {
  return y.option('output-dir', { type: 'string', describe: 'Bundle directory to write (an OCI image layout); a rerun resumes it; with a path of several hops, one bundle per hop in DIR/VERSION' }) as unknown as Argv<T & BundleDirFlags>;
}

/** The bundle directory the flags name. */
export function bundleDirFrom(flags: BundleDirFlags): string {
  const dir = flags['output-dir'];
  if (dir === undefined || dir.trim() === '') throw new BadInputError('bundle create: name the bundle directory with --output-dir DIR');
  return dir;
}

/** An example as every bundle command's help shows it: what it does as a comment, then the line. */
export function example(line: string, what: string): [string, string] {
  return [`# ${what}\n${line}`, ''];
}

export function isFile(path: string): boolean {
  return existsSync(path) && statSync(path).isFile() && !path.endsWith(ARCHIVE_INDEX_FILE);
}

export function isDirectory(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

/** Tar parts: their parts.json, or the directory holding it. */
export function isArchive(path: string): boolean {
  return path.endsWith(ARCHIVE_INDEX_FILE) || (isDirectory(path) && existsSync(join(path, ARCHIVE_INDEX_FILE)));
}
