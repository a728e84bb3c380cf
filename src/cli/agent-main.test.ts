import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { parseAgentArgs, runAgent } from './agent-main.js';

async function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: string[] = [];
  const err: string[] = [];
  stdout.on('data', (chunk: Buffer) => out.push(chunk.toString()));
  stderr.on('data', (chunk: Buffer) => err.push(chunk.toString()));
  const code = await runAgent(argv, { stdout, stderr });
  return { code, stdout: out.join(''), stderr: err.join('') };
}

describe('the agent entry of its own', () => {
  it("reads booleans as yargs does: --no-FLAG turns a default-true flag off (the DaemonSet's --no-set-status)", () => {
    const flags = new Map([['set-status', { type: 'boolean' as const, default: true }], ['once', { type: 'boolean' as const, default: false }]]);
    expect(parseAgentArgs(['--no-set-status', '--once'], flags)).toMatchObject({ 'set-status': false, once: true });
    expect(parseAgentArgs([], flags)).toMatchObject({ 'set-status': true, once: false });
  });

  it("lists the flags cli/agent.ts declares, with their defaults, without yargs", async () => {
    const { code, stdout } = await run(['--help']);
    expect(code).toBe(0);
    expect(stdout).toContain('--link-rate');
    expect(stdout).toContain('--namespace, --lease-namespace');
    expect(stdout).toMatch(/--concurrency\n.*\[default: 5\]/);
  });

  it('refuses what yargs refused, in one line, exit 2: an unknown flag, a bad number, a flag its own check refuses', async () => {
    for (const [argv, message] of [
      [['--bogus'], /^prestage agent: error: Unknown option '--bogus'; see prestage agent --help\n$/],
      [['--concurrency', 'x'], /^prestage agent: error: --concurrency: "x" is not a number/],
      [['--concurrency=0'], /^prestage agent: error: .*concurrency/],
      [['--link-rate', 'fast'], /^prestage agent: error: .*link-rate/],
    ] as const) {
      const { code, stderr } = await run([...argv]);
      expect({ code, stderr }).toEqual({ code: 2, stderr: expect.stringMatching(message) });
    }
  });

  it('says what is missing when no node is named, before any cluster work', async () => {
    const saved = process.env.NODE_NAME;
    delete process.env.NODE_NAME;
    try {
      const { code, stderr } = await run(['--kubeconfig', '/nonexistent']);
      expect(code).toBe(2);
      expect(stderr).toBe('prestage agent: error: no node name: pass --node-name or set NODE_NAME (the DaemonSet sets it from spec.nodeName)\n');
    } finally {
      if (saved !== undefined) process.env.NODE_NAME = saved;
    }
  });
});
