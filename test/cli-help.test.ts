/**
 * Help, did-you-mean, the output flag and shell completion as a kubectl user meets them: the
 * built bin as a real process. Errors are one line on stderr with exit 2.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN_DIR, runBin } from './support/cli.js';

const oneLine = (text: string) => text.trimEnd().split('\n');

describe('help as kubectl\'s', () => {
  it('-h, help and help CMD print the help that --help prints', async () => {
    const full = await runBin('prestage', ['plan', '--help']);
    expect(full.code).toBe(0);
    expect(full.stdout).toContain('prestage plan [release]');
    expect(await runBin('prestage', ['plan', '-h'])).toEqual(full);
    expect(await runBin('prestage', ['help', 'plan'])).toEqual(full);
    const top = await runBin('prestage', ['help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('Commands:');
    expect((await runBin('prestage', ['help', 'bundle', 'verify'])).stdout).toContain('prestage bundle verify <bundle>');
  });

  it('lists only the exit codes the command can give, and names its docs page as a command', async () => {
    const version = (await runBin('prestage', ['version', '--help'])).stdout;
    expect(version).toMatch(/Exit codes:\n {2}0 .*\n {2}2 .*\n {2}70 .*\n {2}74 .*\n\nMore: prestage docs install\n/);
    const verify = (await runBin('prestage', ['verify', '--help'])).stdout;
    expect(verify).toContain('  1    NOT VERIFIED');
    expect(verify).toContain('  124  a targeted node did not answer');
    expect(verify).not.toContain('  3    ');
  });

  it('says which command or flag was meant, on one line, exit 2', async () => {
    const command = await runBin('prestage', ['stauts']);
    expect(command.code).toBe(2);
    expect(oneLine(command.stderr)).toEqual(['prestage: error: Unknown argument: stauts (did you mean status?); see prestage --help']);
    const flag = await runBin('prestage', ['plan', 'R', '--regstry-config', 'x']);
    expect(flag.code).toBe(2);
    expect(oneLine(flag.stderr)).toEqual(['prestage: error: Unknown argument: regstry-config (did you mean --registry-config?); see prestage plan --help']);
    const nothingClose = await runBin('prestage', ['plan', 'R', '--zzzzzz']);
    expect(oneLine(nothingClose.stderr)).toEqual(['prestage: error: Unknown argument: zzzzzz; see prestage plan --help']);
    const subcommand = await runBin('prestage', ['bundle', 'verfy', 'ocp-4.16.3']);
    expect(subcommand.code).toBe(2);
    expect(oneLine(subcommand.stderr)).toEqual(['prestage: error: Unknown bundle command: verfy (did you mean bundle verify?); see prestage bundle --help']);
  });
});

describe('one output flag', () => {
  it('takes kubectl\'s attached form and lets the last -o win', async () => {
    const json = await runBin('prestage', ['version', '-ojson']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ version: expect.any(String), target: expect.any(String) });
    const yaml = await runBin('prestage', ['version', '-o', 'json', '-oyaml']);
    expect(yaml.code).toBe(0);
    expect(yaml.stdout).toMatch(/^version: /m);
    expect((await runBin('prestage', ['version', '-oyaml', '--output=json'])).stdout.startsWith('{')).toBe(true);
  });

  it('refuses a format the command does not offer on one line, exit 2', async () => {
    const r = await runBin('prestage', ['version', '-o', 'wide']);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toHaveLength(1);
    expect(r.stderr).toContain('Given: "wide"');
  });
});

describe('completion', () => {
  it('prints a script for bash, zsh and fish (and for --help, the help)', async () => {
    const env = { ...process.env, SHELL: '/bin/bash' };
    expect((await runBin('prestage', ['completion', 'bash'], env)).stdout).toContain('complete -o bashdefault -o default -F _prestage_completions prestage');
    expect((await runBin('prestage', ['completion', 'zsh'], env)).stdout).toMatch(/^#compdef prestage\n[^]*\n {4}_files\n/);
    expect((await runBin('prestage', ['completion', 'fish'], env)).stdout).toContain("complete -c prestage -f -a '(_prestage_completions)'");
    expect((await runBin('prestage', ['completion'], { ...env, SHELL: '/usr/bin/zsh' })).stdout).toMatch(/^#compdef prestage/);
    const help = await runBin('prestage', ['completion', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('prestage completion [shell]');
    expect(help.stdout).not.toContain('###-begin');
    const bad = await runBin('prestage', ['completion', 'tcsh']);
    expect(bad.code).toBe(2);
    expect(oneLine(bad.stderr)).toHaveLength(1);
  });

  it('prints no error while completing a half-typed value, and leaves path arguments to the shell', async () => {
    expect(await runBin('prestage', ['--get-yargs-completions', 'prestage', 'stage', '--to', '4.1'])).toEqual({ code: 0, stdout: '', stderr: '' });
    // No flags before a `-` is typed: the shell completes the bundle directory's name.
    expect(await runBin('prestage', ['--get-yargs-completions', 'prestage', 'bundle', 'verify', ''])).toEqual({ code: 0, stdout: '', stderr: '' });
    expect((await runBin('prestage', ['--get-yargs-completions', 'prestage', 'bundle', 'verify', '--sig'])).stdout.split('\n')).toContain('--sigstore-key');
  });

  it('completes file names in bash through the script it prints', () => {
    const dir = mkdtempSync(join(tmpdir(), 'prestage-complete-'));
    try {
      writeFileSync(join(dir, 'ocp-bundle-marker'), '');
      const script = execFileSync(process.execPath, [`${BIN_DIR}prestage.js`, 'completion', 'bash'], { encoding: 'utf8' });
      writeFileSync(join(dir, 'prestage'), `#!/bin/sh\nexec "${process.execPath}" "${BIN_DIR}prestage.js" "$@"\n`, { mode: 0o755 });
      // bash's own completion machinery: the function the script defines, then what COMPREPLY holds.
      const ask = (words: string) => execFileSync('bash', ['-c', `${script}\nCOMP_WORDS=(${words}); COMP_CWORD=$((\${#COMP_WORDS[@]}-1)); _prestage_completions; printf '%s\\n' "\${COMPREPLY[@]}"`], { cwd: dir, encoding: 'utf8', env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } });
      expect(ask('prestage sta').trim().split('\n').sort()).toEqual(['stage', 'status']);
      expect(ask("prestage bundle verify ''").trim()).toBe('');
      expect(execFileSync('bash', ['-c', `${script}\ncomplete -p prestage`], { encoding: 'utf8' })).toContain('-o default');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('docs', () => {
  it('shows the page a command\'s help names, as docs/ holds it', async () => {
    const page = await runBin('prestage', ['docs', 'air-gapped-bundles']);
    expect(page.code).toBe(0);
    expect(page.stdout).toBe(readFileSync(new URL('../docs/air-gapped-bundles.md', import.meta.url), 'utf8'));
    expect((await runBin('prestage', ['bundle', 'verify', '--help'])).stdout).toContain('More: prestage docs air-gapped-bundles');
    expect((await runBin('prestage', ['docs'])).stdout.split('\n')).toEqual(expect.arrayContaining(['  air-gapped-bundles', '  planning']));
  });

  it('names the page probably meant for an unknown topic, one line, exit 2', async () => {
    const r = await runBin('prestage', ['docs', 'planing']);
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toEqual(['prestage: error: docs: no page "planing" (did you mean planning?); `prestage docs` lists them']);
  });
});
