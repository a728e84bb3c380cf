/** What the bundle suites check on disk and on stderr. */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { expect } from 'vitest';
import type { CliResult } from './cli.js';

/** The path of every regular file under `dir`, at any depth. */
async function filesUnder(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

/** Every file under `dir` by relative path, with the sha256 of its bytes. */
export async function treeHashes(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const path of await filesUnder(dir)) out.set(relative(dir, path), createHash('sha256').update(await readFile(path)).digest('hex'));
  return new Map([...out].sort(([a], [b]) => a.localeCompare(b)));
}

/** Bytes in every file under `dir` (a killed run's whole and partial files). */
export async function bytesUnder(dir: string): Promise<number> {
  let bytes = 0;
  for (const path of await filesUnder(dir)) bytes += (await stat(path)).size;
  return bytes;
}

/** One `prestage: error:` line matching `message`; progress lines and retry warnings may come before it; no stack. */
export function expectOneLineError(r: CliResult, code: number, message: RegExp): void {
  expect(r.code, r.stderr).toBe(code);
  // Progress (push's unpacking of parts too), retries, and the warning every command gives about a bundle made --allow-unsigned.
  const lines = r.stderr.trim().split('\n').filter((l) => !/^(bundled|pushed) \d+\/\d+ |^checking \d+ blobs|^unpacking \d+ parts? into |^prestage: warning: retry |^warning: bundle .* carries release .* without a signature/.test(l));
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^prestage: error: /);
  expect(lines[0]).toMatch(message);
  expect(r.stderr).not.toMatch(/\n\s+at /);
}
