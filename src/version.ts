/**
 * What this prestage is: its version, the commit it was built from, the Node.js it runs on and
 * its target. The single executable (`npm run dist`) has its build inlined; run from a checkout
 * or the npm package, the version comes from package.json and the commit is not known.
 */
import { readFileSync } from 'node:fs';

/** Inlined by scripts/dist.ts: `{"version","commit"}`. */
declare const __PRESTAGE_BUILD__: string | undefined;

export interface BuildInfo {
  readonly version: string;
  /** The commit the executable was built from (`-dirty` with uncommitted changes); `unknown` outside one. */
  readonly commit: string;
  readonly node: string;
  /** `linux-amd64`, `linux-arm64`, ... */
  readonly target: string;
  /** A single executable (npm run dist), rather than Node.js running the package. */
  readonly executable: boolean;
}

export function buildInfo(): BuildInfo {
  const target = `${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
  if (typeof __PRESTAGE_BUILD__ === 'string') {
    const { version, commit } = JSON.parse(__PRESTAGE_BUILD__) as { version: string; commit: string };
    return { version, commit, node: process.versions.node, target, executable: true };
  }
  // From src/ (tsx, vitest) or dist/: package.json is one level up either way.
  const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return { version, commit: 'unknown', node: process.versions.node, target, executable: false };
}
