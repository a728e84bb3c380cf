/**
 * A bundle tampered with on its way across the air gap, pushed by the built CLI as a real
 * process into a real registry behind a counting proxy. A real bundle (and its tar parts) of
 * the fixture release is made once; each case alters a copy of it. Every case: exit 2 (bad
 * input), one line on stderr naming the problem, a victim directory beside the bundle
 * byte-for-byte as it was, and nothing the refused name or file would have sent reaching the
 * registry.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { cp, lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';
import { expectOneLineError, treeHashes } from './support/bundle-files.js';
import { BIN_DIR, runBin, type CliResult } from './support/cli.js';

const run = promisify(execFile);
const truth = inject('fixtureTruth');
const storageDir = inject('fixtureStorageDir');
const RELEASE = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;
const LAYOUT = 'ocp-4.16.3';
const MiB = 1024 * 1024;
/** The size of the attacker's oversize files: the report. */
const OVERSIZE = 600 * MiB;

let source: RegistryHandle;
let mirror: RegistryHandle;
let mirrorProxy: FaultProxy;
let work: string;
let bundle: string;
let parts: string;
let caseNo = 0;
/** This case's directory: the tampered copy and, beside it, the victim. */
let caseDir: string;
let victim: string;
let victimBefore: Map<string, string>;
const handles: Array<{ stop(): Promise<void> }> = [];

/** A prefix of its own per case: a blob an earlier case pushed is not "present" for this one. */
const target = (): string => `${mirrorProxy.host}/case-${caseNo}`;

const push = (what: string, extra: readonly string[] = []): Promise<CliResult> =>
  runBin('prestage', ['bundle', 'push', what, target(), '--insecure-registry', mirrorProxy.host, '--output-dir', caseDir, ...extra]);

beforeAll(async () => {
  source = await startRegistry({ storageDir });
  mirror = await startRegistry();
  mirrorProxy = await startFaultProxy({ upstream: mirror.url });
  handles.push(source, mirror, mirrorProxy);
  work = await mkdtemp(join(tmpdir(), 'prestage-bundle-tampered-'));
  bundle = join(work, LAYOUT);
  const created = await runBin('prestage', ['bundle', 'create', RELEASE, '--output-dir', bundle, '--mirror', `quay.io=${source.host}`, '--insecure-registry', source.host, '--max-archive-size', '8Mi', '--allow-unsigned']);
  expect(created.code, created.stderr).toBe(0);
  parts = `${bundle}.parts`;
});

afterAll(async () => {
  for (const h of handles.reverse()) await h.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

beforeEach(async () => {
  caseDir = join(work, `case-${++caseNo}`);
  victim = join(caseDir, 'victim');
  await mkdir(join(victim, '.partial'), { recursive: true });
  await writeFile(join(victim, 'index.json'), '{"theirs":true}\n');
  await writeFile(join(victim, '.partial', 'upload'), 'half of their upload');
  victimBefore = await treeHashes(victim);
  mirrorProxy.resetStats();
});

/** The victim as it was, its `.partial` still there; with `quiet`, not one request reached the registry. */
async function expectUntouched(opts: { quiet: boolean }): Promise<void> {
  expect(await treeHashes(victim)).toEqual(victimBefore);
  expect((await lstat(join(victim, '.partial'))).isDirectory()).toBe(true);
  if (opts.quiet) expect(mirrorProxy.stats.log.map((r) => `${r.method} ${r.target}`)).toEqual([]);
  const catalog = (await (await fetch(`${mirror.url}/v2/_catalog`)).json()) as { repositories: string[] };
  expect(catalog.repositories.filter((r) => !/^case-\d+\//.test(r))).toEqual([]);
  if (opts.quiet) expect(catalog.repositories.filter((r) => r.startsWith(`case-${caseNo}/`))).toEqual([]);
}

async function copyOf(dir: string): Promise<string> {
  const copy = join(caseDir, relative(work, dir));
  await cp(dir, copy, { recursive: true });
  return copy;
}

/** Edits a bundle's JSON file; T names the fields the edit touches. */
async function editJson<T>(file: string, edit: (doc: T) => void): Promise<void> {
  const doc = JSON.parse(await readFile(file, 'utf8')) as T;
  edit(doc);
  await writeFile(file, JSON.stringify(doc));
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

/** A ustar header as tar(1) writes one: a crafted entry needs no content behind its header. */
function tarHeader(name: string, size: number): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, 'utf8');
  h.write('0000644\0', 100);
  h.write('0000000\0', 108);
  h.write('0000000\0', 116);
  h.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
  h.write('00000000000\0', 136);
  h.write('        ', 148);
  h.write('0', 156);
  h.write('ustar\0', 257);
  h.write('00', 263);
  const sum = h.reduce((a, b) => a + b, 0);
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  return h;
}

function tarEntry(name: string, body: Buffer): Buffer {
  return Buffer.concat([tarHeader(name, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512)]);
}

/**
 * Parts of one crafted tar: `head` written, then `zeros` bytes of zeros and the end blocks as
 * a sparse tail (600 MiB costs no disk), listed in a parts.json whose sizes and sha256 match.
 */
async function craftedParts(head: Buffer, zeros = 0): Promise<string> {
  const dir = join(caseDir, `${LAYOUT}.parts`);
  await mkdir(dir, { recursive: true });
  const part = join(dir, `${LAYOUT}.tar.000`);
  await writeFile(part, head);
  const size = head.length + zeros + 1024;
  await truncate(part, size);
  const index = JSON.parse(await readFile(join(parts, 'parts.json'), 'utf8'));
  await writeFile(join(dir, 'parts.json'), JSON.stringify({ ...index, bytes: size, parts: [{ name: `${LAYOUT}.tar.000`, size, sha256: await sha256File(part) }] }));
  return dir;
}

/** The built CLI with a 96 MiB V8 heap, under GNU time for its peak RSS. */
async function pushMeasured(what: string, extra: readonly string[]): Promise<CliResult & { maxRssBytes: number }> {
  const env = { ...process.env, NODE_OPTIONS: '--max-old-space-size=96' };
  const args = ['-f', 'maxrss-kb %M', process.execPath, `${BIN_DIR}prestage.js`, 'bundle', 'push', what, target(), '--insecure-registry', mirrorProxy.host, '--output-dir', caseDir, ...extra];
  const r = await new Promise<CliResult>((resolve) => {
    execFile('/usr/bin/time', args, { env, maxBuffer: 64 * MiB }, (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }));
  });
  const rss = /maxrss-kb (\d+)\n?$/.exec(r.stderr);
  expect(rss, r.stderr).not.toBeNull();
  return { ...r, stderr: r.stderr.slice(0, rss!.index).replace(/Command exited with non-zero status \d+\n$/, ''), maxRssBytes: Number(rss![1]) * 1024 };
}

/** The largest blob of the bundle: a layer, not yet in the mirror when its case runs. */
async function largestBlob(dir: string): Promise<{ hex: string; size: number }> {
  const blobs = join(dir, 'blobs', 'sha256');
  const sized = await Promise.all((await readdir(blobs)).map(async (hex) => ({ hex, size: (await lstat(join(blobs, hex))).size })));
  return sized.reduce((a, b) => (b.size > a.size ? b : a));
}

describe('a tampered parts.json', () => {
  it('layout "../victim": refused before anything is unpacked, the victim beside the parts untouched', async () => {
    const copy = await copyOf(parts);
    await editJson<{ layout: string }>(join(copy, 'parts.json'), (doc) => (doc.layout = '../victim'));
    const r = await push(copy);
    expectOneLineError(r, 2, /parts\.json: layout "\.\.\/victim" is not a plain directory name; the parts file was altered/);
    await expectUntouched({ quiet: true });
  });

  it('layout "../../../victim" with --work-dir: refused, nothing written under the work dir either', async () => {
    const copy = await copyOf(parts);
    await editJson<{ layout: string }>(join(copy, 'parts.json'), (doc) => (doc.layout = '../../../victim'));
    const workDir = join(caseDir, 'work', 'a', 'b');
    await mkdir(workDir, { recursive: true });
    const r = await push(copy, ['--work-dir', workDir]);
    expectOneLineError(r, 2, /layout "\.\.\/\.\.\/\.\.\/victim" is not a plain directory name/);
    expect(await readdir(workDir)).toEqual([]);
    await expectUntouched({ quiet: true });
  });

  it.each(['..', '../x', '/etc/passwd'])('a part named %j: refused naming it', async (name) => {
    const copy = await copyOf(parts);
    await editJson<{ parts: Array<{ name: string }> }>(join(copy, 'parts.json'), (doc) => (doc.parts[0]!.name = name));
    const r = await push(copy);
    expectOneLineError(r, 2, new RegExp(`part 0 is named ${JSON.stringify(name).replace(/[./]/g, '\\$&')}, not "${LAYOUT}\\.tar\\.000"`));
    await expectUntouched({ quiet: true });
  });

  it('the layout directory beside the parts is a link to the victim: refused, not followed', async () => {
    const copy = await copyOf(parts);
    await symlink(victim, join(caseDir, `${LAYOUT}.parts`, LAYOUT));
    const r = await push(copy);
    expectOneLineError(r, 2, new RegExp(`cannot unpack the bundle into ${copy}/${LAYOUT}: it is a symbolic link, not a directory`));
    await expectUntouched({ quiet: true });
  });
});

describe('a tampered tar part', () => {
  it.each(['..', '../x', '/tmp/x'])('an entry named %j: refused naming it, nothing written outside', async (name) => {
    const oci = await readFile(join(bundle, 'oci-layout'));
    const dir = await craftedParts(Buffer.concat([tarEntry('oci-layout', oci), tarEntry(name, Buffer.from('owned\n'))]));
    const r = await push(dir, ['--work-dir', join(caseDir, 'work')]);
    expectOneLineError(r, 2, new RegExp(`holds an unexpected entry ${JSON.stringify(name).replace(/[./]/g, '\\$&')}; it was not written by prestage`));
    expect((await readdir(caseDir)).sort()).toEqual([`${LAYOUT}.parts`, 'victim', 'work'].sort());
    expect((await readdir(join(caseDir, 'work', LAYOUT))).sort()).toEqual(['.partial', 'blobs']);
    await expectUntouched({ quiet: true });
  });

  it('an index.json of 600 MiB: refused from its header, in bounded memory', async () => {
    const oci = await readFile(join(bundle, 'oci-layout'));
    const dir = await craftedParts(Buffer.concat([tarEntry('oci-layout', oci), tarHeader('index.json', OVERSIZE)]), OVERSIZE);
    const r = await pushMeasured(dir, ['--work-dir', join(caseDir, 'work')]);
    expectOneLineError(r, 2, new RegExp(`index\\.json in bundle archive ${dir}/parts\\.json is 600\\.0 MiB, over the 8\\.0 MiB bound for a bundle's index\\.json`));
    // A whole push of this fixture peaks at 105-125 MiB RSS (measured); one that read the entry would need 600 MiB more.
    expect(r.maxRssBytes).toBeLessThan(256 * MiB);
    await expectUntouched({ quiet: true });
  });
});

describe('a tampered bundle directory', () => {
  it('a prestage-bundle.json of 600 MiB: refused before it is read', async () => {
    const copy = await copyOf(bundle);
    await truncate(join(copy, 'prestage-bundle.json'), OVERSIZE);
    const r = await pushMeasured(copy, []);
    expectOneLineError(r, 2, /prestage-bundle\.json is 600\.0 MiB, over the 16\.0 MiB bound for a bundle's prestage-bundle\.json/);
    expect(r.maxRssBytes).toBeLessThan(256 * MiB);
    await expectUntouched({ quiet: true });
  });

  it('a release tag "../../../../tenant-b/…": refused before any request, no other repository tagged', async () => {
    const copy = await copyOf(bundle);
    await editJson<{ release: { tags: string[] } }>(join(copy, 'prestage-bundle.json'), (doc) => (doc.release.tags = ['../../../../tenant-b/ocp-release/manifests/4.16.3']));
    const r = await push(copy);
    expectOneLineError(r, 2, /prestage-bundle\.json names release tag "\.\.\/\.\.\/\.\.\/\.\.\/tenant-b\/ocp-release\/manifests\/4\.16\.3", which is not a tag/);
    await expectUntouched({ quiet: true });
  });

  it('an image ref name with "/../": refused before any request', async () => {
    const copy = await copyOf(bundle);
    await editJson<{ manifests: Array<{ annotations: Record<string, string> }> }>(join(copy, 'index.json'), (doc) => {
      const name = doc.manifests[0]!.annotations['org.opencontainers.image.ref.name']!;
      doc.manifests[0]!.annotations['org.opencontainers.image.ref.name'] = name.replace(/^quay\.io\//, 'quay.io/openshift-release-dev/../../tenant-b/');
    });
    const r = await push(copy);
    expectOneLineError(r, 2, /index\.json names image "quay\.io\/openshift-release-dev\/\.\.\/\.\.\/tenant-b\/.*", which is not a valid image reference/);
    await expectUntouched({ quiet: true });
  });

  it('a blob replaced by a symlink to a secret file: refused, not one byte of the secret reaches the registry', async () => {
    const copy = await copyOf(bundle);
    const blob = await largestBlob(copy);
    const secret = join(caseDir, 'secret');
    const marker = 'PRESTAGE-TAMPER-SECRET-';
    await writeFile(secret, marker.repeat(Math.ceil((blob.size + 4096) / marker.length)));
    const file = join(copy, 'blobs', 'sha256', blob.hex);
    await rm(file);
    await symlink(secret, file);
    const r = await push(copy);
    expectOneLineError(r, 2, new RegExp(`the bundle's blob sha256:${blob.hex} \\(${file}\\) is a symbolic link, not a file`));
    // No upload of that blob began, and the registry holds none of the secret's bytes.
    expect(mirrorProxy.stats.log.filter((q) => q.method !== 'HEAD' && q.target.includes(blob.hex))).toEqual([]);
    const stored = await readdir(mirror.storageDir, { recursive: true, withFileTypes: true });
    for (const entry of stored.filter((e) => e.isFile())) expect((await readFile(join(entry.parentPath, entry.name))).includes(marker), entry.name).toBe(false);
    await expectUntouched({ quiet: false });
  });

  it.each(['fifo', 'directory'] as const)('a blob replaced by a %s: refused naming it, no wait', async (kind) => {
    const copy = await copyOf(bundle);
    const blob = await largestBlob(copy);
    const file = join(copy, 'blobs', 'sha256', blob.hex);
    await rm(file);
    if (kind === 'fifo') await run('mkfifo', [file]);
    else await mkdir(file);
    const r = await push(copy);
    expectOneLineError(r, 2, new RegExp(`the bundle's blob sha256:${blob.hex} \\(${file}\\) is a ${kind === 'fifo' ? 'FIFO' : 'directory'}, not a file`));
    expect(mirrorProxy.stats.log.filter((q) => q.method !== 'HEAD' && q.target.includes(blob.hex))).toEqual([]);
    await expectUntouched({ quiet: false });
  });
});

describe('bundle verify of a tampered bundle', () => {
  it('counts a blob replaced by a link (even to its own bytes) or a FIFO as corrupt: not followed, not waited on', async () => {
    const copy = await copyOf(bundle);
    const blobs = join(copy, 'blobs', 'sha256');
    const [linked, fifo] = (await readdir(blobs)).sort().slice(0, 2) as [string, string];
    const elsewhere = join(caseDir, 'same-bytes');
    await cp(join(blobs, linked), elsewhere);
    await rm(join(blobs, linked));
    await symlink(elsewhere, join(blobs, linked));
    await rm(join(blobs, fifo));
    await run('mkfifo', [join(blobs, fifo)]);
    const r = await runBin('prestage', ['bundle', 'verify', copy]);
    expectOneLineError(r, 2, new RegExp(`^prestage: error: bundle ${copy} is damaged: 0 missing and 2 corrupt blobs`));
    for (const hex of [linked, fifo]) expect(r.stdout).toMatch(new RegExp(`^corrupt \\w+ sha256:${hex}`, 'm'));
    await expectUntouched({ quiet: true });
  });

  it('refuses parts whose parts.json names a layout "../victim", reading no part', async () => {
    const copy = await copyOf(parts);
    await editJson<{ layout: string }>(join(copy, 'parts.json'), (doc) => (doc.layout = '../victim'));
    const r = await runBin('prestage', ['bundle', 'verify', copy]);
    expectOneLineError(r, 2, /parts\.json: layout "\.\.\/victim" is not a plain directory name/);
    await expectUntouched({ quiet: true });
  });
});

