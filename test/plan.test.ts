/**
 * `prestage plan` end to end against the real Debian docker-registry serving the synthetic
 * release: contents checked against the fixture's ground truth.
 */
import { mkdtemp, readFile, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { runBin, runCli } from './support/cli.js';
import type { Plan } from '../src/plan/types.js';

const truth = inject('fixtureTruth');
const RELEASE = `quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64`;
let registry: RegistryHandle;
let mirror: string[];

beforeAll(async () => {
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  mirror = ['--mirror', `quay.io=${registry.host}`, '--tls-verify=false'];
});
afterAll(async () => {
  await registry?.stop();
});

async function planJson(args: string[] = []): Promise<Plan> {
  const r = await runCli(['plan', RELEASE, ...mirror, '-o', 'json', ...args]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as Plan;
}

describe('plan of the x86_64 release', () => {
  let plan: Plan;
  beforeAll(async () => {
    plan = await planJson();
  });

  it('identifies the release by digest, version and channels', () => {
    expect(plan.release).toEqual({
      pullSpec: `quay.io/openshift-release-dev/ocp-release@${truth.release.image.digest}`,
      digest: truth.release.image.digest,
      manifestDigest: truth.release.image.digest,
      version: truth.release.version,
      architecture: 'amd64',
      multiArch: false,
      channels: [...truth.release.channels].sort(),
    });
  });

  it('lists every component once, with all its tag names, by source pullspec', () => {
    const components = plan.images.filter((i) => i.source === 'component');
    expect(components).toHaveLength(truth.components.length);
    for (const c of truth.components) {
      const planned = components.find((i) => i.digest === c.digest);
      expect(planned, c.name).toBeDefined();
      expect(planned!.pullSpec).toBe(c.pullSpec);
      expect(planned!.names).toEqual(c.names);
    }
    expect(plan.warnings).toContain(`skipped tag ${truth.skippedTags[0]}: from.kind is ImageStreamTag, not DockerImage`);
  });

  it('classifies every component as the fixture intends, with evidence', () => {
    const wrong = truth.components
      .map((c) => ({ name: c.name, want: c.role, got: plan.images.find((i) => i.digest === c.digest)!.role, reason: c.reason }))
      .filter((x) => x.want !== x.got);
    expect(wrong).toEqual([]);
    for (const i of plan.images) expect(i.evidence.length, i.name).toBeGreaterThan(0);
  });

  it('sizes every image exactly from gzip trailers', () => {
    for (const c of truth.components) {
      const planned = plan.images.find((i) => i.digest === c.digest)!;
      expect(planned.diskBytes, c.name).toBe(c.layers.reduce((a, l) => a + l.uncompressedSize, 0));
      expect(planned.compressedBytes, c.name).toBe(c.config.size + c.layers.reduce((a, l) => a + l.size, 0));
      expect(planned.sizeMethod).toBe('gzip-isize');
    }
  });

  it('builds a control-plane set of everything and a worker set of the all-nodes images, sizes deduplicated', () => {
    const [cp, worker] = plan.sets;
    const allNodes = truth.components.filter((c) => c.role === 'all').map((c) => c.pullSpec).sort();
    expect(worker!.images).toEqual(allNodes);
    expect(cp!.images).toHaveLength(truth.components.length + 1);
    expect(cp!.images).toContain(plan.release.pullSpec);
    const layers = new Map<string, { size: number; disk: number }>();
    for (const c of truth.components.filter((x) => x.role === 'all')) for (const l of c.layers) layers.set(l.digest, { size: l.size, disk: l.uncompressedSize });
    const diskUnique = [...layers.values()].reduce((a, l) => a + l.disk, 0);
    expect(worker!.diskBytes).toBe(diskUnique);
    expect(worker!.estimate.method).toBe('exact');
    // Shared base layers make the set smaller than the sum of its images.
    const naive = plan.images.filter((i) => i.role === 'all').reduce((a, i) => a + i.diskBytes, 0);
    expect(worker!.diskBytes).toBeLessThan(naive / 2);
  });

  it('is deterministic', async () => {
    expect(JSON.stringify(await planJson())).toBe(JSON.stringify(plan));
  });
});

describe('plan outputs', () => {
  it('renders PinnedImageSet YAML targeting the MCO pools', async () => {
    const r = await runCli(['plan', RELEASE, ...mirror, '-o', 'yaml']);
    expect(r.code).toBe(0);
    const docs = yaml.loadAll(r.stdout) as Array<{ apiVersion: string; kind: string; metadata: { name: string; labels: Record<string, string> }; spec: { pinnedImages: Array<{ name: string }> } }>;
    expect(docs.map((d) => [d.apiVersion, d.kind, d.metadata.name, d.metadata.labels['machineconfiguration.openshift.io/role']])).toEqual([
      ['machineconfiguration.openshift.io/v1', 'PinnedImageSet', 'prestage-4.16.3-control-plane', 'master'],
      ['machineconfiguration.openshift.io/v1', 'PinnedImageSet', 'prestage-4.16.3-worker', 'worker'],
    ]);
    for (const d of docs) {
      expect(d.spec.pinnedImages.length).toBeGreaterThan(0);
      expect(d.spec.pinnedImages.length).toBeLessThanOrEqual(500);
      for (const p of d.spec.pinnedImages) expect(p.name).toMatch(/@sha256:[a-f0-9]{64}$/);
    }
  });

  it('writes a GitOps directory with a kustomization', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'prestage-gitops-'));
    const r = await runCli(['plan', RELEASE, ...mirror, '--output-dir', dir, '-o', 'json']);
    expect(r.code).toBe(0);
    expect((await readdir(dir)).sort()).toEqual(['kustomization.yaml', 'prestage-4.16.3-control-plane.yaml', 'prestage-4.16.3-worker.yaml']);
    const k = yaml.load(await readFile(join(dir, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
    expect(k.resources).toEqual(['prestage-4.16.3-control-plane.yaml', 'prestage-4.16.3-worker.yaml']);
  });

  it('prints a size table per set by default', async () => {
    const r = await runCli(['plan', RELEASE, ...mirror]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Release 4\.16\.3 \(amd64\)/);
    expect(r.stdout).toMatch(/prestage-4\.16\.3-control-plane\s+control-plane\s+185\s/);
    expect(r.stdout).toMatch(/prestage-4\.16\.3-worker\s+worker\s+\d+\s/);
    expect(r.stdout).toContain('exact (');
  });
});

describe('plan options', () => {
  it('adds extra images by tag, resolved to digests, for the chosen role', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'prestage-extra-')), 'images.txt');
    writeFileSync(file, `# extra images\nquay.io/${truth.bad.notARelease.repository}:latest\n`);
    const plan = await planJson(['--images-file', file, '--extra-role', 'worker']);
    const extra = plan.images.find((i) => i.source === 'extra')!;
    expect(extra.pullSpec).toBe(`quay.io/${truth.bad.notARelease.repository}@${truth.bad.notARelease.digest}`);
    expect(extra.role).toBe('worker');
    expect(plan.sets.find((s) => s.role === 'worker')!.images).toContain(extra.pullSpec);
    expect(plan.sets.find((s) => s.role === 'control-plane')!.images).not.toContain(extra.pullSpec);
  });

  it('overrides classification by component name', async () => {
    const cp = truth.components.find((c) => c.role === 'control-plane')!;
    const all = truth.components.find((c) => c.role === 'all' && c.placement === 'unreferenced')!;
    const plan = await planJson(['--all-nodes', cp.name, '--control-plane-only', all.name]);
    expect(plan.images.find((i) => i.name === cp.name)!.role).toBe('all');
    expect(plan.images.find((i) => i.name === all.name)!.role).toBe('control-plane');
  });

  it('plans a multi-arch release for one architecture, keeping manifest-list pullspecs', async () => {
    const r = await runCli(['plan', `quay.io/openshift-release-dev/ocp-release:${truth.multi.tag}`, ...mirror, '--arch', 'arm64', '-o', 'json']);
    expect(r.stderr).toBe('');
    const plan = JSON.parse(r.stdout) as Plan;
    expect(plan.release.digest).toBe(truth.multi.listDigest);
    expect(plan.release.manifestDigest).toBe(truth.multi.perArch.arm64.digest);
    expect(plan.release.multiArch).toBe(true);
    for (const c of truth.multi.components) {
      const planned = plan.images.find((i) => i.digest === c.listDigest);
      expect(planned, c.name).toBeDefined();
      expect(planned!.diskBytes).toBe(c.perArch.arm64.layers.reduce((a, l) => a + l.uncompressedSize, 0));
    }
  });

  it('falls back to a labelled 2x estimate for a multi-member gzip layer', async () => {
    const bad = truth.bad.multiMemberGzip;
    const r = await runCli(['plan', `quay.io/${bad.repository}:latest`, ...mirror, '-o', 'json']);
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.stdout) as Plan;
    const img = plan.images.find((i) => i.digest === bad.component.digest)!;
    const layer = img.layers.find((l) => l.digest === bad.component.layerDigest)!;
    expect(layer).toMatchObject({ method: 'estimate-2x', diskBytes: 2 * bad.component.compressedSize });
    expect(img.sizeMethod).toBe('mixed');
    expect(plan.warnings.some((w) => w.includes(bad.component.layerDigest.slice(0, 19)))).toBe(true);
    expect(plan.sets[0]!.estimate.method).toBe('partly-estimated');
  });

  it('ignores path-traversal entries in the release layer and still plans', async () => {
    const bad = truth.bad.pathTraversal;
    const r = await runCli(['plan', `quay.io/${bad.repository}:latest`, ...mirror, '-o', 'json']);
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.stdout) as Plan;
    expect(plan.images.filter((i) => i.source === 'component').map((i) => i.name).sort()).toEqual([...bad.components].sort());
    expect(plan.warnings.filter((w) => w.startsWith('ignored unsafe tar entry'))).toHaveLength(3);
  });
});

describe('bad input: one line, exit 2', () => {
  const cases: Array<[string, () => string[], RegExp]> = [
    ['not a release', () => [`quay.io/${truth.bad.notARelease.repository}:latest`], /is not an OpenShift release image: its last layer has no release-manifests\/image-references/],
    ['wrong image-references kind', () => [`quay.io/${truth.bad.wrongKind.repository}:latest`], /has kind "Deployment" apiVersion "apps\/v1"; an OpenShift release has kind ImageStream/],
    ['wrong image-references apiVersion', () => [`quay.io/${truth.bad.wrongApiVersion.repository}:latest`], /apiVersion "v1"/],
    ['tag-only pullspec inside', () => [`quay.io/${truth.bad.tagOnly.repository}:latest`], /references quay\.io\/openshift-release-dev\/ocp-v4\.0-art-dev:tools by tag; a release must reference digests/],
    ['malformed reference', () => ['quay.io/Bad//ref'], /invalid image reference "quay\.io\/Bad\/\/ref"/],
    ['manifest list without the arch', () => [`quay.io/${truth.bad.noArm.repository}:latest`, '--arch', 'arm64'], /has no linux\/arm64 image \(it has linux\/amd64\); pick one with --arch/],
    ['gzip bomb', () => [`quay.io/${truth.bad.gzipBomb.repository}:latest`], /expands beyond \d+ bytes; refusing it as a possible gzip bomb/],
    ['unknown tag', () => ['quay.io/openshift-release-dev/ocp-release:9.9.9-x86_64'], /release image quay\.io\/openshift-release-dev\/ocp-release:9\.9\.9-x86_64 not found/],
    ['bad --mirror', () => ['--mirror', 'nonsense'], /invalid --mirror "nonsense": expected SOURCE=MIRROR/],
    ['missing --registry-config file', () => ['--registry-config', '/nonexistent/auth.json'], /cannot read registry auth file \/nonexistent\/auth\.json: ENOENT/],
  ];
  it.each(cases)('%s', async (_name, args, message) => {
    const a = args();
    const r = await runCli(['plan', ...(a[0]!.startsWith('--') ? [RELEASE] : []), ...a, ...mirror]);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.code).toBe(2);
  });
});

describe('the bins', () => {
  it('exit with the error code as a real process and name themselves as plugins', async () => {
    const r = await runBin('oc-prestage', ['plan', 'quay.io/Bad//ref']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^oc prestage: error: invalid image reference/);
    const help = await runBin('kubectl-prestage', ['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('kubectl prestage plan <release>');
  });

  it('plans as a real process', async () => {
    const r = await runBin('prestage', ['plan', RELEASE, ...mirror, '-o', 'json']);
    expect(r.code).toBe(0);
    expect((JSON.parse(r.stdout) as Plan).sets).toHaveLength(2);
  });
});
