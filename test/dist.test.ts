/**
 * `npm run dist`: the single executables as a user gets them, built from this checkout twice
 * (same bytes), then run as a user runs them: with no `node` on the PATH, under their plugin
 * names, planning the fixture release from the real registry exactly as the TypeScript does.
 */
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { runBin, runCli, type CliResult } from './support/cli.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const truth = inject('fixtureTruth');
const RELEASE = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;
const TARGET = `linux-${process.arch === 'x64' ? 'amd64' : process.arch}`;
let dir: string;
let registry: RegistryHandle;

function dist(out: string, ...flags: string[]): void {
  execFileSync(process.execPath, [join(ROOT, 'node_modules/tsx/dist/cli.mjs'), join(ROOT, 'scripts/dist.ts'), '--out', out, ...flags], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
}

/** The executable as a child process, with no `node` anywhere on its PATH. */
function run(name: string, args: readonly string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(join(dir, 'a', TARGET, name), args, { env: { PATH: '/nonexistent', HOME: dir }, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'prestage-dist-'));
  dist(join(dir, 'a'));
  dist(join(dir, 'b'), '--reproducible');
  dist(join(dir, 'c'), '--reproducible');
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
}, 600_000);
afterAll(async () => {
  await registry?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('npm run dist', () => {
  it('builds linux amd64 and arm64 executables with their checksums and the plugin names as links; --reproducible gives the same bytes twice', () => {
    const sums = (build: string) => readFileSync(join(dir, build, 'SHA256SUMS'), 'utf8');
    const files = sums('a').trim().split('\n').map((line) => line.split(/\s+/) as [string, string]);
    expect(files.map(([, file]) => file)).toEqual(['linux-amd64/prestage', 'linux-arm64/prestage']);
    for (const [sum, file] of files) expect(createHash('sha256').update(readFileSync(join(dir, 'a', file))).digest('hex')).toBe(sum);
    expect(sums('c')).toBe(sums('b'));
    // The arm64 blob never carries a code cache (it is the host's V8's): the same bytes either way.
    expect(sums('a').split('\n')[1]).toBe(sums('b').split('\n')[1]);
    for (const target of ['linux-amd64', 'linux-arm64']) {
      expect(['oc-prestage', 'kubectl-prestage', 'kubectl_complete-prestage', 'oc_complete-prestage'].map((p) => readlinkSync(join(dir, 'a', target, p)))).toEqual(['prestage', 'prestage', 'prestage', 'prestage']);
    }
  });

  it('the arm64 file is an AArch64 ELF carrying the injected application', () => {
    const elf = readFileSync(join(dir, 'a', 'linux-arm64', 'prestage'));
    expect(elf.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
    expect(elf.readUInt16LE(18)).toBe(183); // e_machine: EM_AARCH64
    expect(elf.includes('NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2:1')).toBe(true);
  });

  it('says what it is: version, commit, Node.js version and target, with no node on the PATH', async () => {
    const result = await run('prestage', ['version', '-o', 'json']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    expect(JSON.parse(result.stdout)).toEqual({ version, commit: expect.stringMatching(new RegExp(`^${head}(-dirty)?$`)), node: process.versions.node, target: TARGET, executable: true });
    expect((await run('prestage', ['--version'])).stdout).toBe(`${version}\n`);
    // The docs pages the help names travel inside the executable.
    expect((await run('prestage', ['docs', 'air-gapped-bundles'])).stdout).toBe(readFileSync(join(ROOT, 'docs/air-gapped-bundles.md'), 'utf8'));
  });

  it('names itself as oc and kubectl call it, and answers their plugin completion (Cobra\'s protocol)', async () => {
    expect((await run('oc-prestage', ['--help'])).stdout.split('\n')[0]).toBe('oc prestage <command>');
    expect((await run('kubectl-prestage', ['--help'])).stdout.split('\n')[0]).toBe('kubectl prestage <command>');
    // kubectl runs kubectl_complete-prestage with the words after `kubectl prestage`, the last being completed.
    expect((await run('kubectl_complete-prestage', ['st'])).stdout).toBe('status\nstage\n:4\n');
    expect((await run('kubectl_complete-prestage', ['plan', '--outp'])).stdout).toBe('--output\n--output-dir\n:4\n');
    expect((await run('oc_complete-prestage', [''])).stdout.split('\n')).toEqual(expect.arrayContaining(['plan', 'stage', 'version', ':4']));
  });

  // The executable answers these without the CLI (--version), from a code cache recorded after
  // running them, or with string-width's one-column answers (help): the words stay node's.
  it.each([
    [['--version']],
    [['--help']],
    [['help', 'plan']],
    [['stage', '--help']],
    [['completion', 'bash']],
    [['completion', 'fish']],
    [['--get-yargs-completions', 'prestage', 'pl']],
    [['--get-yargs-completions', 'prestage', 'plan', '--']],
    [['agent', '--help']],
    [['docs']],
  ])('answers %j as node bin/prestage.js does', async (args) => {
    const [built, node] = await Promise.all([run('prestage', args), runBin('prestage', args, { PATH: process.env.PATH, HOME: dir })]);
    expect(node.stdout).not.toBe('');
    expect([built.code, built.stdout, built.stderr]).toEqual([node.code, node.stdout, node.stderr]);
  });

  it('runs `agent` with its flags checked: a wrong one is one line naming it, exit 2, in the words of node bin/prestage.js', async () => {
    const args = ['agent', '--bogus-flag'];
    const [built, node] = await Promise.all([run('prestage', args), runBin('prestage', args, { PATH: process.env.PATH, HOME: dir })]);
    expect(built).toEqual({ code: 2, stdout: '', stderr: 'prestage: error: Unknown argument: bogus-flag; see prestage agent --help\n' });
    expect(built).toEqual(node);
  });

  it('plans the release from the real registry exactly as the TypeScript does', async () => {
    const args = ['plan', RELEASE, '--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host, '-o', 'json'];
    const [built, source] = await Promise.all([run('prestage', args), runCli(args)]);
    expect(built.stderr).toBe(source.stderr);
    expect(built.code).toBe(0);
    expect(JSON.parse(built.stdout)).toEqual(JSON.parse(source.stdout));
    const table = await run('prestage', args.slice(0, -2));
    expect(table.stdout).toBe((await runCli(args.slice(0, -2))).stdout);
  });

  /** The plan suite's CLI cases (test/plan.test.ts), each through the executable and the TypeScript. */
  const mirror = () => ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
  it.each([
    ['YAML for MCO v1', () => ['plan', RELEASE, ...mirror(), '-o', 'yaml']],
    ['YAML for MCO v1alpha1', () => ['plan', RELEASE, ...mirror(), '-o', 'yaml', '--api', 'mco-v1alpha1']],
    ['YAML for the agent', () => ['plan', RELEASE, ...mirror(), '-o', 'yaml', '--api', 'prestage']],
    ['one platform, wide', () => ['plan', RELEASE, ...mirror(), '--platform', 'aws', '-o', 'json']],
    ['a capability set and a profile', () => ['plan', RELEASE, ...mirror(), '--capability-set', 'None', '--profile', 'hypershift', '-o', 'json']],
    ['overrides', () => ['plan', RELEASE, ...mirror(), '--all-nodes', 'console', '--control-plane-only', 'cli', '-o', 'json']],
    ['refuses: not a reference', () => ['plan', 'quay.io/Bad//ref']],
    ['refuses: an unknown platform', () => ['plan', RELEASE, ...mirror(), '--platform', 'mars']],
    ['refuses: an OS stream the release lacks', () => ['plan', RELEASE, ...mirror(), '--os-stream', 'rhel-10']],
    ['refuses: an unknown tag', () => ['plan', 'quay.io/openshift-release-dev/ocp-release:9.9.9-x86_64', ...mirror()]],
    ['refuses: a bad --mirror', () => ['plan', RELEASE, '--mirror', 'nonsense']],
    ['refuses: a bad duration', () => ['wait', '--timeout', 'soon']],
  ] as Array<[string, () => string[]]>)('answers as the TypeScript does: %s', async (_label, args) => {
    const [built, source] = await Promise.all([run('prestage', args()), runCli(args())]);
    expect([built.code, built.stdout, built.stderr]).toEqual([source.code, source.stdout, source.stderr]);
    if (source.code !== 0) expect(built.stderr.trim().split('\n')).toHaveLength(1);
  });
});
