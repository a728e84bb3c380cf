/**
 * `prestage agent` as the DaemonSet runs it (node bin/prestage.js agent ...): the agent's own
 * bundle, dist/agent.cjs, without the CLI's code; --help and refused flags in the CLI's words,
 * the CLI loaded only then.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { runBin } from './support/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'prestage-agent-entry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const RECORDER = fileURLToPath(new URL('./support/record-imports.mjs', import.meta.url));

/** The bin as a process, with the ES modules it loaded (file names under dist/ and node_modules/). */
async function withImports(args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number; stdout: string; stderr: string; loaded: string[] }> {
  const file = join(dir, `imports-${Math.random().toString(36).slice(2)}`);
  const result = await runBin('prestage', args, { ...env, NODE_OPTIONS: `--import=${RECORDER}`, PRESTAGE_TEST_IMPORTS_FILE: file });
  let loaded: string[] = [];
  try {
    loaded = readFileSync(file, 'utf8').split('\n').filter((url) => url.startsWith('file:'));
  } catch {
    // Nothing resolved as an ES module.
  }
  return { ...result, loaded };
}

describe('the agent entry of its own', () => {
  it('runs the agent from dist/agent.cjs without loading the CLI (yargs, the command table)', async () => {
    const run = await withImports(['agent', '--kubeconfig', join(dir, 'none'), '--cri-socket', join(dir, 'crio.sock'), '--link-rate', '1MiB/s'], { ...process.env, NODE_NAME: 'worker-0' });
    // It got as far as the runtime: the flags were read and the agent started.
    expect(run.stderr).toBe(`link cap: 1 MiB/s = 1.05 MB/s (8.39 Mbit/s)\nprestage: error: cannot reach the container runtime at ${join(dir, 'crio.sock')}: connect ENOENT ${join(dir, 'crio.sock')}\n`);
    expect(run.code).toBe(4);
    expect(run.loaded.some((url) => url.endsWith('/bin/prestage.js'))).toBe(true);
    expect(run.loaded.filter((url) => /\/dist\/cli\/main\.js$|\/node_modules\/yargs\//.test(url))).toEqual([]);
  });

  it('prints the help `prestage help agent` prints, the CLI loaded for it', async () => {
    const lean = await withImports(['agent', '--help']);
    const full = await runBin('prestage', ['help', 'agent']);
    expect(lean.code).toBe(0);
    expect(lean.stdout).toContain('prestage agent');
    expect({ code: lean.code, stdout: lean.stdout, stderr: lean.stderr }).toEqual(full);
    expect(lean.loaded.some((url) => url.endsWith('/dist/cli/main.js'))).toBe(true);
  });

  it('refuses a flag in one line, exit 2, as every command does', async () => {
    const bogus = await runBin('prestage', ['agent', '--bogus']);
    expect(bogus).toEqual({ code: 2, stdout: '', stderr: 'prestage: error: Unknown argument: bogus; see prestage agent --help\n' });
  });
});
