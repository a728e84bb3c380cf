import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { parseAgentArgs, runAgent, type AgentIO } from './agent-main.js';
import { main } from './main.js';

type Runner = (argv: readonly string[], io: AgentIO) => Promise<number>;

async function run(argv: string[], runner: Runner = (words, io) => runAgent(words, io)): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: string[] = [];
  const err: string[] = [];
  stdout.on('data', (chunk: Buffer) => out.push(chunk.toString()));
  stderr.on('data', (chunk: Buffer) => err.push(chunk.toString()));
  const code = await runner(argv, { stdout, stderr });
  return { code, stdout: out.join(''), stderr: err.join('') };
}

describe('the agent entry of its own', () => {
  it("reads booleans as yargs does: --no-FLAG turns a default-true flag off (the DaemonSet's --no-set-status)", () => {
    const flags = new Map([['set-status', { type: 'boolean' as const, default: true }], ['once', { type: 'boolean' as const, default: false }]]);
    expect(parseAgentArgs(['--no-set-status', '--once'], flags)).toMatchObject({ 'set-status': false, once: true });
    expect(parseAgentArgs([], flags)).toMatchObject({ 'set-status': true, once: false });
  });

  // --help as a process: test/agent-entry.test.ts (yargs prints help on the process's stdout).
  it("answers the flags it refuses with the full CLI's words and exit code", async () => {
    const cli: Runner = (words, io) => main(['agent', ...words], { ...io, scriptName: 'prestage' });
    for (const argv of [['--bogus'], ['--concurrency', 'x'], ['--concurrency=0'], ['--link-rate', 'fast'], ['--log-level', 'loud']]) {
      const lean = await run(argv);
      expect(lean, argv.join(' ')).toEqual(await run(argv, cli));
      expect(lean, argv.join(' ')).toEqual({ code: 2, stdout: '', stderr: expect.stringMatching(/^prestage: error: .*; see prestage agent --help\n$/) });
    }
    expect((await run(['--bogus'])).stderr).toBe('prestage: error: Unknown argument: bogus; see prestage agent --help\n');
  });

  it('reads the flags without the CLI when it can: a refusal it can word itself never reaches it', async () => {
    const asked: string[][] = [];
    const cli: Runner = async (words) => (asked.push([...words]), 0);
    await run(['--bogus'], (words, io) => runAgent(words, io, cli));
    await run(['--concurrency=0'], (words, io) => runAgent(words, io, cli));
    expect(asked).toEqual([['--bogus'], ['--concurrency=0']]);
    const saved = process.env.NODE_NAME;
    delete process.env.NODE_NAME;
    try {
      const missing = await run(['--kubeconfig', '/nonexistent'], (words, io) => runAgent(words, io, cli));
      expect(missing.code).toBe(2);
      expect(asked).toHaveLength(2);
    } finally {
      if (saved !== undefined) process.env.NODE_NAME = saved;
    }
  });

  it('says what is missing when no node is named, before any cluster work', async () => {
    const saved = process.env.NODE_NAME;
    delete process.env.NODE_NAME;
    try {
      const { code, stderr } = await run(['--kubeconfig', '/nonexistent']);
      expect(code).toBe(2);
      expect(stderr).toBe('prestage: error: no node name: pass --node-name or set NODE_NAME (the DaemonSet sets it from spec.nodeName)\n');
    } finally {
      if (saved !== undefined) process.env.NODE_NAME = saved;
    }
  });
});
