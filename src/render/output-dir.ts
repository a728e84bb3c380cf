/**
 * What a command checks before it renders sets: the `--api` choices and that `--output-dir`
 * can be written. Apart from the rendering (./pinned-image-sets.ts), which needs cluster
 * modules a plan printed as JSON or a table never uses.
 */
import { statSync, type Stats } from 'node:fs';
import { mkdtemp, rmdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { BadInputError, systemErrorText } from '../errors.js';

/** Which API the manifests are for: `--api`. */
export const SET_APIS = ['mco', 'mco-v1alpha1', 'prestage'] as const;
export type SetApi = (typeof SET_APIS)[number];

/**
 * Fails when `dir` cannot become the output directory: checked before any registry work, by
 * creating (and removing) a probe directory where the first missing part would be made.
 */
export async function checkOutputDir(dir: string): Promise<void> {
  let existing = resolve(dir);
  let stat = statIfAny(existing);
  while (!stat) {
    existing = dirname(existing);
    stat = statIfAny(existing);
  }
  if (!stat.isDirectory()) throw new BadInputError(`--output-dir ${dir}: ${existing} is a file, not a directory; name a directory`);
  try {
    await rmdir(await mkdtemp(join(existing, '.prestage-probe-')));
  } catch (error) {
    throw new BadInputError(`--output-dir ${dir}: cannot write in ${existing}: ${systemErrorText(error as NodeJS.ErrnoException)}; name a writable directory`);
  }
}

/** Undefined where nothing is, including under a file (ENOTDIR). */
function statIfAny(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw new BadInputError(`--output-dir: cannot look at ${path}: ${systemErrorText(error as NodeJS.ErrnoException)}`);
  }
}
