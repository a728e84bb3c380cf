/**
 * Upgrades of several hops against the real docker-registry serving four consecutive releases
 * that share layers as real ones do (fixtures/release-path.ts), and an update service in the
 * harness answering the Cincinnati JSON in the shapes of openshift/cincinnati-graph-data
 * (fixtures/update-graph.ts): the path the CVO would take, every hop planned, the union per node,
 * Control Plane Only placement, hostile graphs refused, and the path carried across the air gap.
 */
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pushFixture } from '../fixtures/push.js';
import { buildReleasePath, PATH_VERSIONS, type ReleasePathFixture } from '../fixtures/release-path.js';
import { buildUpdateGraph } from '../fixtures/update-graph.js';
import type { PathPlan } from '../src/plan/path-plan.js';
import { startRegistry, startUpdateService, type RegistryHandle, type UpdateServiceFault, type UpdateServiceHandle } from './harness/index.js';
import { runCli } from './support/cli.js';

const CHANNEL = 'stable-4.18';
let fixture: ReleasePathFixture;
let registry: RegistryHandle;
let service: UpdateServiceHandle;
let dir: string;
let flags: string[];
let graphUrl: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'prestage-upgrade-path-'));
  // 4.17.2 too: the release a conditional edge leads to, planned with --allow-not-recommended.
  fixture = buildReleasePath(['4.16.3', '4.16.8', '4.17.2', '4.17.5', '4.18.2']);
  registry = await startRegistry({ storageDir: join(dir, 'registry') });
  await pushFixture(registry.url, fixture);
  const graphs = new Map(['stable-4.18', 'eus-4.18', 'fast-4.18'].map((channel) => [channel, buildUpdateGraph(fixture, channel)]));
  service = await startUpdateService({ graphs: (channel) => graphs.get(channel) });
  graphUrl = `${service.url}/api/upgrades_info/v1/graph`;
  flags = ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
}, 300_000);

afterAll(async () => {
  await service?.close();
  await registry?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const release = (version: string) => fixture.truth.releases.find((r) => r.version === version)!;
const osImages = (version: string) => release(version).components.filter((c) => /^(rhel-coreos|machine-os-content)/.test(c.name)).map((c) => c.pullSpec);
const setImages = (path: PathPlan, version: string, role: 'worker' | 'control-plane') => new Set(path.hops.find((h) => h.to === version)!.plan.sets.filter((s) => s.role === role).flatMap((s) => s.images));

async function planPath(args: string[]): Promise<{ path: PathPlan; stderr: string }> {
  const r = await runCli(['plan', '--from', '4.16.3', '--to', '4.18.2', '--graph', graphUrl, ...flags, '-o', 'json', ...args]);
  expect(r.code, r.stderr).toBe(0);
  return { path: JSON.parse(r.stdout) as PathPlan, stderr: r.stderr };
}

describe('plan over the update graph', () => {
  let path: PathPlan;
  beforeAll(async () => {
    ({ path } = await planPath(['--channel', CHANNEL]));
  });

  it('takes the shortest chain of recommended edges through the newest releases, asking as the CVO asks', () => {
    expect(path.kind).toBe('UpgradePath');
    expect([path.from, ...path.hops.map((h) => h.to)]).toEqual(PATH_VERSIONS);
    expect(path.equallyShort).toBe(2);
    expect(path.hops.map((h) => h.risks)).toEqual([[], [], []]);
    const asked = service.requests.at(-1)!;
    expect(asked.query).toMatchObject({ channel: CHANNEL, arch: 'amd64', version: '4.16.3' });
    expect(asked.headers.accept).toContain('application/json');
  });

  it('plans every hop as its own release, sets named by its version, each release by the digest the graph gives', () => {
    for (const hop of path.hops) {
      expect(hop.plan.release.digest).toBe(release(hop.to).digest);
      expect(hop.plan.sets.map((s) => s.name).sort()).toEqual([`prestage-${hop.to}-control-plane`, `prestage-${hop.to}-worker`]);
      const inRelease = new Set(release(hop.to).components.map((c) => c.pullSpec));
      for (const set of hop.plan.sets) for (const image of set.images) expect(inRelease.has(image) || image.includes('ocp-release@'), image).toBe(true);
    }
  });

  it('counts a layer shared between hops once per node: the union is far below the hops summed', () => {
    for (const total of path.union.perNode) {
      const hopsAlone = path.hops.map((h) => h.plan.sets.filter((set) => set.role === total.role).reduce((sum, set) => sum + set.compressedBytes, 0));
      expect(total.hopsSummedCompressedBytes).toBe(hopsAlone.reduce((a, b) => a + b, 0));
      expect(total.compressedBytes).toBeLessThan(total.hopsSummedCompressedBytes * 0.6);
      expect(total.compressedBytes).toBeGreaterThan(Math.max(...hopsAlone));
      expect(total.perHop[0]!.newCompressedBytes).toBe(hopsAlone[0]);
      expect(total.perHop.reduce((a, h) => a + h.newCompressedBytes, 0)).toBe(total.compressedBytes);
    }
    // Every blob of the path once, against the fixture's own count of them.
    expect(path.union.compressedBytes).toBeLessThanOrEqual(fixture.truth.unionCompressedBytes);
  });

  it('-o wide says why each edge was chosen and which were refused', async () => {
    const r = await runCli(['plan', '--from', '4.16.3', '--to', '4.18.2', '--graph', graphUrl, '--channel', CHANNEL, ...flags, '-o', 'wide']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Upgrade path 4.16.3 -> 4.16.8 -> 4.17.5 -> 4.18.2: 3 hops');
    expect(r.stdout).toMatch(/4\.16\.3\s+4\.18\.2\s+2 minors in one hop \(the CVO accepts one: its GiantHop precondition\)/);
    expect(r.stdout).toMatch(/4\.16\.3\s+4\.17\.2\s+conditional, not recommended/);
    expect(r.stdout).toContain('newest of 2 releases on a shortest path');
    expect(r.stdout).toContain('Hop 3: 4.17.5 -> 4.18.2');
  });

  it('takes a conditional edge only with --allow-not-recommended, printing each risk', async () => {
    const { path: risky, stderr } = await planPath(['--channel', CHANNEL, '--allow-not-recommended']);
    expect([risky.from, ...risky.hops.map((h) => h.to)]).toEqual(['4.16.3', '4.17.2', '4.18.2']);
    expect(risky.hops[0]!.risks.length).toBeGreaterThan(0);
    expect(stderr).toMatch(/^prestage: warning: 4\.16\.3 -> 4\.17\.2 is not recommended: PodNetworkMTUDrift: /m);
  });

  it('with no path, exits 2 naming both versions and the channel', async () => {
    // 4.17.7 is reached only over a conditional edge (4.17.5 -> 4.17.7, an Always risk).
    const r = await runCli(['plan', '--from', '4.16.3', '--to', '4.17.7', '--graph', graphUrl, '--channel', CHANNEL, ...flags]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^prestage: error: no update path from 4\.16\.3 to 4\.17\.7 in channel stable-4\.18 of .*recommended edges only\); a path over conditional edges exists: --allow-not-recommended takes it/);
  });

  it('a Control Plane Only update: no node OS of the hops before the last on workers, their other images still there', async () => {
    const { path: cpo } = await planPath(['--channel', 'eus-4.18', '--control-plane-only-update']);
    expect(cpo.controlPlaneOnly).toBe(true);
    expect(cpo.hops.map((h) => h.workersPaused)).toEqual([true, true, false]);
    for (const version of ['4.16.8', '4.17.5']) {
      const worker = setImages(cpo, version, 'worker');
      const controlPlane = setImages(cpo, version, 'control-plane');
      expect(osImages(version).length).toBeGreaterThan(0);
      for (const image of osImages(version)) {
        expect(worker.has(image), image).toBe(false);
        expect(controlPlane.has(image), image).toBe(true);
      }
      // The hop's DaemonSets still roll out on the paused workers.
      expect(worker.size).toBeGreaterThan(10);
    }
    const last = setImages(cpo, '4.18.2', 'worker');
    for (const image of osImages('4.18.2')) expect(last.has(image), image).toBe(true);
  });

  it('reads the same graph from a file', async () => {
    const file = join(dir, 'graph.json');
    await writeFile(file, JSON.stringify(buildUpdateGraph(fixture, CHANNEL)));
    const r = await runCli(['plan', '--from', '4.16.3', '--to', '4.18.2', '--graph', file, '--channel', CHANNEL, ...flags, '-o', 'name']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual(PATH_VERSIONS.slice(1).flatMap((v) => [`pinnedimageset/prestage-${v}-control-plane`, `pinnedimageset/prestage-${v}-worker`]));
  });
});

describe('the path an ImageSetConfiguration names (mirror.platform.channels)', () => {
  const config = async (channel: Record<string, unknown>) => {
    const file = join(dir, `isc-${Object.keys(channel).join('-')}.yaml`);
    await writeFile(file, yaml.dump({ apiVersion: 'mirror.openshift.io/v2alpha1', kind: 'ImageSetConfiguration', mirror: { platform: { graph: true, channels: [{ name: CHANNEL, ...channel }] } } }));
    return file;
  };

  it('shortestPath from minVersion to maxVersion is the path, over --graph or UPDATE_URL_OVERRIDE as oc-mirror reads it', async () => {
    const file = await config({ minVersion: '4.16.3', maxVersion: '4.18.2', shortestPath: true });
    const expected = PATH_VERSIONS.slice(1).flatMap((v) => [`pinnedimageset/prestage-${v}-control-plane`, `pinnedimageset/prestage-${v}-worker`]);
    const r = await runCli(['plan', '--config', file, '--graph', graphUrl, ...flags, '-o', 'name']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual(expected);
    const before = service.requests.length;
    process.env.UPDATE_URL_OVERRIDE = graphUrl;
    const overridden = await runCli(['plan', '--config', file, ...flags, '-o', 'name']).finally(() => delete process.env.UPDATE_URL_OVERRIDE);
    expect(overridden.code, overridden.stderr).toBe(0);
    expect(overridden.stdout.trim().split('\n')).toEqual(expected);
    expect(service.requests.length).toBe(before + 1);
  });

  it('without shortestPath (every release in the range, as oc-mirror carries them) is one line saying what to set', async () => {
    const r = await runCli(['plan', '--config', await config({ minVersion: '4.16.3', maxVersion: '4.18.2' }), '--graph', graphUrl, ...flags]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('without shortestPath: true oc-mirror carries every release from 4.16.3 to 4.18.2; prestage carries the path the cluster takes: set shortestPath: true');
  });
});

describe('a hostile or broken update graph gets one line and nothing else', () => {
  const cases: Array<[string, UpdateServiceFault | 'unknown channel', number, RegExp]> = [
    ['a body over the bound', { kind: 'huge-body', mebibytes: 40 }, 2, /answer larger than 33554432 bytes/],
    ['a body that is not JSON', { kind: 'not-json' }, 2, /: not JSON; not an update graph/],
    ['an edge index out of range', { kind: 'edge-out-of-range' }, 2, /edge \d+ is not a pair of node indices below \d+/],
    ['a version that is not semver', { kind: 'bad-version', version: '4.18.x' }, 2, /has no semver version/],
    ['100 000 releases', { kind: 'many-nodes' }, 2, /100000 nodes, over the bound of 50000/],
    ['a redirect to a link-local address', { kind: 'redirect', to: 'http://169.254.169.254/latest/meta-data/' }, 3, /redirected to the link-local address 169\.254\.169\.254/],
    ['an unknown channel', 'unknown channel', 2, /HTTP 400 .*check --channel and --graph/],
  ];
  it.each(cases)('%s', async (_what, fault, code, message) => {
    const channel = fault === 'unknown channel' ? 'stable-9.9' : CHANNEL;
    if (fault !== 'unknown channel') service.setFault(fault, channel);
    try {
      const r = await runCli(['plan', '--from', '4.16.3', '--to', '4.18.2', '--graph', graphUrl, '--channel', channel, ...flags]);
      expect(r.code).toBe(code);
      expect(r.stdout).toBe('');
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(message);
    } finally {
      service.setFault(undefined, channel);
    }
  }, 120_000);
});

describe('the path across the air gap', () => {
  let bundle: string;
  let out: string;
  let mirror: RegistryHandle;
  let created: Awaited<ReturnType<typeof runCli>>;
  beforeAll(async () => {
    bundle = join(dir, 'bundle');
    out = join(dir, 'pushed');
    mirror = await startRegistry({ storageDir: join(dir, 'mirror') });
    // The graph image's base: any image with a shell, from the source registry.
    created = await runCli(['bundle', 'create', '--from', '4.16.3', '--to', '4.18.2', '--graph', graphUrl, '--channel', CHANNEL, ...flags, '--output-dir', bundle, '--allow-unsigned', '--remove-signatures', '--graph-base-image', release('4.16.3').components.find((c) => c.name === 'tools')!.pullSpec, '--quiet']);
  }, 600_000);
  afterAll(async () => {
    await mirror?.stop();
  });

  it('writes one bundle per hop, each after the first leaving out what the hops before it carry', async () => {
    // For the record (docs/air-gapped-bundles.md shows it).
    console.log(`$ prestage bundle create --from 4.16.3 --to 4.18.2 ...  (exit ${created.code})\n${created.stdout}${created.stderr}`);
    expect(created.code, created.stderr).toBe(0);
    expect((await readdir(bundle)).sort()).toEqual(['4.16.8', '4.17.5', '4.18.2', 'graph-data', 'prestage-path.json']);
    expect(created.stdout).toMatch(/^bundle .*4\.17\.5: .*; \d+ blobs left to the previous bundle$/m);
    const index = JSON.parse(await readFile(join(bundle, 'prestage-path.json'), 'utf8')) as { hops: Array<{ to: string }>; channel: string };
    expect(index.hops.map((h) => h.to)).toEqual(PATH_VERSIONS.slice(1));
    const channel = yaml.load(await readFile(join(bundle, 'graph-data', 'channels', `${CHANNEL}.yaml`), 'utf8'));
    expect(channel).toEqual({ name: CHANNEL, versions: PATH_VERSIONS });
  });

  it('bundle push takes the hops in order, then the graph image and the UpdateService', async () => {
    const r = await runCli(['bundle', 'push', bundle, `${mirror.host}/ocp`, '--insecure-registry', mirror.host, '--output-dir', out, '--allow-unverified-signatures', '--quiet']);
    console.log(`$ prestage bundle push ...  (exit ${r.code})\n${r.stdout}${r.stderr}`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.match(/^hop /gm)).toHaveLength(3);
    for (const version of PATH_VERSIONS.slice(1)) {
      const manifest = await fetch(`${mirror.url}/v2/ocp/openshift-release-dev/ocp-release/manifests/${release(version).digest}`, { method: 'HEAD' });
      expect(manifest.status, version).toBe(200);
      expect(await readFile(join(out, version, 'image-digest-mirror-set.yaml'), 'utf8')).toContain('ImageDigestMirrorSet');
    }
    const service = yaml.load(await readFile(join(out, 'update-service.yaml'), 'utf8')) as { spec: { releases: string; graphDataImage: string } };
    expect(service.spec.releases).toBe(`${mirror.host}/ocp/openshift-release-dev/ocp-release`);
    const image = service.spec.graphDataImage;
    expect(image).toMatch(new RegExp(`^${mirror.host}/ocp/openshift/graph-image@sha256:[a-f0-9]{64}$`));
    const manifest = await (await fetch(`${mirror.url}/v2/ocp/openshift/graph-image/manifests/latest`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json' } })).json() as { config: { digest: string } };
    const config = await (await fetch(`${mirror.url}/v2/ocp/openshift/graph-image/blobs/${manifest.config.digest}`)).json() as { config: { Cmd: string[] } };
    expect(config.config.Cmd).toEqual(['/bin/bash', '-c', 'exec cp -rp /var/lib/cincinnati-graph-data/* /var/lib/cincinnati/graph-data']);
  });

  it('bundle create --to with a directory is one line naming --output-dir', async () => {
    const r = await runCli(['bundle', 'create', release('4.16.8').pullSpec, '--to', join(dir, 'somewhere'), ...flags]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(`prestage: error: bundle create --to ${join(dir, 'somewhere')}: --to is a release version (as in plan and stage), not the bundle directory; name the directory with --output-dir ${join(dir, 'somewhere')}`);
  });
});
