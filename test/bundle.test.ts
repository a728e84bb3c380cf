/**
 * Air-gapped bundles end to end on real registries: the fixture release behind a Basic-auth
 * docker-registry and a fault proxy (the connected side), a fresh anonymous docker-registry
 * behind another proxy (the site's mirror). Create, resume after failures and SIGKILL,
 * verify, push, plan through the mirror, tar parts, and incremental bundles.
 */
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createBundle } from '../src/bundle/create.js';
import type { BundleMetadata } from '../src/bundle/layout.js';
import type { GatheredSignatures } from '../src/signatures/gather.js';
import { readPlanFile } from '../src/bundle/inputs.js';
import type { Plan } from '../src/plan/types.js';
import { RegistryClient } from '../src/registry/client.js';
import { parsePullSecretFile } from '../src/registry/credentials.js';
import { parseMirrorRule } from '../src/registry/mirrors.js';
import { DEFAULT_RETRY } from '../src/registry/retry.js';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';
import { bytesUnder, expectOneLineError, treeHashes } from './support/bundle-files.js';
import { BIN_DIR, runCli, type CliResult } from './support/cli.js';
import { generateGpgKey, removeGpgKey, signRelease, startSignatureStore, type GpgKey, type SignatureStore } from './support/release-signing.js';
import { authFile, removeTempDirs } from './support/temp-files.js';

const truth = inject('fixtureTruth');
const storageDir = inject('fixtureStorageDir');
const RELEASE = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;
const RELEASE_BY_DIGEST = `quay.io/${truth.releaseRepository}@${truth.release.image.digest}`;

let source: RegistryHandle;
let sourceProxy: FaultProxy;
let mirror: RegistryHandle;
let mirrorProxy: FaultProxy;
let work: string;
let registryConfig: string;
/** Flags that read the fixture through the proxy, with credentials. */
let from: string[];
/** Where the release signature comes from, and the key that verifies it. */
let signing: string[];
let signer: GpgKey;
let store: SignatureStore;
/** The reference bundle: created once, cleanly, from the release. */
let reference: string;
let referenceRun: CliResult;
let referenceBlobReads: Array<{ target: string; range: string | undefined }>;
let planFile: string;
/** What the release's plan names: the bundle's content (not every component is planned). */
let planned: Plan;
let IMAGES: number;

const handles: Array<{ stop(): Promise<void> }> = [];

beforeAll(async () => {
  source = await startRegistry({ storageDir, auth: 'basic' });
  sourceProxy = await startFaultProxy({ upstream: source.url });
  mirror = await startRegistry();
  mirrorProxy = await startFaultProxy({ upstream: mirror.url });
  handles.push(source, sourceProxy, mirror, mirrorProxy);
  work = await mkdtemp(join(tmpdir(), 'prestage-bundle-'));
  registryConfig = await authFile(sourceProxy.host, source.username!, source.password!);
  from = ['--mirror', `quay.io=${sourceProxy.host}`, '--insecure-registry', sourceProxy.host, '--registry-config', registryConfig];
  // The release's GPG signature from a signature store, as every real release has one.
  signer = await generateGpgKey('Release Signer');
  const signed = [truth.release.image.digest, truth.multi.listDigest];
  store = await startSignatureStore({ release: Object.fromEntries(await Promise.all(signed.map(async (digest) => [digest, [await signRelease(signer, digest, RELEASE)]] as const))) });
  handles.push(store);
  signing = ['--signature-store', store.url('release'), '--verification-key', signer.publicKeyFile];

  reference = join(work, 'reference');
  sourceProxy.resetStats();
  // --progress: a line per image though stderr is not a terminal.
  referenceRun = await runCli(['bundle', 'create', RELEASE, '--output-dir', reference, ...from, ...signing, '--progress']);
  referenceBlobReads = sourceProxy.stats.log.filter((r) => r.method === 'GET' && r.target.includes('/blobs/')).map((r) => ({ target: r.target, range: r.range }));

  planFile = join(work, 'plan.json');
  const plan = await runCli(['plan', RELEASE, ...from, '-o', 'json']);
  expect(plan.code).toBe(0);
  await writeFile(planFile, plan.stdout);
  planned = JSON.parse(plan.stdout) as Plan;
  IMAGES = bundledImages().length;
});

afterAll(async () => {
  await removeGpgKey(signer);
  for (const h of handles.reverse()) await h.stop();
  if (work) await rm(work, { recursive: true, force: true });
  removeTempDirs();
});



/**
 * Every image a bundle of the release carries: the planned ones, and those the plan puts in no
 * set (the mirror serves the whole release), whose contents the fixture's truth gives.
 */
function bundledImages(): Array<{ pullSpec: string; digest: string; config: { digest: string; size: number }; layers: Array<{ digest: string; size: number }> }> {
  const truthOf = new Map(truth.components.map((c) => [c.digest, c]));
  return [
    ...planned.images.map((i) => ({ pullSpec: i.pullSpec, digest: i.digest, config: i.config, layers: i.layers.map((l) => ({ digest: l.digest, size: l.compressedBytes })) })),
    ...planned.skipped.map((i) => ({ pullSpec: i.pullSpec, digest: i.digest, config: truthOf.get(i.digest)!.config, layers: truthOf.get(i.digest)!.layers.map((l) => ({ digest: l.digest, size: l.size })) })),
  ];
}

/** The release signatures the reference bundle carries, as `bundle create` hands them to createBundle. */
async function referenceSignatures(): Promise<GatheredSignatures> {
  const record = (JSON.parse(await readFile(join(reference, 'prestage-bundle.json'), 'utf8')) as BundleMetadata).signatures!.release!;
  const blob = (digest: string) => readFile(join(reference, 'blobs', 'sha256', digest.slice(7)));
  return {
    digest: record.digest,
    signatures: await Promise.all(record.signatures.map((s) => blob(s.digest))),
    keysText: (await blob(record.keys!.digest)).toString('utf8'),
    verifiedWith: record.verifiedWith,
    from: record.from,
  };
}

/** The blobs of the release's GPG signature and its verification keys in a bundle. */
async function signatureBlobs(dir: string): Promise<string[]> {
  const record = (JSON.parse(await readFile(join(dir, 'prestage-bundle.json'), 'utf8')) as BundleMetadata).signatures!.release!;
  return [...record.signatures, record.keys!].map((b) => b.digest);
}

/** What the bundled images consist of: manifests, configs and layers by digest. */
function releaseBlobs(): { manifests: Set<string>; blobs: Map<string, number> } {
  const blobs = new Map<string, number>();
  const images = bundledImages();
  for (const image of images) {
    blobs.set(image.config.digest, image.config.size);
    for (const l of image.layers) blobs.set(l.digest, l.size);
  }
  return { manifests: new Set(images.map((i) => i.digest)), blobs };
}

const largestLayer = () => bundledImages().flatMap((i) => i.layers).reduce((a, b) => (b.size > a.size ? b : a));
const plannedComponents = () => planned.images.filter((i) => i.source === 'component');
const blobHex = (digest: string) => digest.slice('sha256:'.length);

describe('bundle create from a release', () => {
  it('writes an OCI layout naming every image of the release by its source pullspec, those in no set too', async () => {
    expect(referenceRun.code).toBe(0);
    expect(referenceRun.stdout).toMatch(new RegExp(`^bundle ${reference}: ${IMAGES} images, \\d+ blobs, [\\d.]+ MiB; fetched`));
    expect(JSON.parse(await readFile(join(reference, 'oci-layout'), 'utf8'))).toEqual({ imageLayoutVersion: '1.0.0' });
    const index = JSON.parse(await readFile(join(reference, 'index.json'), 'utf8')) as { manifests: Array<{ digest: string; annotations: Record<string, string> }> };
    const names = index.manifests.map((m) => m.annotations['org.opencontainers.image.ref.name']);
    expect(names[0]).toBe(RELEASE_BY_DIGEST);
    expect(planned.skipped.length).toBeGreaterThan(0);
    expect(new Set(names)).toEqual(new Set(bundledImages().map((i) => i.pullSpec)));
    expect(names).toHaveLength(IMAGES);
    for (const m of index.manifests) expect(m.annotations['org.opencontainers.image.ref.name']).toMatch(new RegExp(`@${m.digest}$`));
    await expect(stat(join(reference, '.partial'))).rejects.toThrow(/ENOENT/);
  });

  it('holds each manifest, config and layer exactly once, every file hashing to its name', async () => {
    const { manifests, blobs } = releaseBlobs();
    const files = await treeHashes(join(reference, 'blobs', 'sha256'));
    expect(new Set(files.keys())).toEqual(new Set([...manifests, ...blobs.keys(), ...(await signatureBlobs(reference))].map(blobHex)));
    for (const [name, hash] of files) expect(hash, name).toBe(name);
  });

  it('reads each blob from the registry once (only the release\'s payload layer and config twice: once to plan, once to bundle)', () => {
    const full = referenceBlobReads.filter((r) => r.range === undefined);
    const reads = new Map<string, number>();
    for (const r of full) reads.set(r.target, (reads.get(r.target) ?? 0) + 1);
    const readToPlan = [truth.release.manifestsLayer.digest, truth.release.image.config.digest];
    for (const digest of readToPlan) {
      const target = `/v2/${truth.releaseRepository}/blobs/${digest}`;
      expect(reads.get(target), digest).toBe(2);
      reads.delete(target);
    }
    expect([...reads.values()].every((n) => n === 1)).toBe(true);
    expect(new Set([...reads.keys()].map((t) => t.split('/blobs/')[1]))).toEqual(new Set([...releaseBlobs().blobs.keys()].filter((d) => !readToPlan.includes(d))));
  });

  it('reports a line per completed image off a terminal with --progress, and never writes credentials', async () => {
    const lines = referenceRun.stderr.trim().split('\n');
    expect(lines).toHaveLength(IMAGES);
    expect(lines.at(-1)).toMatch(new RegExp(`^bundled ${IMAGES}/${IMAGES} quay\\.io/\\S+@sha256:[a-f0-9]{64} \\([\\d.]+ (KiB|MiB)\\)$`));
    const written = (await Promise.all(['index.json', 'prestage-bundle.json', 'oci-layout'].map((f) => readFile(join(reference, f), 'utf8')))).join('');
    for (const text of [written, referenceRun.stdout, referenceRun.stderr]) {
      expect(text).not.toContain(source.password!);
      expect(text).not.toContain(Buffer.from(`${source.username}:${source.password}`).toString('base64'));
    }
  });

  it('keeps the list and only the planned platform of a multi-arch release; a rerun for other content leaves only that', async () => {
    const dir = join(work, 'multi');
    const r = await runCli(['bundle', 'create', `quay.io/${truth.releaseRepository}:${truth.multi.tag}`, '--arch', 'arm64', '--output-dir', dir, ...from, ...signing]);
    expect(r.code).toBe(0);
    const index = JSON.parse(await readFile(join(dir, 'index.json'), 'utf8')) as { manifests: Array<{ digest: string }> };
    expect(index.manifests[0]!.digest).toBe(truth.multi.listDigest);
    const files = new Set(await readdir(join(dir, 'blobs', 'sha256')));
    const bundled = truth.multi.components.filter((c) => index.manifests.some((m) => m.digest === c.listDigest));
    expect(bundled.length).toBeGreaterThan(0);
    for (const c of bundled) {
      expect(files.has(blobHex(c.listDigest)), c.name).toBe(true);
      expect(files.has(blobHex(c.perArch.arm64.digest)), c.name).toBe(true);
      expect(files.has(blobHex(c.perArch.amd64.digest)), c.name).toBe(false);
    }
    expect((await runCli(['bundle', 'verify', dir])).code).toBe(0);
    // distribution refuses a list whose other platforms it lacks: say how to carry them.
    const push = await runCli(['bundle', 'push', dir, `${mirrorProxy.host}/multi`, '--insecure-registry', mirrorProxy.host, '--output-dir', dir]);
    expectOneLineError(push, 3, /refuses manifest list sha256:[a-f0-9]{64} without all of its platforms; create the bundle with --all-platforms/);
    // Reusing the directory for another release takes --force, and leaves exactly that content.
    expect((await runCli(['bundle', 'create', planFile, '--output-dir', dir, ...from, ...signing, '--force'])).code).toBe(0);
    expect(await treeHashes(dir)).toEqual(await treeHashes(reference));
  });
});

describe('bundle create resumes', () => {
  it('continues a blob broken mid-transfer with a Range request, ending byte-identical', async () => {
    const dir = join(work, 'broken');
    const layer = largestLayer();
    sourceProxy.inject({ match: new RegExp(`/blobs/${layer.digest}$`), times: Infinity, fault: { kind: 'reset', afterBytes: 600_000 } });
    const failed = await runCli(['bundle', 'create', planFile, '--output-dir', dir, ...from, ...signing, '--retries', '0']);
    sourceProxy.clearFaults();
    expectOneLineError(failed, 3, new RegExp(`${layer.digest}: blob transfer kept failing .* after 1 attempt\\b`));
    const partial = await stat(join(dir, '.partial', blobHex(layer.digest)));
    expect(partial.size).toBeGreaterThan(0);
    expect(partial.size).toBeLessThanOrEqual(600_000);
    await expect(stat(join(dir, 'index.json'))).rejects.toThrow(/ENOENT/);

    sourceProxy.resetStats();
    const rerun = await runCli(['bundle', 'create', planFile, '--output-dir', dir, ...from, ...signing]);
    expect(rerun.code).toBe(0);
    expect(rerun.stdout).toMatch(/\(\d+ resumed\)/);
    // Off a terminal without --progress: the summary only, no line per image.
    expect(rerun.stderr).not.toMatch(/^bundled /m);
    expect(rerun.stderr.trim().split('\n').length).toBeLessThanOrEqual(1);
    const reads = sourceProxy.stats.log.filter((r) => r.target.endsWith(layer.digest));
    expect(reads.map((r) => r.range)).toEqual([`bytes=${partial.size}-`]);
    expect(await treeHashes(dir)).toEqual(await treeHashes(reference));
  });

  it('recovers from SIGKILL mid-run without fetching again what it had, ending byte-identical', async () => {
    const dir = join(work, 'killed');
    sourceProxy.setBandwidth(4 * 1024 * 1024);
    sourceProxy.resetStats();
    const child = spawn(process.execPath, [`${BIN_DIR}prestage.js`, 'bundle', 'create', planFile, '--output-dir', dir, ...from, ...signing], { stdio: 'ignore' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    while (sourceProxy.stats.bytesSent < 6 * 1024 * 1024 && child.exitCode === null) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGKILL');
    await exited;
    sourceProxy.setBandwidth(null);
    expect(sourceProxy.stats.bytesSent).toBeGreaterThan(5 * 1024 * 1024);
    // What the killed run had written to disk (whole and partial blobs): bytes the proxy sent but
    // the process never wrote (socket buffers at the kill) are rightly fetched again.
    const kept = await bytesUnder(dir);
    expect(kept).toBeGreaterThan(4 * 1024 * 1024);

    sourceProxy.resetStats();
    const rerun = await runCli(['bundle', 'create', planFile, '--output-dir', dir, ...from, ...signing]);
    expect(rerun.code).toBe(0);
    const total = [...releaseBlobs().blobs.values()].reduce((a, b) => a + b, 0);
    // Manifests are fetched again to learn the content; blob bytes only for what was missing.
    expect(sourceProxy.stats.bytesSent).toBeLessThan(total - kept + 1024 * 1024);
    expect(await treeHashes(dir)).toEqual(await treeHashes(reference));
  });
});

describe('bundle verify', () => {
  it('passes a complete bundle', async () => {
    const r = await runCli(['bundle', 'verify', reference, '--verification-key', signer.publicKeyFile]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^bundle ${reference}: ${IMAGES} images, \\d+ blobs, [\\d.]+ MiB verified\\nrelease signatures: 1 verified with --verification-key ${signer.publicKeyFile}\\n$`));
  });

  it('-o json and -o yaml print one object on stdout, the figures the text line gives', async () => {
    const text = await runCli(['bundle', 'verify', reference, '--verification-key', signer.publicKeyFile]);
    const [, blobs] = /, (\d+) blobs,/.exec(text.stdout)!;
    const json = await runCli(['bundle', 'verify', reference, '--verification-key', signer.publicKeyFile, '-o', 'json']);
    expect([json.code, json.stderr]).toEqual([0, '']);
    const document = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(document).toMatchObject({ bundle: reference, release: planned.release.version, images: IMAGES, blobs: Number(blobs), fromPrevious: 0, problems: [], releaseSignatures: `release signatures: 1 verified with --verification-key ${signer.publicKeyFile}` });
    expect(document.bytes).toBeGreaterThan(0);
    const yamlRun = await runCli(['bundle', 'verify', reference, '--verification-key', signer.publicKeyFile, '-oyaml']);
    expect(yamlRun.code, yamlRun.stderr).toBe(0);
    expect(yaml.load(yamlRun.stdout)).toEqual(document);
  });

  it('names a corrupt and a missing blob with the images that need them; push refuses the damaged bundle', async () => {
    const dir = join(work, 'damaged');
    await cp(reference, dir, { recursive: true });
    const shared = largestLayer();
    const victim = plannedComponents()[7]!;
    const layerFile = join(dir, 'blobs', 'sha256', blobHex(shared.digest));
    const bytes = await readFile(layerFile);
    bytes[1000] = bytes[1000]! ^ 0xff;
    await writeFile(layerFile, bytes);
    await rm(join(dir, 'blobs', 'sha256', blobHex(victim.config.digest)));

    const r = await runCli(['bundle', 'verify', dir]);
    expectOneLineError(r, 2, /is damaged: 1 missing and 1 corrupt blobs \(listed on stdout\); copy it again from the connected side, where `prestage bundle create` with the same arguments fetches only these/);
    const lines = r.stdout.trim().split('\n').sort();
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(new RegExp(`^corrupt layer ${shared.digest} needed by quay\\.io/\\S+, quay\\.io/\\S+, quay\\.io/\\S+ and \\d+ more$`));
    expect(lines[1]).toBe(`missing config ${victim.config.digest} needed by ${victim.pullSpec}`);
    // A machine format: the document lists the same problems, and the exit code and error line stay.
    const json = await runCli(['bundle', 'verify', dir, '-o', 'json']);
    expectOneLineError(json, 2, /is damaged: 1 missing and 1 corrupt blobs/);
    const problems = (JSON.parse(json.stdout) as { problems: Array<{ problem: string; role: string; digest: string }> }).problems;
    expect(problems.map((p) => `${p.problem} ${p.role} ${p.digest}`).sort()).toEqual([`corrupt layer ${shared.digest}`, `missing config ${victim.config.digest}`]);

    const push = await runCli(['bundle', 'push', dir, `${mirrorProxy.host}/damaged`, '--insecure-registry', mirrorProxy.host, '--output-dir', dir]);
    expectOneLineError(push, 2, /the bundle's blob sha256:[a-f0-9]{64} is (corrupt|missing).*`prestage bundle verify` lists every damaged blob/);
  });

  it('exits 2 in one line for a directory that is not a bundle', async () => {
    expectOneLineError(await runCli(['bundle', 'verify', work]), 2, /is not a complete bundle: oci-layout is missing; copy it again from the connected side/);
  });

  it('says a bundle path that does not exist does not, rather than calling it incomplete', async () => {
    const nope = join(work, 'no-such-bundle');
    expectOneLineError(await runCli(['bundle', 'verify', nope]), 2, new RegExp(`^prestage: error: ${nope}: no such directory; name a bundle directory`));
    expectOneLineError(await runCli(['bundle', 'verify', join(work, 'plan.json')]), 2, /plan\.json is not a directory; name a bundle directory/);
  });

  it('bundle create --to is the release version, as in plan and stage: a directory given to it is refused naming --output-dir, a file source with it too', async () => {
    const dir = join(work, 'to-a-directory');
    const r = await runCli(['bundle', 'create', planFile, '--to', dir, ...from, ...signing]);
    expectOneLineError(r, 2, new RegExp(`bundle create --to ${dir}: --to is a release version \\(as in plan and stage\\), not the bundle directory; name the directory with --output-dir ${dir}`));
    expect(existsSync(dir)).toBe(false);
    const both = await runCli(['bundle', 'create', planFile, '--to', '4.16.3', ...from, ...signing]);
    expectOneLineError(both, 2, /name the release as the SOURCE argument or as --to VERSION, exactly one of them/);
    expect(existsSync(join(process.cwd(), '4.16.3'))).toBe(false);
  });
});

describe('bundle push into an empty mirror', () => {
  const out = () => join(work, 'push-out');
  let first: CliResult;
  beforeAll(async () => {
    await mkdir(out(), { recursive: true });
    mirrorProxy.resetStats();
    first = await runCli(['bundle', 'push', reference, `${mirrorProxy.host}/mirrored`, '--insecure-registry', mirrorProxy.host, '--output-dir', out()]);
  });

  it('uploads each blob once per repository, mounting blobs another repository already got', () => {
    expect(first.code).toBe(0);
    const log = mirrorProxy.stats.log;
    const puts = log.filter((r) => r.method === 'PUT' && r.target.includes('/blobs/uploads/')).map((r) => new URL(r.target, 'http://x').searchParams.get('digest'));
    expect(new Set(puts).size).toBe(puts.length);
    const mounts = log.filter((r) => r.method === 'POST' && r.target.includes('mount=') && r.status === 201);
    expect(mounts.length).toBeGreaterThan(0);
    expect(first.stdout).toMatch(new RegExp(`^pushed ${IMAGES} images to ${mirrorProxy.host}/mirrored: blobs ${puts.length} uploaded \\([\\d.]+ MiB\\), ${mounts.length} mounted, 0 present; manifests ${IMAGES} pushed, 0 present`));
  });

  it('lets plan read the release through the mirror with the same digests and sets as from the source', async () => {
    const viaMirror = await runCli(['plan', RELEASE_BY_DIGEST, '--mirror', `quay.io=${mirror.host}/mirrored`, '--insecure-registry', mirror.host, '-o', 'json']);
    const viaSource = await runCli(['plan', RELEASE_BY_DIGEST, ...from, '-o', 'json']);
    expect(viaMirror.code).toBe(0);
    expect(JSON.parse(viaMirror.stdout)).toEqual(JSON.parse(viaSource.stdout));
    expect((JSON.parse(viaMirror.stdout) as Plan).sets.map((s) => s.images.length)).toEqual((JSON.parse(await readFile(planFile, 'utf8')) as Plan).sets.map((s) => s.images.length));
  });

  it('writes the source=mirror mapping and an ImageDigestMirrorSet for the cluster', async () => {
    const mapping = (await readFile(join(out(), 'mapping.txt'), 'utf8')).trim().split('\n');
    expect(mapping).toHaveLength(IMAGES);
    const component = plannedComponents()[0]!;
    expect(mapping).toContain(`${component.pullSpec}=${mirrorProxy.host}/mirrored/${truth.componentRepository}@${component.digest}`);
    const idms = yaml.load(await readFile(join(out(), 'image-digest-mirror-set.yaml'), 'utf8')) as { kind: string; metadata: { name: string }; spec: { imageDigestMirrors: unknown[] } };
    expect(idms.kind).toBe('ImageDigestMirrorSet');
    expect(idms.metadata.name).toBe(`prestage-${truth.release.version}`);
    expect(idms.spec.imageDigestMirrors).toEqual([
      { source: `quay.io/${truth.releaseRepository}`, mirrors: [`${mirrorProxy.host}/mirrored/${truth.releaseRepository}`] },
      { source: `quay.io/${truth.componentRepository}`, mirrors: [`${mirrorProxy.host}/mirrored/${truth.componentRepository}`] },
    ]);
  });

  it('uploads nothing the second time', async () => {
    mirrorProxy.resetStats();
    const again = await runCli(['bundle', 'push', reference, `${mirrorProxy.host}/mirrored`, '--insecure-registry', mirrorProxy.host, '--output-dir', out()]);
    expect(again.code).toBe(0);
    expect(mirrorProxy.stats.log.filter((r) => !['HEAD', 'GET'].includes(r.method))).toEqual([]);
    expect(again.stdout).toMatch(/blobs 0 uploaded \(0 B\), 0 mounted, \d+ present; manifests 0 pushed, \d+ present/);
  });
});

describe('bundle as tar parts (--max-archive-size)', () => {
  const parts = () => `${reference}.parts`;
  let index: { parts: Array<{ name: string; size: number; sha256: string }> };
  beforeAll(async () => {
    const r = await runCli(['bundle', 'create', RELEASE, '--output-dir', reference, ...from, ...signing, '--max-archive-size', '8Mi']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/fetched 0 B in 0 blobs/);
    index = JSON.parse(await readFile(join(parts(), 'parts.json'), 'utf8')) as typeof index;
  });

  it('cuts one tar into parts of at most the size, each with its sha256; cat | tar -x restores the layout', async () => {
    expect(index.parts.length).toBeGreaterThanOrEqual(3);
    for (const [i, part] of index.parts.entries()) {
      const bytes = await readFile(join(parts(), part.name));
      expect(part.name).toBe(`reference.tar.${String(i).padStart(3, '0')}`);
      expect(bytes.length).toBe(part.size);
      if (i < index.parts.length - 1) expect(part.size).toBe(8 * 1024 * 1024);
      expect(`sha256:${createHash('sha256').update(bytes).digest('hex')}`).toBe(part.sha256);
    }
    const restored = join(work, 'restored');
    await mkdir(restored);
    await promisify(execFile)('sh', ['-c', `cat "${parts()}"/reference.tar.* | tar -x -C "${restored}"`]);
    expect(await treeHashes(restored)).toEqual(await treeHashes(reference));
  });

  it('verifies the parts without unpacking and pushes from them', async () => {
    const verify = await runCli(['bundle', 'verify', parts()]);
    expect(verify.code, verify.stderr).toBe(0);
    expect(verify.stdout).toMatch(new RegExp(`${IMAGES} images, \\d+ blobs, [\\d.]+ MiB verified`));
    const push = await runCli(['bundle', 'push', join(parts(), 'parts.json'), `${mirrorProxy.host}/mirrored`, '--insecure-registry', mirrorProxy.host, '--output-dir', work]);
    expect(push.code).toBe(0);
    expect(push.stdout).toMatch(/blobs 0 uploaded/);
    expect(await treeHashes(join(parts(), 'reference'))).toEqual(await treeHashes(reference));
  });

  it('names a damaged part', async () => {
    const copy = join(work, 'damaged.parts');
    await cp(parts(), copy, { recursive: true, filter: (src) => !src.endsWith('/reference') && !src.includes('/reference/') });
    const name = index.parts[1]!.name;
    const bytes = await readFile(join(copy, name));
    bytes[4096] = bytes[4096]! ^ 0x01;
    await writeFile(join(copy, name), bytes);
    expectOneLineError(await runCli(['bundle', 'verify', copy]), 2, new RegExp(`part ${copy}/${name.replace(/\./g, '\\.')} is corrupt \\(8388608 bytes hashing to sha256:[a-f0-9]{64}, expected 8388608 bytes ${index.parts[1]!.sha256}\\); copy it again`));
  });
});

describe('incremental bundles (--since)', () => {
  it('carries only blobs the previous bundle lacks; verify counts the rest; push needs the previous bundle first', async () => {
    // The previous bundle held only the release image, whose base layers every component shares.
    const full = await readPlanFile(planFile);
    const subsetFile = join(work, 'plan-subset.json');
    await writeFile(subsetFile, JSON.stringify({ ...full, images: full.images.slice(0, 1), skipped: [] }));
    const previous = join(work, 'previous');
    const next = join(work, 'next');
    expect((await runCli(['bundle', 'create', subsetFile, '--output-dir', previous, ...from, ...signing])).code).toBe(0);

    const r = await runCli(['bundle', 'create', planFile, '--output-dir', next, '--since', previous, ...from, ...signing]);
    expect(r.code).toBe(0);
    const carried = new Set(full.images.slice(0, 1).flatMap((i) => [i.config.digest, ...i.layers.map((l) => l.digest)]));
    const all = new Set(bundledImages().flatMap((i) => [i.config.digest, ...i.layers.map((l) => l.digest)]));
    const fresh = [...all].filter((d) => !carried.has(d));
    expect(r.stdout).toMatch(new RegExp(`fetched [\\d.]+ MiB in ${fresh.length} blobs .*; ${carried.size} blobs left to the previous bundle`));
    const files = new Set(await readdir(join(next, 'blobs', 'sha256')));
    for (const d of carried) expect(files.has(blobHex(d))).toBe(false);
    for (const d of fresh) expect(files.has(blobHex(d))).toBe(true);
    for (const i of bundledImages()) expect(files.has(blobHex(i.digest))).toBe(true);

    const verify = await runCli(['bundle', 'verify', next]);
    expect(verify.code).toBe(0);
    expect(verify.stdout).toContain(`; ${carried.size} blobs provided by the previous bundle (${previous})`);

    expectOneLineError(await runCli(['bundle', 'push', next, `${mirrorProxy.host}/incremental`, '--insecure-registry', mirrorProxy.host, '--output-dir', work]), 2,
      /blob sha256:[a-f0-9]{64} comes from the previous bundle \(.*previous\), but .*\/incremental\/.* does not have it; push the previous bundle first/);
    expect((await runCli(['bundle', 'push', previous, `${mirrorProxy.host}/incremental`, '--insecure-registry', mirrorProxy.host, '--output-dir', work])).code).toBe(0);
    mirrorProxy.resetStats();
    const push = await runCli(['bundle', 'push', next, `${mirrorProxy.host}/incremental`, '--insecure-registry', mirrorProxy.host, '--output-dir', work]);
    expect(push.code).toBe(0);
    const uploaded = mirrorProxy.stats.log.filter((r) => r.method === 'PUT' && r.target.includes('/blobs/uploads/')).map((r) => new URL(r.target, 'http://x').searchParams.get('digest'));
    expect(uploaded.every((d) => !carried.has(d!))).toBe(true);
    // The components' repository gets the carried base layers by mounting them from the release's.
    const mounted = mirrorProxy.stats.log.filter((r) => r.method === 'POST' && r.status === 201).map((r) => new URL(r.target, 'http://x').searchParams.get('mount'));
    expect(mounted.some((d) => carried.has(d!))).toBe(true);
    const viaMirror = await runCli(['plan', RELEASE_BY_DIGEST, '--mirror', `quay.io=${mirror.host}/incremental`, '--insecure-registry', mirror.host, '-o', 'json']);
    expect(JSON.parse(viaMirror.stdout)).toEqual(JSON.parse(await readFile(planFile, 'utf8')));
  });
});

/** Progress lines go nowhere. */
function devNull(): Writable {
  return new Writable({ write: (_chunk, _encoding, done) => done() });
}

/** A client of the source through its proxy, as the CLI builds it. */
function sourceClient(): RegistryClient {
  return new RegistryClient({
    pullSecrets: [parsePullSecretFile(registryConfig)],
    insecureRegistries: [sourceProxy.host],
    mirrors: [parseMirrorRule(`quay.io=${sourceProxy.host}`)],
    retry: DEFAULT_RETRY,
    concurrency: 32,
    stallTimeoutMs: 30_000,
  });
}

describe('manifests and blobs side by side', () => {
  it('reads blobs while manifests are still being read, big ones beside the small ones', async () => {
    const dir = join(work, 'side-by-side');
    const client = sourceClient();
    sourceProxy.resetStats();
    try {
      const report = await createBundle(client, await readPlanFile(planFile), { dir, force: false, allPlatforms: false, sigstore: true, releaseSignatures: await referenceSignatures(), concurrency: 32, progressTo: devNull() });
      expect(report.images).toBe(IMAGES);
    } finally {
      await client.close();
    }
    const log = sourceProxy.stats.log;
    const lastManifest = log.findLastIndex((r) => r.target.includes('/manifests/'));
    const blobsBefore = log.slice(0, lastManifest).filter((r) => r.target.includes('/blobs/'));
    // Before the last manifest was asked for, blobs of the images read so far were on their way,
    // among them blobs over 64 KiB (the bulk lane), largest known first.
    expect(blobsBefore.length).toBeGreaterThan(0);
    const sizes = new Map(bundledImages().flatMap((i) => [i.config, ...i.layers]).map((b) => [b.digest, b.size]));
    expect(blobsBefore.some((r) => (sizes.get(r.target.split('/blobs/')[1]!) ?? 0) > 64 * 1024)).toBe(true);
    expect(await treeHashes(dir)).toEqual(await treeHashes(reference));
    expect((await runCli(['bundle', 'verify', dir])).code).toBe(0);
  });
});

describe('free disk space', () => {
  it('stops once every manifest is read when the whole does not fit, though what the plan names did; a rerun completes it', async () => {
    const dir = join(work, 'tight-disk');
    const plan = await readPlanFile(planFile);
    const named = new Map(plan.images.flatMap((i) => [[i.config.digest, i.config.size] as const, ...i.layers.map((l) => [l.digest, l.compressedBytes] as const)]));
    const planBytes = [...named.values()].reduce((a, b) => a + b, 0);
    const client = sourceClient();
    try {
      await expect(createBundle(client, plan, {
        dir,
        force: false,
        allPlatforms: false,
        sigstore: true,
        releaseSignatures: await referenceSignatures(),
        concurrency: 32,
        progressTo: devNull(),
        // What the plan's own configs and layers need, and 1 KiB: not the manifests, nor the images only the mirror serves.
        statFs: async () => ({ bavail: planBytes + 1024, bsize: 1 }),
      })).rejects.toMatchObject({ exitCode: 2, message: expect.stringMatching(/^not enough free space in .*tight-disk: [\d.]+ MiB more is needed, [\d.]+ MiB is free \(short by [\d.]+ (KiB|MiB)\); free up space there or choose another --output-dir$/) });
      // Nothing half-written is left in blobs/, and nothing claims the bundle is complete.
      await expect(stat(join(dir, 'index.json'))).rejects.toThrow();
      const rerun = await createBundle(client, plan, { dir, force: false, allPlatforms: false, sigstore: true, releaseSignatures: await referenceSignatures(), concurrency: 32, progressTo: devNull() });
      expect(rerun.images).toBe(IMAGES);
    } finally {
      await client.close();
    }
    expect(await treeHashes(dir)).toEqual(await treeHashes(reference));
    expect((await runCli(['bundle', 'verify', dir])).code).toBe(0);
  });

  it('refuses before fetching anything, naming the shortfall and the fix', async () => {
    const dir = join(work, 'tiny-disk');
    const client = sourceClient();
    sourceProxy.resetStats();
    try {
      await expect(createBundle(client, await readPlanFile(planFile), {
        dir,
        force: false,
        allPlatforms: false,
        sigstore: true,
        concurrency: 8,
        progressTo: process.stderr,
        statFs: async () => ({ bavail: 1024, bsize: 4096 }),
      })).rejects.toMatchObject({
        exitCode: 2,
        message: expect.stringMatching(new RegExp(`^not enough free space in ${dir}: [\\d.]+ MiB more is needed, 4\\.0 MiB is free \\(short by [\\d.]+ MiB\\); free up space there or choose another --output-dir$`)),
      });
    } finally {
      await client.close();
    }
    expect(await readdir(join(dir, 'blobs', 'sha256'))).toEqual([]);
    expect(sourceProxy.stats.log.filter((r) => r.target.includes('/blobs/'))).toEqual([]);
  });
});

describe('bad input: one line, exit 2', () => {
  it('refuses a file that is not a plan, a bad push target and a bad size', async () => {
    const notPlan = join(work, 'not-a-plan.json');
    await writeFile(notPlan, '{"kind":"Deployment"}');
    expectOneLineError(await runCli(['bundle', 'create', notPlan, '--output-dir', join(work, 'x')]), 2, /is not a prestage\.dev\/v1alpha1 Plan; write one with `prestage plan RELEASE -o json > plan\.json`/);
    expectOneLineError(await runCli(['bundle', 'push', reference, 'not a registry']), 2, /invalid push target "not a registry": expected REGISTRY\[\/PREFIX\]/);
    expectOneLineError(await runCli(['bundle', 'create', planFile, '--output-dir', join(work, 'x'), '--max-archive-size', 'huge']), 2, /--max-archive-size: "huge" is not a size; use e\.g\. 4Gi/);
    expectOneLineError(await runCli(['bundle', 'push', reference, 'mirror.local', '--mirror', 'a=b']), 2, /--mirror does not apply to bundle push/);
  });
});
