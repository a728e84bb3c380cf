/**
 * The CLI's error paths as a user meets them: the built bin as a real process. Each ends in
 * one line on stderr with its exit code, no stack trace, nothing left behind; bad input is
 * found before any registry or cluster work (the registry in those cases is unreachable, so
 * reaching it would be exit 3, not 2).
 */
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubeClient } from '../src/kube/client.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { installMcoCrds } from './mco/crds.js';
import { BIN_DIR, runBin, type CliResult } from './support/cli.js';

const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
/** Nothing listens on port 1: any registry read fails fast with exit 3. */
const UNREACHABLE = ['--mirror', 'quay.io=127.0.0.1:1', '--insecure-registry', '127.0.0.1:1'];
const BIN = `${BIN_DIR}prestage.js`;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'prestage-cli-errors-'));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The bin with stdout going to `stdout` (a file descriptor) or read until `closeAfter` bytes, then closed. */
function runWithStdout(args: readonly string[], stdout: { fd: number } | { closeAfter: number }): Promise<CliResult & { read: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'fd' in stdout ? stdout.fd : 'pipe', 'pipe'] });
    let stderr = '';
    let read = 0;
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.stdout?.on('data', (chunk: Buffer) => {
      read += chunk.length;
      if ('closeAfter' in stdout && read >= stdout.closeAfter) child.stdout?.destroy();
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? -1, stdout: '', stderr, read }));
  });
}

describe('bad flags: one line naming the flag, exit 2, before any registry read', () => {
  it.each([
    [['--max-concurrency', '0'], '--max-concurrency must be an integer >= 1, got 0'],
    [['--retries=-1'], '--retries must be an integer >= 0, got -1'],
    [['--stall-timeout', 'abc'], '--stall-timeout: "abc" is not a duration; use e.g. 90s, 30m, 1h30m, 720h (bare: seconds)'],
    [['--stall-timeout', '0'], '--stall-timeout must be longer than zero, e.g. 90s, 30m, 1h30m, 720h'],
    [['--stall-timeout', '0s'], '--stall-timeout must be longer than zero, e.g. 90s, 30m, 1h30m, 720h'],
    [['--stall-timeout', '600h'], '--stall-timeout "600h" is longer than 576h, the longest it takes; use e.g. 90s, 30m, 1h30m, 720h'],
    [['--bogus-flag'], 'Unknown argument: bogus-flag'],
    [['-o', 'nope'], 'Invalid values: Argument: output, Given: "nope", Choices: "table", "wide", "json", "yaml", "name"'],
  ])('plan %j', async (flags, message) => {
    const result = await runBin('prestage', ['plan', RELEASE, ...UNREACHABLE, ...flags]);
    expect(result).toEqual({ code: 2, stdout: '', stderr: `prestage: error: ${message}; see prestage plan --help\n` });
  });

  it('bundle create --parallel 0 is rejected before any read', async () => {
    const result = await runBin('prestage', ['bundle', 'create', RELEASE, '--output-dir', join(dir, 'parallel-0'), ...UNREACHABLE, '--parallel', '0']);
    expect(result).toEqual({ code: 2, stdout: '', stderr: 'prestage: error: --parallel must be an integer >= 1, got 0; see prestage bundle create --help\n' });
  });

  it('wait --timeout abc is rejected before the kubeconfig is read', async () => {
    const result = await runBin('prestage', ['wait', '--timeout', 'abc', '--kubeconfig', join(dir, 'no-such-kubeconfig')]);
    expect(result).toEqual({ code: 2, stdout: '', stderr: 'prestage: error: --timeout: "abc" is not a duration; use e.g. 90s, 30m, 1h30m, 720h (bare: seconds); see prestage wait --help\n' });
  });

  it('every duration flag takes the same forms (90s, 2m, 1h30m, a bare number of seconds), and refuses the same way', async () => {
    // verify --timeout took only seconds while wait --timeout needed a unit; each now takes both.
    for (const args of [['verify', '4.16.3', '--timeout', 'soon'], ['wait', '--timeout', 'soon'], ['agent', '--node', 'n', '--resync', 'soon'], ['agent', '--node', 'n', '--permanent-failure-backoff', 'soon'], ['agent', '--node', 'n', '--stall-timeout', 'soon']]) {
      const result = await runBin('prestage', [...args, '--kubeconfig', join(dir, 'no-such-kubeconfig')]);
      const flag = args.at(-2)!;
      expect(result, args.join(' ')).toEqual({ code: 2, stdout: '', stderr: `prestage: error: ${flag}: "soon" is not a duration; use e.g. 90s, 30m, 1h30m, 720h (bare: seconds); see prestage ${args[0]} --help\n` });
    }
  });

  it('a malformed rate or window, a window of zero length, an unknown time zone: one line, exit 2, before the kubeconfig is read', async () => {
    const kube = ['--kubeconfig', join(dir, 'no-such-kubeconfig')];
    for (const [args, message] of [
      [['stage', RELEASE, '--link-rate', 'fast'], '--link-rate: "fast" is not a rate; use e.g. 20MiB/s, 5MB/s (bytes), 40Mbit/s, 40Mbps (bits); see prestage stage --help'],
      [['install', '--image', 'r/p:1', '--link-rate', '0'], '--link-rate must be more than zero, e.g. 20MiB/s, 5MB/s (bytes), 40Mbit/s, 40Mbps (bits); see prestage install --help'],
      [['agent', '--node', 'n', '--link-rate', '20 parsecs'], '--link-rate: "20 parsecs" is not a rate; use e.g. 20MiB/s, 5MB/s (bytes), 40Mbit/s, 40Mbps (bits); see prestage agent --help'],
      [['stage', RELEASE, '--window', '22-06'], '--window: bad window "22-06": use HH:MM-HH:MM in 24-hour time, e.g. 22:00-06:00'],
      [['apply', RELEASE, '--window', '22:00-22:00'], '--window: window "22:00-22:00" has zero length; give a start and an end that differ (22:00-06:00 wraps past midnight)'],
      [['stage', RELEASE, '--window', '22:00-06:00', '--window-tz', 'Mars/Olympus'], '--window-tz: unknown time zone "Mars/Olympus": use an IANA name such as UTC, Europe/Paris or America/New_York'],
      [['stage', RELEASE, '--window-strict'], '--window-strict needs --window HH:MM-HH:MM'],
    ] as const) {
      const result = await runBin('prestage', [...args, ...kube]);
      expect(result, args.join(' ')).toEqual({ code: 2, stdout: '', stderr: `prestage: error: ${message}\n` });
    }
  });

  it('sizes, rates and durations: one grammar on every flag, a malformed one is one line naming the flag, the value and the forms', async () => {
    const kube = ['--kubeconfig', join(dir, 'no-such-kubeconfig')];
    const sizes = 'use e.g. 4Gi, 4G, 500Mi, 100GB, 1.5GiB, or plain bytes';
    for (const [args, message] of [
      [['agent', '--node', 'n', '--reserve', '16gb'], `--reserve: "16gb" is not a size (units are case-sensitive: m is milli in Kubernetes; write M, G or Mi, Gi); ${sizes}; see prestage agent --help`],
      [['agent', '--node', 'n', '--min-throughput', 'slow'], '--min-throughput: "slow" is not a rate; use e.g. 20MiB/s, 5MB/s (bytes), 40Mbit/s, 40Mbps (bits); see prestage agent --help'],
      [['install', '--image', 'r/p:1', '--cache-size', 'big'], `--cache-size: "big" is not a size; ${sizes}; see prestage install --help`],
      [['bundle', 'create', RELEASE, '--output-dir', join(dir, 'sized'), ...UNREACHABLE, '--max-archive-size', '4 gigs'], `--max-archive-size: "4 gigs" is not a size; ${sizes}; see prestage bundle create --help`],
      [['bundle', 'create', RELEASE, '--output-dir', join(dir, 'sized'), ...UNREACHABLE, '--max-archive-size', '512k'], '--max-archive-size "512k" is under 1.0 MiB, the least it takes; use e.g. 4Gi, 4G, 500Mi, 100GB, 1.5GiB; see prestage bundle create --help'],
      [['wait', '--timeout', '9000h'], '--timeout: "9000h" is longer than a year (8760h), the longest a duration may be; use e.g. 90s, 30m, 1h30m, 720h (bare: seconds); see prestage wait --help'],
      [['wait', '--fail-after', '5d'], '--fail-after: "5d" is not a duration; use e.g. 90s, 30m, 1h30m, 720h (bare: seconds); see prestage wait --help'],
      [['verify', '4.16.3', '--timeout', '720h'], '--timeout "720h" is longer than 576h, the longest it takes; use e.g. 90s, 30m, 1h30m, 720h; see prestage verify --help'],
      [['apply', RELEASE, '--link-rate', '40Mbps/h'], '--link-rate: "40Mbps/h" is not a rate; use e.g. 20MiB/s, 5MB/s (bytes), 40Mbit/s, 40Mbps (bits); see prestage apply --help'],
    ] as const) {
      const result = await runBin('prestage', [...args, ...kube]);
      expect(result, args.join(' ')).toEqual({ code: 2, stdout: '', stderr: `prestage: error: ${message}\n` });
    }
  });

  it('echoes the link cap it understood in both units: 40Mbps is 5 MB/s, 40MB/s eight times that', async () => {
    const kube = ['--kubeconfig', join(dir, 'no-such-kubeconfig')];
    for (const [rate, echo] of [['40Mbps', '5 MB/s (40 Mbit/s)'], ['40Mbit/s', '5 MB/s (40 Mbit/s)'], ['5MB/s', '5 MB/s (40 Mbit/s)'], ['40MB/s', '40 MB/s (320 Mbit/s)'], ['20Mi', '20 MiB/s = 21 MB/s (168 Mbit/s)']] as const) {
      // The kubeconfig is missing: the command stops there (exit 2), after the echo.
      const result = await runBin('prestage', ['wait', '--link-rate', rate, ...kube]);
      expect(result.stderr.split('\n')[0], rate).toBe(`link cap: ${echo}`);
      expect(result.code).toBe(2);
    }
  });

  it('an unknown command is one line, exit 2', async () => {
    expect(await runBin('prestage', ['nope'])).toEqual({ code: 2, stdout: '', stderr: 'prestage: error: Unknown argument: nope; see prestage --help\n' });
  });
});

describe('--output-dir is checked before the release is read', () => {
  it('on a file: exit 2, the file untouched', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, 'keep me\n');
    const result = await runBin('prestage', ['plan', RELEASE, ...UNREACHABLE, '--output-dir', file]);
    expect(result).toEqual({ code: 2, stdout: '', stderr: `prestage: error: --output-dir ${file}: ${file} is a file, not a directory; name a directory\n` });
    expect(readFileSync(file, 'utf8')).toBe('keep me\n');
  });

  it('under a file: exit 2', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, 'keep me\n');
    const result = await runBin('prestage', ['plan', RELEASE, ...UNREACHABLE, '--output-dir', join(file, 'gitops')]);
    expect(result).toEqual({ code: 2, stdout: '', stderr: `prestage: error: --output-dir ${join(file, 'gitops')}: ${file} is a file, not a directory; name a directory\n` });
  });

  it('where nothing can be created (/proc): exit 2, nothing created', async () => {
    const result = await runBin('prestage', ['plan', RELEASE, ...UNREACHABLE, '--output-dir', '/proc/prestage-test/gitops']);
    expect(result).toEqual({
      code: 2,
      stdout: '',
      stderr: 'prestage: error: --output-dir /proc/prestage-test/gitops: cannot write in /proc: no such file or directory (ENOENT); name a writable directory\n',
    });
    expect(readdirSync('/proc')).not.toContain('prestage-test');
  });

  it('a directory still to be made passes the check and, when planning fails, is not left behind', async () => {
    const gitops = join(dir, 'new', 'gitops');
    const result = await runBin('prestage', ['plan', RELEASE, ...UNREACHABLE, '--retries', '0', '--output-dir', gitops]);
    expect(result.code).toBe(3);
    expect(result.stderr.split('\n')).toHaveLength(2);
    expect(readdirSync(dir).filter((name) => name === 'new' || name.startsWith('.prestage'))).toEqual([]);
  });
});

it('apply of a file that does not exist says so, exit 2, before any cluster or registry work', async () => {
  const result = await runBin('prestage', ['apply', join(dir, 'missing.json'), '--kubeconfig', join(dir, 'no-such-kubeconfig')]);
  expect(result).toEqual({
    code: 2,
    stdout: '',
    stderr: `prestage: error: ${join(dir, 'missing.json')}: no such file or directory; name a plan file (plan -o json), a PinnedImageSet YAML file or directory, or a release pullspec\n`,
  });
});

describe('an API server that answers HTML (a proxy or login page)', () => {
  let server: Server;
  let kubeconfig: string;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!DOCTYPE html><html><body>Sign in</body></html>\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    kubeconfig = join(dir, 'html-kubeconfig');
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'html', cluster: { server: url } }],
        users: [{ name: 'html', user: { token: 'not-a-secret' } }],
        contexts: [{ name: 'html', context: { cluster: 'html', user: 'html' } }],
        'current-context': 'html',
      }),
    );
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });

  it('is one line naming the server, exit 4', async () => {
    const result = await runBin('prestage', ['status', '--kubeconfig', kubeconfig]);
    const { port } = server.address() as AddressInfo;
    expect(result).toEqual({
      code: 4,
      stdout: '',
      stderr: `prestage: error: GET /apis/machineconfiguration.openshift.io/v1: http://127.0.0.1:${port} answered text/html, not JSON; is the kubeconfig's server a Kubernetes API server?\n`,
    });
  });
});

describe('plan output against the harness registry', () => {
  let registry: RegistryHandle;
  let mirror: string[];
  beforeAll(async () => {
    registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
    mirror = ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
  });
  afterAll(async () => {
    await registry?.stop();
  });

  it('stdout closed by its reader (| head): exit 0, nothing on stderr', async () => {
    const result = await runWithStdout(['plan', RELEASE, ...mirror, '-o', 'json'], { closeAfter: 1 });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.read).toBeGreaterThan(0);
  });

  it('stdout on a full disk (/dev/full): one line, exit 74', async () => {
    const full = openSync('/dev/full', 'w');
    try {
      const result = await runWithStdout(['plan', RELEASE, ...mirror, '-o', 'json'], { fd: full });
      expect(result.stderr).toBe('prestage: error: cannot write the output to stdout: no space left on device (ENOSPC)\n');
      expect(result.code).toBe(74);
    } finally {
      closeSync(full);
    }
  });

  it('--output-dir still to be made gets every set and kustomization.yaml, and no staging files', async () => {
    const gitops = join(dir, 'made', 'gitops');
    const result = await runBin('prestage', ['plan', RELEASE, ...mirror, '--output-dir', gitops, '-o', 'json']);
    expect(result.code).toBe(0);
    const names = (JSON.parse(result.stdout) as { sets: Array<{ name: string }> }).sets.map((set) => `${set.name}.yaml`);
    expect(readdirSync(gitops).sort()).toEqual([...names, 'kustomization.yaml'].sort());
    expect(result.stderr).toBe(`wrote ${[...names, 'kustomization.yaml'].map((f) => `${gitops}/${f}`).join(', ')}\n`);
  });
});

describe('help and completion', () => {
  it.each(['plan', 'bundle', 'install', 'apply', 'wait', 'status', 'ready', 'stage', 'prune', 'agent'])('%s --help shows examples and the exit codes', async (command) => {
    const result = await runBin('prestage', [command, '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`Examples:\\n  # .+\\n  prestage ${command}\\b`));
    expect(result.stdout).toContain('Exit codes:\n  0    ok');
    expect(result.stdout).toContain('  74   output could not be written (disk full)');
  });

  it('--help lists every command without loading them, with the exit codes', async () => {
    const result = await runBin('prestage', ['--help']);
    expect(result.code).toBe(0);
    for (const command of ['plan [release]', 'bundle <command>', 'install', 'apply <source>', 'wait [sets..]', 'status [sets..]', 'ready <release-version..>', 'stage [release]', 'prune', 'agent', 'completion']) {
      expect(result.stdout).toContain(`prestage ${command}`);
    }
    expect(result.stdout).toContain('  124  timeout (wait, stage)');
  });

  it('completion prints a bash script, a zsh one when $SHELL is zsh, and the script is answered', async () => {
    const bash = await runBin('prestage', ['completion'], { ...process.env, SHELL: '/bin/bash' });
    expect(bash.code).toBe(0);
    expect(bash.stdout).toContain('complete -o bashdefault -o default -F _prestage_completions prestage');
    const zsh = await runBin('prestage', ['completion'], { ...process.env, SHELL: '/usr/bin/zsh' });
    expect(zsh.stdout).toMatch(/^#compdef prestage\n/);
    const commands = await runBin('prestage', ['--get-yargs-completions', 'prestage', ''], { ...process.env, SHELL: '/bin/bash' });
    expect(commands.stdout.split('\n')).toEqual(expect.arrayContaining(['plan', 'bundle', 'stage', 'completion']));
    const flags = await runBin('prestage', ['--get-yargs-completions', 'prestage', 'plan', '--'], { ...process.env, SHELL: '/bin/bash' });
    expect(flags.stdout.split('\n')).toEqual(expect.arrayContaining(['--output-dir', '--max-concurrency', '--mirror']));
  });
});

describe('unknown sets on a real API server', () => {
  let cluster: TestCluster;
  let kube: string[];
  beforeAll(async () => {
    cluster = await startCluster({ workers: 0 });
    await installMcoCrds(new KubeClient(cluster.kubeConfig));
    kube = ['--kubeconfig', cluster.kubeconfigPath];
  }, COLD_BUILD_TIMEOUT_MS);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('status and wait of a set the cluster does not have: the same line, exit 2', async () => {
    const status = await runBin('prestage', ['status', 'nope', ...kube]);
    const wait = await runBin('prestage', ['wait', 'nope', '--timeout', '30s', ...kube]);
    expect(status).toEqual({ code: 2, stdout: '', stderr: 'prestage: error: no PinnedImageSet nope on the cluster\n' });
    expect(wait).toEqual(status);
  });
});

describe("a registry's words reach the terminal inert", () => {
  let server: Server;
  let registry: string;
  // An error body that would clear the screen, retitle the window and forge a line above.
  const hostile = 'denied\u001b[2J\u001b]0;owned\u0007\u001b[1A\rrelease verified\u202e';
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ errors: [{ code: 'UNSUPPORTED', message: hostile }] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    registry = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });

  it('control characters in an error body are printed escaped, on one line, exit 3', async () => {
    const result = await runBin('prestage', ['plan', `${registry}/ocp/release:4.16.3`, '--insecure-registry', registry]);
    expect(result.code).toBe(3);
    expect(result.stderr.split('\n')).toHaveLength(2); // one line and its newline
    expect(result.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(result.stderr).toContain('denied\\x1b[2J\\x1b]0;owned\\x07\\x1b[1A\\rrelease verified\\u202e');
  });
});
