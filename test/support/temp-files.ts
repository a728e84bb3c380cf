/**
 * Temporary directories a test file makes, removed when it ends (`afterAll(removeTempDirs)`), so
 * a run leaves nothing in /tmp; kept with PRESTAGE_TESTBED_KEEP, as the test bed's are.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

export function tempDirSync(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

export function removeTempDirs(): void {
  if (process.env.PRESTAGE_TESTBED_KEEP) return;
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** A containers-auth.json file (`--registry-config`, REGISTRY_AUTH_FILE) holding one registry's credentials. */
export async function authFile(host: string, username: string, password: string): Promise<string> {
  const file = join(await tempDir('prestage-auth-'), 'auth.json');
  await writeFile(file, JSON.stringify({ auths: { [host]: { auth: Buffer.from(`${username}:${password}`).toString('base64') } } }));
  return file;
}
