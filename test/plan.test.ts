/**
 * `prestage plan` end to end against the real Debian docker-registry serving the synthetic
 * release: contents checked against the fixture's ground truth.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { runBin, runCli } from './support/cli.js';
import type { Plan } from '../src/plan/types.js';
import { removeTempDirs, tempDir } from './support/temp-files.js';

const truth = inject('fixtureTruth');
const RELEASE = `quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64`;
let registry: RegistryHandle;
let mirror: string[];

beforeAll(async () => {
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir') });
  mirror = ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
});
afterAll(async () => {
  removeTempDirs();
  await registry?.stop();
});

const roleOf = (plan: Plan, digest: string) => plan.images.find((i) => i.digest === digest)?.role ?? 'none';
const setOf = (plan: Plan, role: 'worker' | 'control-plane') => new Set(plan.sets.filter((s) => s.role === role).flatMap((s) => s.images));

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

  it('lists every component once, with all its tag names, by source pullspec: in a set or skipped', () => {
    const components = plan.images.filter((i) => i.source === 'component');
    expect(components.length + plan.skipped.length).toBe(truth.components.length);
    for (const c of truth.components) {
      const planned = components.find((i) => i.digest === c.digest) ?? plan.skipped.find((i) => i.digest === c.digest);
      expect(planned, c.name).toBeDefined();
      expect(planned!.pullSpec).toBe(c.pullSpec);
      expect(planned!.names).toEqual(c.names);
    }
    expect(plan.warnings).toContain(`skipped tag ${truth.skippedTags[0]}: from.kind is ImageStreamTag, not DockerImage`);
  });

  it('places every component where a real cluster runs it, or more widely, with evidence', () => {
    const roleOf = (digest: string) => plan.images.find((i) => i.digest === digest)?.role ?? 'none';
    const deviations = truth.components.filter((c) => roleOf(c.digest) !== c.role).map((c) => `${c.name}: ${c.role} -> ${roleOf(c.digest)}`);
    // The release cannot tell the network type (SDN is not run with OVN-Kubernetes) nor where the
    // vSphere syncer runs: kept on all nodes, the safe side.
    expect(deviations.sort()).toEqual(['kube-proxy: none -> all', 'sdn: none -> all', 'vsphere-csi-driver-syncer: control-plane -> all']);
    for (const i of plan.images) expect(i.evidence.length, i.name).toBeGreaterThan(0);
    for (const i of plan.skipped) expect(i.why, i.name).not.toBe('');
  });

  it('keeps images of every platform when the platform is unknown, and says what --platform would save', () => {
    expect(plan.cluster.platform).toBeNull();
    for (const c of truth.components.filter((x) => x.platforms && x.role !== 'none')) expect(roleOf(plan, c.digest), c.name).not.toBe('none');
    expect(plan.warnings.find((w) => w.startsWith('platform unknown'))).toMatch(/^platform unknown, so images of every platform are kept \(\d+ serve only some platforms\): --platform would leave out at least \d+ images, [\d.]+ MiB on disk per node$/);
  });

  it('sizes every image exactly from gzip trailers', () => {
    for (const c of truth.components.filter((x) => roleOf(plan, x.digest) !== 'none')) {
      const planned = plan.images.find((i) => i.digest === c.digest)!;
      expect(planned.diskBytes, c.name).toBe(c.layers.reduce((a, l) => a + l.uncompressedSize, 0));
      expect(planned.compressedBytes, c.name).toBe(c.config.size + c.layers.reduce((a, l) => a + l.size, 0));
      expect(planned.sizeMethod).toBe('gzip-isize');
    }
  });

  it('builds a control-plane set of every planned image and a worker set of the all-nodes images, sizes deduplicated', () => {
    const [cp, worker] = plan.sets;
    const allNodes = plan.images.filter((i) => i.role === 'all');
    expect(worker!.images).toEqual(allNodes.map((i) => i.pullSpec).sort());
    expect(cp!.images).toEqual(plan.images.map((i) => i.pullSpec).sort());
    expect(cp!.images).toContain(plan.release.pullSpec);
    const layers = new Map<string, number>();
    for (const c of truth.components.filter((x) => allNodes.some((i) => i.digest === x.digest))) for (const l of c.layers) layers.set(l.digest, l.uncompressedSize);
    expect(worker!.diskBytes).toBe([...layers.values()].reduce((a, n) => a + n, 0));
    expect(worker!.estimate.method).toBe('exact');
    // Shared base layers make the set smaller than the sum of its images.
    const naive = allNodes.reduce((a, i) => a + i.diskBytes, 0);
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
    const dir = await tempDir('prestage-gitops-');
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
    expect(r.stdout).toMatch(/prestage-4\.16\.3-control-plane\s+control-plane\s+\d+\s/);
    expect(r.stdout).toMatch(/^Images: \d+ \(\d+ control-plane only, \d+ all nodes\); \d+ skipped, in no set \(-o wide lists why\)$/m);
    expect(r.stdout).toMatch(/prestage-4\.16\.3-worker\s+worker\s+\d+\s/);
    expect(r.stdout).toContain('exact (');
  });
});

describe('plan for a known cluster', () => {
  it('on AWS with the default capabilities: the worker set is what workers run, 0 missing, at most 10% extra; the control-plane set misses nothing', async () => {
    const plan = await planJson(['--platform', 'aws']);
    expect(plan.cluster.platform).toBe('AWS');
    const worker = setOf(plan, 'worker');
    const missing = truth.roles.awsDefault.worker.filter((p) => !worker.has(p));
    const extra = [...worker].filter((p) => !truth.roles.awsDefault.worker.includes(p));
    expect(missing).toEqual([]);
    expect(extra.length / truth.roles.awsDefault.worker.length).toBeLessThanOrEqual(0.1);
    const cp = setOf(plan, 'control-plane');
    expect(truth.roles.awsDefault.controlPlane.filter((p) => !cp.has(p))).toEqual([]);
    const azure = truth.components.find((c) => c.name === 'azure-cloud-node-manager')!;
    expect(plan.skipped.find((i) => i.digest === azure.digest)!.why).toMatch(/^serves only Azure \(cloudNodeManagerAzure|images\.json key cloudNodeManagerAzure/);
    expect(plan.warnings.some((w) => w.startsWith('platform unknown'))).toBe(false);
  });

  it('with --capability-set None plans no capability-gated image', async () => {
    const plan = await planJson(['--platform', 'AWS', '--capability-set', 'None']);
    const gated = truth.components.filter((c) => c.capability !== undefined && roleOf(plan, c.digest) !== 'none');
    expect(gated.map((c) => c.name)).toEqual([]);
    expect(truth.roles.awsNone.worker.filter((p) => !setOf(plan, 'worker').has(p))).toEqual([]);
    const console = truth.components.find((c) => c.name === 'console')!;
    expect(plan.skipped.find((i) => i.digest === console.digest)!.why).toMatch(/capability Console not enabled/);
    const withConsole = await planJson(['--platform', 'AWS', '--capability-set', 'None', '--capabilities', 'Console,Ingress']);
    expect(roleOf(withConsole, console.digest)).toBe('control-plane');
  });

  it('applies internal-openshift-hosted manifests unless --exclude names it', async () => {
    const operator = truth.components.find((c) => c.name === 'cluster-kube-apiserver-operator')!;
    expect(roleOf(await planJson(), operator.digest)).toBe('control-plane');
    const excluded = await planJson(['--exclude', 'internal-openshift-hosted']);
    expect(excluded.skipped.find((i) => i.digest === operator.digest)!.why).toMatch(/excluded by --exclude internal-openshift-hosted/);
  });

  it('plans tech-preview components for --feature-set TechPreviewNoUpgrade only', async () => {
    const capi = truth.components.find((c) => c.name === 'cluster-capi-operator')!;
    expect(roleOf(await planJson(), capi.digest)).toBe('none');
    expect(roleOf(await planJson(['--feature-set', 'TechPreviewNoUpgrade']), capi.digest)).toBe('control-plane');
  });
});

describe('names MCO accepts (PinnedImageSet CEL rules)', () => {
  const named = (host: string) => `${host}/openshift-release-dev/ocp-release:4.16.3-x86_64`;
  const releaseAt = (host: string) => `${host}/openshift-release-dev/ocp-release@${truth.release.image.digest}`;

  it('writes MCO sets whose release is named by a dotted IP host', async () => {
    const r = await runCli(['plan', named(registry.host), ...mirror, '-o', 'yaml']);
    // The plan's warnings, which the YAML has no room for, on stderr (and nothing else there).
    expect(r.stderr).toContain(`skipped tag ${truth.skippedTags[0]}: from.kind is ImageStreamTag, not DockerImage`);
    expect(r.stderr.trimEnd().split('\n').every((line) => / warning: /.test(line))).toBe(true);
    expect(r.code).toBe(0);
    const docs = yaml.loadAll(r.stdout) as Array<{ spec: { pinnedImages: Array<{ name: string }> } }>;
    expect(docs[0]!.spec.pinnedImages.map((i) => i.name)).toContain(releaseAt(registry.host));
  });

  it('refuses -o yaml and --output-dir for MCO when a name is localhost:PORT, naming it and the fix; the agent API and -o json take it', async () => {
    const local = `localhost:${registry.host.split(':')[1]}`;
    // The registry named as localhost:PORT, plain HTTP: named insecure as the user would.
    const insecure = [...mirror, '--insecure-registry', local];
    const message = `prestage: error: MCO's PinnedImageSet would reject ${releaseAt(local)}: its registry host ${local} is not a dotted name or IP address; plan the release by its source name (quay.io/...) with --mirror SOURCE=MIRROR, which keeps the source names, or use --api prestage (the prestage agent)\n`;
    for (const api of ['mco', 'mco-v1alpha1']) {
      const r = await runCli(['plan', named(local), ...insecure, '-o', 'yaml', '--api', api]);
      expect(r).toEqual({ code: 2, stdout: '', stderr: message });
    }
    const dir = join(await tempDir('prestage-names-'), 'gitops');
    const written = await runCli(['plan', named(local), ...insecure, '--output-dir', dir, '-o', 'json']);
    expect(written).toEqual({ code: 2, stdout: '', stderr: message });
    await expect(readdir(dir)).rejects.toThrow(/ENOENT/);

    const agent = await runCli(['plan', named(local), ...insecure, '-o', 'yaml', '--api', 'prestage']);
    expect(agent.code).toBe(0);
    expect(agent.stdout).toContain(releaseAt(local));
    const json = await runCli(['plan', named(local), ...insecure, '-o', 'json']);
    expect(json.code).toBe(0);
    expect((JSON.parse(json.stdout) as Plan).release.pullSpec).toBe(releaseAt(local));
  });

  it('refuses a release mirrored oc-mirror style, two namespace segments deep', async () => {
    const deep = await startRegistry();
    try {
      // The release image copied as oc-mirror lays it out: <registry>/<prefix>/openshift/release-images.
      const from = `${registry.url}/v2/openshift-release-dev/ocp-release`;
      const to = `${deep.url}/v2/prefix/openshift/release-images`;
      const accept = 'application/vnd.docker.distribution.manifest.v2+json';
      const manifest = Buffer.from(await (await fetch(`${from}/manifests/${truth.release.tag}`, { headers: { accept } })).arrayBuffer());
      const doc = JSON.parse(manifest.toString('utf8')) as { config: { digest: string }; layers: Array<{ digest: string }> };
      for (const { digest } of [doc.config, ...doc.layers]) {
        const bytes = Buffer.from(await (await fetch(`${from}/blobs/${digest}`)).arrayBuffer());
        const started = await fetch(`${to}/blobs/uploads/`, { method: 'POST' });
        const upload = new URL(started.headers.get('location')!, deep.url);
        upload.searchParams.set('digest', digest);
        expect((await fetch(upload, { method: 'PUT', body: bytes, headers: { 'content-type': 'application/octet-stream' } })).status).toBe(201);
      }
      expect((await fetch(`${to}/manifests/${truth.release.tag}`, { method: 'PUT', body: manifest, headers: { 'content-type': accept } })).status).toBe(201);

      const release = `${deep.host}/prefix/openshift/release-images@${truth.release.image.digest}`;
      const r = await runCli(['plan', `${deep.host}/prefix/openshift/release-images:${truth.release.tag}`, ...mirror, '--insecure-registry', deep.host, '-o', 'yaml']);
      expect(r).toEqual({
        code: 2,
        stdout: '',
        stderr: `prestage: error: MCO's PinnedImageSet would reject ${release}: its repository path has more than one namespace segment; plan the release by its source name (quay.io/...) with --mirror SOURCE=MIRROR, which keeps the source names, or use --api prestage (the prestage agent)\n`,
      });
    } finally {
      await deep.stop();
    }
  });
});

describe('plan input checks', () => {
  it.each([
    ['an unknown platform', ['--platform', 'Hetzner'], /--platform Hetzner is not a platform; use one of AWS, Azure, GCP, VSphere, BareMetal, OpenStack, Nutanix, IBMCloud, PowerVS, AlibabaCloud, /],
    ['an unknown profile', ['--profile', 'hypershift'], /--profile hypershift is not a profile of this release; its manifests name ibm-cloud-managed, self-managed-high-availability, single-node-developer$/m],
    ['an unknown feature set', ['--feature-set', 'TechPreview'], /--feature-set TechPreview is not a feature set of this release; use one of Default, TechPreviewNoUpgrade, DevPreviewNoUpgrade, CustomNoUpgrade$/m],
    ['a feature set 4.16 does not know', ['--feature-set', 'OKD'], /--feature-set OKD is not a feature set of this release; use one of Default, TechPreviewNoUpgrade, DevPreviewNoUpgrade, CustomNoUpgrade$/m],
    ['an unknown capability set', ['--capability-set', 'v5'], /--capability-set v5 is not a capability set of 4\.16\.3; use one of None, v4\.11, v4\.12, v4\.13, v4\.14, v4\.15, v4\.16, vCurrent$/m],
    ['a capability set newer than the release', ['--capability-set', 'v4.18'], /--capability-set v4\.18 is not a capability set of 4\.16\.3; use one of None, /],
    ['an unknown capability', ['--capabilities', 'Consle'], /--capabilities Consle is not a capability of 4\.16\.3; use one of baremetal, /],
    ['a capability newer than the release', ['--capabilities', 'OperatorLifecycleManagerV1'], /--capabilities OperatorLifecycleManagerV1 is not a capability of 4\.16\.3; use one of baremetal, /],
    ['an OS stream the release lacks', ['--os-stream', 'rhel-10'], /--os-stream rhel-10 is not a node OS stream of this release; it carries rhel-coreos$/m],
    ['--feature-gates on a release without FeatureGate manifests', ['--feature-gates', 'ClusterAPIMachineManagement'], /--feature-gates ClusterAPIMachineManagement: the release carries no FeatureGate manifest for profile self-managed-high-availability, so it names no gates to set; drop --feature-gates$/m],
    ['--feature-gates with another feature set', ['--feature-gates', 'X', '--feature-set', 'TechPreviewNoUpgrade'], /--feature-gates sets feature set CustomNoUpgrade, but --feature-set is TechPreviewNoUpgrade; drop one of them$/m],
    ['an architecture the single-arch release does not have', ['--arch', 'arm64'], /is a single-architecture release for amd64, not arm64; plan it with --arch amd64, or plan the -multi release$/m],
    ['an unknown architecture', ['--arch', 'sparc'], /--arch sparc is not an OpenShift architecture; use one of amd64, arm64, ppc64le, s390x$/m],
    ['conflicting overrides', ['--all-nodes', 'console', '--control-plane-only', 'console'], /--control-plane-only and --all-nodes both name console; name each component in one of them$/m],
  ])('refuses %s with exit 2 and one line', async (_label, args, message) => {
    const r = await runCli(['plan', RELEASE, ...mirror, ...args]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('plan options', () => {
  it('adds extra images by tag, resolved to digests, for the chosen role', async () => {
    const file = join(await tempDir('prestage-extra-'), 'images.txt');
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
    const all = truth.components.find((c) => c.role === 'none' && c.placement === 'unreferenced')!;
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
    const planned = truth.multi.components.filter((c) => plan.images.some((i) => i.digest === c.listDigest));
    // The rest are tools no manifest runs (installer, must-gather, ...): listed as skipped.
    expect(planned.length + plan.skipped.length).toBe(truth.multi.components.length);
    expect(planned.length).toBeGreaterThan(truth.multi.components.length / 2);
    for (const c of planned) {
      const image = plan.images.find((i) => i.digest === c.listDigest)!;
      expect(image.pullSpec, c.name).toBe(c.pullSpec);
      expect(image.diskBytes, c.name).toBe(c.perArch.arm64.layers.reduce((a, l) => a + l.uncompressedSize, 0));
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
    expect(help.stdout).toContain('kubectl prestage plan [release]');
  });

  it('plans as a real process', async () => {
    const r = await runBin('prestage', ['plan', RELEASE, ...mirror, '-o', 'json']);
    expect(r.code).toBe(0);
    expect((JSON.parse(r.stdout) as Plan).sets).toHaveLength(2);
  });
});
