/**
 * The bundle's data safety, on real registries with the built CLI as a real process: push
 * tags the release so the docs' mirror example plans from the pushed mirror; parts on
 * read-only media (a read-only bind mount) unpack under --work-dir; create never deletes
 * another release's bundle without --force; a damaged blob of the right size is fetched
 * again by a rerun of create, as verify and push advise.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Plan } from '../src/plan/types.js';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';
import { expectOneLineError, treeHashes } from './support/bundle-files.js';
import { runBin } from './support/cli.js';
import { authFile, removeTempDirs } from './support/temp-files.js';

const run = promisify(execFile);
const truth = inject('fixtureTruth');
const storageDir = inject('fixtureStorageDir');
/** The release exactly as the docs' examples name it. */
const RELEASE = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;
const MULTI = `quay.io/${truth.releaseRepository}:${truth.multi.tag}`;

let source: RegistryHandle;
let sourceProxy: FaultProxy;
let mirror: RegistryHandle;
let work: string;
/** Flags that read the fixture through the proxy, with credentials. */
let from: string[];
let planFile: string;
/** The release's plan: what a bundle of it holds (not every component is planned). */
let planned: Plan;
/** Created once from the release by its tag. */
let bundle: string;
const mounts: string[] = [];
const handles: Array<{ stop(): Promise<void> }> = [];

const prestage = (args: readonly string[]) => runBin('prestage', args);

beforeAll(async () => {
  source = await startRegistry({ storageDir, auth: 'basic' });
  sourceProxy = await startFaultProxy({ upstream: source.url });
  mirror = await startRegistry();
  handles.push(source, sourceProxy, mirror);
  work = await mkdtemp(join(tmpdir(), 'prestage-bundle-safety-'));
  const registryConfig = await authFile(sourceProxy.host, source.username!, source.password!);
  from = ['--mirror', `quay.io=${sourceProxy.host}`, '--insecure-registry', sourceProxy.host, '--registry-config', registryConfig];
  planFile = join(work, 'plan.json');
  const plan = await prestage(['plan', RELEASE, ...from, '-o', 'json']);
  expect(plan.code).toBe(0);
  await writeFile(planFile, plan.stdout);
  planned = JSON.parse(plan.stdout) as Plan;
  bundle = join(work, 'ocp-4.16.3');
  const created = await prestage(['bundle', 'create', RELEASE, '--output-dir', bundle, ...from, '--allow-unsigned']);
  expect(created.code, created.stderr).toBe(0);
});

afterAll(async () => {
  for (const mountPoint of mounts.reverse()) await run('umount', [mountPoint]);
  for (const h of handles.reverse()) await h.stop();
  if (work) await rm(work, { recursive: true, force: true });
  removeTempDirs();
});



/**
 * `dir` seen through a read-only bind mount, as on a DVD or a write-protected disk. Tests run
 * as root, where file modes do not stop writes; a read-only mount does.
 */
async function readOnlyView(dir: string): Promise<string> {
  const mountPoint = `${dir}.ro`;
  await mkdir(mountPoint);
  await run('mount', ['--bind', '-o', 'ro', dir, mountPoint]);
  mounts.push(mountPoint);
  await expect(writeFile(join(mountPoint, 'probe'), 'x')).rejects.toMatchObject({ code: 'EROFS' });
  return mountPoint;
}

async function tagsOf(repository: string): Promise<string[]> {
  const res = await fetch(`${mirror.url}/v2/${repository}/tags/list`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { tags: string[] }).tags;
}

async function digestOfTag(repository: string, tag: string): Promise<string | null> {
  const res = await fetch(`${mirror.url}/v2/${repository}/manifests/${tag}`, {
    method: 'HEAD',
    headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.index.v1+json' },
  });
  return res.headers.get('docker-content-digest');
}

describe('bundle push tags the release', () => {
  it('lets the mirror example of the docs plan from the pushed mirror: quay.io/openshift-release-dev=MIRROR/ocp, release by tag', async () => {
    const target = `quay.io/openshift-release-dev=${mirror.host}/ocp`;
    const push = await prestage(['bundle', 'push', bundle, target, '--insecure-registry', mirror.host, '--output-dir', work]);
    expect(push.code, push.stderr).toBe(0);
    expect(push.stdout).toContain('tags 1 written, 0 present');
    expect(push.stdout).toContain(`release ${mirror.host}/ocp/ocp-release:${truth.release.tag}\n`);
    expect(await tagsOf('ocp/ocp-release')).toEqual([truth.release.tag]);
    expect(await digestOfTag('ocp/ocp-release', truth.release.tag)).toBe(truth.release.image.digest);
    // Components sit where the same rule reads them.
    const component = planned.images.find((i) => i.source === 'component')!;
    expect(await digestOfTag('ocp/ocp-v4.0-art-dev', component.digest)).toBe(component.digest);

    const viaMirror = await prestage(['plan', RELEASE, '--mirror', target, '--insecure-registry', mirror.host, '-o', 'json']);
    expect(viaMirror.code, viaMirror.stderr).toBe(0);
    expect(JSON.parse(viaMirror.stdout)).toEqual(JSON.parse(await readFile(planFile, 'utf8')) as Plan);
  });

  it('tags a bundle made from a plan file with the release\'s own <version>-<arch> tag under REGISTRY/PREFIX; a second push writes nothing', async () => {
    const fromPlan = join(work, 'from-plan');
    expect((await prestage(['bundle', 'create', planFile, '--output-dir', fromPlan, ...from, '--allow-unsigned'])).code).toBe(0);
    const target = `${mirror.host}/mirrored`;
    const first = await prestage(['bundle', 'push', fromPlan, target, '--insecure-registry', mirror.host, '--output-dir', work]);
    expect(first.code, first.stderr).toBe(0);
    const repository = `mirrored/${truth.releaseRepository}`;
    expect(await tagsOf(repository)).toEqual([`${truth.release.version}-x86_64`]);
    expect(await digestOfTag(repository, `${truth.release.version}-x86_64`)).toBe(truth.release.image.digest);
    const viaMirror = await prestage(['plan', RELEASE, '--mirror', `quay.io=${target}`, '--insecure-registry', mirror.host, '-o', 'json']);
    expect(viaMirror.code, viaMirror.stderr).toBe(0);
    expect((JSON.parse(viaMirror.stdout) as Plan).release.digest).toBe(truth.release.image.digest);

    const again = await prestage(['bundle', 'push', fromPlan, target, '--insecure-registry', mirror.host, '--output-dir', work]);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/blobs 0 uploaded \(0 B\), 0 mounted, \d+ present; manifests 0 pushed, \d+ present; tags 0 written, 1 present/);
  });

  it('refuses a SOURCE=MIRROR target that does not cover every image, before sending anything', async () => {
    const r = await prestage(['bundle', 'push', bundle, `quay.io/elsewhere=${mirror.host}/none`, '--insecure-registry', mirror.host, '--output-dir', work]);
    expectOneLineError(r, 2, /quay\.io\/openshift-release-dev\/\S+ is not under quay\.io\/elsewhere, so push target .* has no place for it; push to REGISTRY\[\/PREFIX\] instead/);
    const catalog = (await (await fetch(`${mirror.url}/v2/_catalog`)).json()) as { repositories: string[] };
    expect(catalog.repositories.filter((r) => r.startsWith('none/'))).toEqual([]);
  });
});

describe('bundle push from read-only media', () => {
  let parts: string;
  let readOnlyParts: string;
  beforeAll(async () => {
    const archived = join(work, 'archived');
    await cp(bundle, archived, { recursive: true });
    const r = await prestage(['bundle', 'create', RELEASE, '--output-dir', archived, ...from, '--max-archive-size', '8Mi', '--allow-unsigned']);
    expect(r.code, r.stderr).toBe(0);
    parts = `${archived}.parts`;
    readOnlyParts = await readOnlyView(parts);
  });

  it('without --work-dir: one line naming --work-dir, exit 2, nothing written', async () => {
    const before = await treeHashes(parts);
    const r = await prestage(['bundle', 'push', readOnlyParts, `${mirror.host}/from-dvd`, '--insecure-registry', mirror.host, '--output-dir', work]);
    expectOneLineError(r, 2, new RegExp(`cannot write the unpacked bundle into ${readOnlyParts}/archived: read-only file system \\(EROFS\\); pass --work-dir DIR, a writable directory with room for [\\d.]+ MiB, to unpack the parts there$`));
    expect(await treeHashes(parts)).toEqual(before);
  });

  it('with --work-dir: unpacks there, verified, and pushes', async () => {
    const workDir = join(work, 'unpack-here');
    const r = await prestage(['bundle', 'push', readOnlyParts, `${mirror.host}/from-dvd`, '--insecure-registry', mirror.host, '--output-dir', work, '--work-dir', workDir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`unpacking `);
    expect(await treeHashes(join(workDir, 'archived'))).toEqual(await treeHashes(bundle));
    expect(await tagsOf(`from-dvd/${truth.releaseRepository}`)).toEqual([truth.release.tag]);
  });

  it('pushes a read-only layout directory as is; a read-only --output-dir is refused before anything is sent', async () => {
    const readOnlyLayout = await readOnlyView(bundle);
    const r = await prestage(['bundle', 'push', readOnlyLayout, `${mirror.host}/from-ro`, '--insecure-registry', mirror.host, '--output-dir', work]);
    expect(r.code, r.stderr).toBe(0);
    const refused = await prestage(['bundle', 'push', readOnlyLayout, `${mirror.host}/never`, '--insecure-registry', mirror.host, '--output-dir', readOnlyLayout]);
    expectOneLineError(refused, 2, new RegExp(`--output-dir ${readOnlyLayout}: cannot write in ${readOnlyLayout}: read-only file system \\(EROFS\\); name a writable directory$`));
    const catalog = (await (await fetch(`${mirror.url}/v2/_catalog`)).json()) as { repositories: string[] };
    expect(catalog.repositories.filter((r) => r.startsWith('never/'))).toEqual([]);
  });
});

describe('bundle create keeps other bundles', () => {
  it('refuses to turn another release\'s bundle into this one without --force, leaving it intact', async () => {
    const before = await treeHashes(bundle);
    const r = await prestage(['bundle', 'create', MULTI, '--arch', 'arm64', '--output-dir', bundle, ...from, '--allow-unsigned']);
    expectOneLineError(r, 2, new RegExp(`^prestage: error: ${bundle} holds the bundle of release ${truth.release.version} amd64 \\(quay\\.io/${truth.releaseRepository}@${truth.release.image.digest}\\); creating release ${truth.release.version} arm64 \\(quay\\.io/\\S+\\) there would delete it: choose another --output-dir, or pass --force to replace it$`));
    expect(await treeHashes(bundle)).toEqual(before);
  });

  it('refuses an OCI layout prestage did not write', async () => {
    const layout = join(work, 'someone-elses');
    await mkdir(join(layout, 'blobs', 'sha256'), { recursive: true });
    await writeFile(join(layout, 'blobs', 'sha256', 'a'.repeat(64)), 'theirs');
    await writeFile(join(layout, 'index.json'), '{"schemaVersion":2,"manifests":[]}');
    const r = await prestage(['bundle', 'create', planFile, '--output-dir', layout, ...from, '--allow-unsigned']);
    expectOneLineError(r, 2, /someone-elses holds an OCI layout that is not a prestage bundle; .* pass --force to replace it$/);
    expect(await readFile(join(layout, 'blobs', 'sha256', 'a'.repeat(64)), 'utf8')).toBe('theirs');
  });
});

describe('bundle create repairs what it kept', () => {
  it('fetches again a layer and a manifest damaged at the same size, as verify and push advise', async () => {
    const dir = join(work, 'damaged');
    await cp(bundle, dir, { recursive: true });
    const layer = planned.images.flatMap((i) => i.layers).reduce((a, b) => (b.compressedBytes > a.compressedBytes ? b : a));
    const manifest = planned.images.filter((i) => i.source === 'component')[3]!;
    for (const digest of [layer.digest, manifest.digest]) {
      const file = join(dir, 'blobs', 'sha256', digest.slice('sha256:'.length));
      const bytes = await readFile(file);
      bytes[bytes.length >> 1] = bytes[bytes.length >> 1]! ^ 0x01;
      await writeFile(file, bytes);
      expect((await stat(file)).size).toBe(bytes.length);
    }

    const verify = await prestage(['bundle', 'verify', dir]);
    expectOneLineError(verify, 2, /0 missing and 2 corrupt blobs .*copy it again from the connected side, where `prestage bundle create` with the same arguments fetches only these$/);
    const push = await prestage(['bundle', 'push', dir, `${mirror.host}/damaged`, '--insecure-registry', mirror.host, '--output-dir', work]);
    expectOneLineError(push, 2, /is corrupt.*`prestage bundle verify` lists every damaged blob: copy it again from the connected side/);

    sourceProxy.resetStats();
    const rerun = await prestage(['bundle', 'create', RELEASE, '--output-dir', dir, ...from, '--allow-unsigned']);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stdout).toMatch(/fetched [\d.]+ (KiB|MiB) in 1 blob \(2 damaged, fetched again\)/);
    const blobReads = sourceProxy.stats.log.filter((r) => r.method === 'GET' && r.target.includes('/blobs/') && r.range === undefined).map((r) => r.target.split('/blobs/')[1]);
    // The release's payload layer and config are read to plan; of the bundle's blobs only the damaged layer.
    const readToPlan = [truth.release.manifestsLayer.digest, truth.release.image.config.digest];
    expect(blobReads.filter((d) => !readToPlan.includes(d!))).toEqual([layer.digest]);
    expect(await treeHashes(dir)).toEqual(await treeHashes(bundle));
    expect((await prestage(['bundle', 'verify', dir])).code).toBe(0);
    expect((await prestage(['bundle', 'push', dir, `${mirror.host}/damaged`, '--insecure-registry', mirror.host, '--output-dir', work])).code).toBe(0);
  });
});

describe('bundle help', () => {
  it('shows examples and the exit codes for each bundle command', async () => {
    for (const [command, flag] of [['create', '--since'], ['verify', '.parts'], ['push', '--work-dir']] as const) {
      const help = await prestage(['bundle', command, '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(new RegExp(`Examples:\\n  # .+\\n  prestage bundle ${command} `));
      expect(help.stdout.split('\n').every((line) => line.length <= 100)).toBe(true);
      expect(help.stdout).toMatch(new RegExp(`\\n  prestage bundle ${command} .*${flag.replace('.', '\\.')}`));
      expect(help.stdout).toContain('Exit codes:\n  0    ok');
      expect(help.stdout).toContain('  70   internal error');
    }
  });
});
