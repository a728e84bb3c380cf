/**
 * The contract of the later-era fixtures (fixtures/eras.ts): a 4.20-style and a 5.0-style release,
 * deterministic, pushable, whose manifests carry exactly the inclusion annotations the truth
 * declares, whose FeatureGate manifests have the real shape, and whose truth tables have the
 * properties the CVO's rules imply. Pure: no registry, no test bed.
 */
import { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import yaml from 'js-yaml';
import tar from 'tar-stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { componentBuild } from '../fixtures/component-images.js';
import {
  BOTH_ANNOTATIONS_COMPONENT, CAPI_COMPONENTS, COMPATIBILITY_COMPONENT, EMPTY_FEATURE_SET_COMPONENT, ERAS, GATEWAY_WITH_OLM_COMPONENT,
  GATEWAY_WITHOUT_OLM_COMPONENT, SCENARIOS, SCENARIO_NAMES, buildEraFixture, clearEraLayerCache, eraComponents, isApplied, scenarioContext,
  type Era, type EraComponentTruth, type EraFixture, type ManifestReference,
} from '../fixtures/eras.js';
import { MediaTypes, sha256 } from '../fixtures/image.js';
import { COMPONENTS } from '../fixtures/components.js';
import type { ImageConfigDocument, ImageStreamDocument, KubeDocument, ManifestDocument } from './support/documents.js';

const fixtures = {} as Record<Era, EraFixture>;
beforeAll(() => {
  for (const era of ERAS) fixtures[era] = buildEraFixture(era);
});

const VERSIONS: Record<Era, string> = { '4.20': '4.20.8', '5.0': '5.0.2' };

async function readTar(gzip: Buffer): Promise<Map<string, Buffer>> {
  const extract = tar.extract();
  Readable.from([gunzipSync(gzip)]).pipe(extract);
  const files = new Map<string, Buffer>();
  for await (const entry of extract) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    if (entry.header.type === 'file') files.set(entry.header.name.replace(/^release-manifests\//, ''), Buffer.concat(chunks));
  }
  return files;
}

const manifestFiles = new Map<Era, Map<string, Buffer>>();
async function filesOf(era: Era): Promise<Map<string, Buffer>> {
  let files = manifestFiles.get(era);
  if (!files) {
    files = await readTar(fixtures[era].blobs.get(fixtures[era].truth.release.manifestsLayer.digest)!);
    manifestFiles.set(era, files);
  }
  return files;
}

function json<T>(bytes: Buffer): T {
  return JSON.parse(bytes.toString('utf8')) as T;
}

function byName(era: Era, name: string): EraComponentTruth {
  const c = fixtures[era].truth.components.find((x) => x.name === name);
  if (!c) throw new Error(`${era} has no ${name}`);
  return c;
}

const names = (era: Era, pullSpecs: readonly string[]): string[] => {
  const of = new Map(fixtures[era].truth.components.map((c) => [c.pullSpec, c.name]));
  return pullSpecs.map((p) => of.get(p) ?? p).sort();
};

describe.each(ERAS)('the %s fixture', (era) => {
  it('is byte-identical when built again from scratch', () => {
    const first = fixtures[era];
    clearEraLayerCache();
    const again = buildEraFixture(era);
    expect(JSON.stringify(again.truth)).toBe(JSON.stringify(first.truth));
    expect([...again.blobs.keys()]).toEqual([...first.blobs.keys()]);
    for (const [digest, bytes] of again.blobs) expect(bytes.equals(first.blobs.get(digest)!), digest).toBe(true);
    const shape = (f: EraFixture) => f.repositories.map((r) => [r.name, r.blobs, r.manifests.map((m) => m.digest), r.tags]);
    expect(shape(again)).toEqual(shape(first));
    // How quick a build is once layers are known: `npm run bench:harness` (warm against cold).
  });

  it('names every blob and manifest by its sha256 and gives each repository what its manifests reference', () => {
    const f = fixtures[era];
    for (const [digest, bytes] of f.blobs) expect(sha256(bytes)).toBe(digest);
    for (const repo of f.repositories) {
      const held = new Set(repo.blobs);
      for (const m of repo.manifests) {
        expect(sha256(m.bytes)).toBe(m.digest);
        const doc = json<ManifestDocument>(m.bytes);
        for (const d of [doc.config, ...doc.layers]) {
          expect(held.has(d.digest)).toBe(true);
          expect(f.blobs.get(d.digest)!.length).toBe(d.size);
        }
      }
    }
    expect(f.repositories.map((r) => r.name)).toEqual(['openshift-release-dev/ocp-v4.0-art-dev', 'openshift-release-dev/ocp-release']);
  });

  it('is a single-arch Docker schema2 release image: the CVO image plus release-manifests/, tagged <version>-x86_64', async () => {
    const { truth, repositories } = fixtures[era];
    const version = VERSIONS[era];
    expect(truth.release.version).toBe(version);
    expect(truth.release.tag).toBe(`${version}-x86_64`);
    expect(repositories[1]!.tags).toEqual([{ tag: `${version}-x86_64`, digest: truth.release.image.digest }]);
    expect(truth.release.image.mediaType).toBe(MediaTypes.dockerManifest);
    const cvo = byName(era, 'cluster-version-operator');
    expect(truth.release.image.layers.slice(0, -1)).toEqual(cvo.layers);
    expect(truth.release.image.layers.at(-1)).toEqual(truth.release.manifestsLayer);
    const labels = json<ImageConfigDocument>(fixtures[era].blobs.get(truth.release.image.config.digest)!).config.Labels;
    expect(labels['io.openshift.release']).toBe(version);
    expect(labels['io.openshift.release.base-image-digest']).toBe(cvo.digest);
    const files = await filesOf(era);
    expect([...files.keys()].sort()).toEqual(truth.release.manifestFiles);
    const meta = json<{ kind: string; version: string; previous: string[]; metadata: Record<string, string | undefined> }>(files.get('release-metadata')!);
    expect(meta.kind).toBe('cincinnati-metadata-v0');
    expect(meta.version).toBe(version);
    expect(meta.previous).toEqual(truth.release.previous);
    expect(meta.metadata['io.openshift.upgrades.graph.release.channels']!.split(',')).toContain(`stable-${era}`);
    expect(meta.metadata['release.openshift.io/architecture']).toBeUndefined();
  });

  it('lists every component in image-references by digest, the second OS stream included', async () => {
    const refs = json<ImageStreamDocument>((await filesOf(era)).get('image-references')!);
    expect(refs.kind).toBe('ImageStream');
    expect(refs.apiVersion).toBe('image.openshift.io/v1');
    expect(refs.metadata.name).toBe(VERSIONS[era]);
    const tags = refs.spec.tags as { name: string; from: { kind: string; name: string }; annotations: Record<string, string> }[];
    const { components } = fixtures[era].truth;
    expect(tags.map((t) => t.name)).toEqual(components.map((c) => c.name).sort());
    for (const c of components) {
      const tag = tags.find((t) => t.name === c.name)!;
      expect(tag.from).toEqual({ kind: 'DockerImage', name: c.pullSpec });
      expect(tag.annotations['io.openshift.build.commit.id']).toBe(c.commit);
      expect(tag.annotations['io.openshift.build.source-location']).toBe(c.source);
    }
    for (const name of ['rhel-coreos', 'rhel-coreos-extensions', 'rhel-coreos-10', 'rhel-coreos-10-extensions']) expect(tags.map((t) => t.name)).toContain(name);
    expect(byName(era, 'rhel-coreos-10').source).toBe('https://github.com/openshift/os');
    expect(tags.find((t) => t.name === 'rhel-coreos-10')!.annotations['io.openshift.build.versions']).toMatch(/^machine-os=10\./);
  });

  it('rebuilds every component (other commits and digests than 4.16 and the other era) on the shared layers', () => {
    const other = fixtures[era === '4.20' ? '5.0' : '4.20'].truth.components;
    const commits416 = new Map(COMPONENTS.map((c) => [c.name, componentBuild(c).commit]));
    for (const c of fixtures[era].truth.components) {
      if (commits416.has(c.name)) expect(c.commit, c.name).not.toBe(commits416.get(c.name));
      const same = other.find((o) => o.name === c.name);
      if (same) {
        expect(c.digest, c.name).not.toBe(same.digest);
        expect(c.layers, c.name).toEqual(same.layers);
      }
    }
  });

  it('ships node OS images of two streams, labelled as bootc images, each as big as the biggest component', () => {
    const { components } = fixtures[era].truth;
    const size = (c: EraComponentTruth) => c.layers.reduce((n, l) => n + l.size, 0);
    // Bytes not shared with any other component: the OS images share nothing, the rest their base layers.
    const users = new Map<string, number>();
    for (const c of components) for (const l of c.layers) users.set(l.digest, (users.get(l.digest) ?? 0) + 1);
    const own = (c: EraComponentTruth) => c.layers.filter((l) => users.get(l.digest) === 1).reduce((n, l) => n + l.size, 0);
    const owns = components.filter((c) => c.osStream === undefined).map(own).sort((a, b) => a - b);
    const median = owns[Math.floor(owns.length / 2)]!;
    for (const [name, stream, extensions] of [['rhel-coreos', 'rhel-9', false], ['rhel-coreos-extensions', 'rhel-9', true], ['rhel-coreos-10', 'rhel-10', false], ['rhel-coreos-10-extensions', 'rhel-10', true]] as const) {
      const c = byName(era, name);
      expect(c.osStream).toBe(stream);
      expect(c.mediaType).toBe(MediaTypes.ociManifest);
      const labels = json<ImageConfigDocument>(fixtures[era].blobs.get(c.config.digest)!).config.Labels;
      expect(labels['io.openshift.os.streamclass']).toBe(stream);
      expect(labels['containers.bootc']).toBe('1');
      expect(labels['io.openshift.os.extensions']).toBe(extensions ? 'true' : undefined);
      if (!extensions) expect(size(c), name).toBeGreaterThan(4 * 2 ** 20);
      if (!extensions) expect(own(c), name).toBeGreaterThan(50 * median);
    }
    expect(Math.abs(size(byName(era, 'rhel-coreos-10')) - size(byName(era, 'rhel-coreos'))) / size(byName(era, 'rhel-coreos'))).toBeLessThan(0.1);
    const biggest = [...components].sort((a, b) => size(b) - size(a)).slice(0, 2).map((c) => c.name).sort();
    expect(biggest).toEqual(['rhel-coreos', 'rhel-coreos-10']);
  });
});

/** Every reference to a digest in the manifests, as the truth's ManifestReference less `runs`. */
async function referencesInManifests(era: Era): Promise<Map<string, Omit<ManifestReference, 'runs'>[]>> {
  const refs = new Map<string, Omit<ManifestReference, 'runs'>[]>();
  for (const [file, bytes] of await filesOf(era)) {
    if (!file.endsWith('.yaml')) continue;
    for (const doc of yaml.loadAll(bytes.toString('utf8')) as Array<KubeDocument<ManifestReference['kind']>>) {
      const a: Record<string, string> = doc.metadata?.annotations ?? {};
      const inclusion = {
        profiles: Object.keys(a).filter((k) => k.startsWith('include.release.openshift.io/') && a[k] === 'true').map((k) => k.slice('include.release.openshift.io/'.length)).sort(),
        ...('release.openshift.io/feature-set' in a ? { featureSet: a['release.openshift.io/feature-set'] } : {}),
        ...('release.openshift.io/feature-gate' in a ? { featureGate: a['release.openshift.io/feature-gate'] } : {}),
        ...('capability.openshift.io/name' in a ? { capability: a['capability.openshift.io/name'] } : {}),
        ...(a['exclude.release.openshift.io/internal-openshift-hosted'] === 'true' ? { hostedExclude: true as const } : {}),
      };
      const add = (text: string, where: ManifestReference['where']) => {
        for (const m of text.matchAll(/@(sha256:[0-9a-f]{64})/g)) {
          refs.set(m[1]!, [...(refs.get(m[1]!) ?? []), { kind: doc.kind, name: doc.metadata.name, where, ...inclusion }]);
        }
      };
      const pod = doc.spec?.template?.spec;
      if (pod) {
        for (const c of pod.containers ?? []) {
          add(c.image, 'container');
          for (const e of c.env ?? []) if (typeof e.value === 'string') add(e.value, 'env');
          for (const arg of c.args ?? []) add(arg, 'args');
        }
        for (const c of pod.initContainers ?? []) add(c.image, 'initContainer');
      } else if (doc.kind === 'ConfigMap') {
        for (const [key, value] of Object.entries<string>(doc.data ?? {})) add(value, key === 'images.json' ? 'images.json' : 'data');
      } else {
        add(JSON.stringify(doc), 'data');
      }
    }
  }
  return refs;
}

const canonical = (refs: readonly Omit<ManifestReference, 'runs'>[]): string[] =>
  refs.map((r) => JSON.stringify({ kind: r.kind, name: r.name, where: r.where, profiles: [...r.profiles].sort(), featureSet: r.featureSet, featureGate: r.featureGate, capability: r.capability, hostedExclude: r.hostedExclude })).sort();

describe('the manifests carry exactly the annotations the truth declares', () => {
  it.each(ERAS)('%s: every document naming a component, with its profiles, feature set, feature gate and capability', async (era) => {
    const found = await referencesInManifests(era);
    const components = fixtures[era].truth.components;
    for (const c of components) {
      expect(canonical(found.get(c.digest) ?? []), c.name).toEqual(canonical(c.references));
      const primary = c.references[0];
      if (primary) expect({ profiles: c.profiles, featureSet: c.featureSet, featureGate: c.featureGate, capability: c.capability }).toEqual({ profiles: primary.profiles, featureSet: primary.featureSet, featureGate: primary.featureGate, capability: primary.capability });
    }
    const known = new Set(components.map((c) => c.digest));
    expect([...found.keys()].filter((d) => !known.has(d))).toEqual([]);
  });

  it.each(ERAS)('%s: MCO names its own image only in its master-pinned Deployment and images.json, the OS images only in machine-config-osimageurl', async (era) => {
    const files = await filesOf(era);
    const docs = yaml.loadAll(files.get('0000_80_machine-config_03_configmap.yaml')!.toString('utf8')) as KubeDocument[];
    const images = JSON.parse(docs.find((d) => d.metadata.name === 'machine-config-operator-images')!.data!['images.json']!) as Record<string, string | undefined>;
    expect(images.machineConfigOperator).toBe(byName(era, 'machine-config-operator').pullSpec);
    expect(images.infraImage).toBe(byName(era, 'pod').pullSpec);
    expect(images.dockerRegistryImage).toBe(era === '5.0' ? byName(era, 'docker-registry').pullSpec : undefined);
    const osimageurl = docs.find((d) => d.metadata.name === 'machine-config-osimageurl')!.data!;
    expect(osimageurl.baseOSContainerImage).toBe(byName(era, 'rhel-coreos').pullSpec);
    expect(osimageurl.baseOSExtensionsContainerImage).toBe(byName(era, 'rhel-coreos-extensions').pullSpec);
    expect(byName(era, 'rhel-coreos-10').references).toEqual([]);
    expect(byName(era, 'rhel-coreos-10-extensions').references).toEqual([]);
    const mco = byName(era, 'machine-config-operator');
    expect(mco.references.map((r) => `${r.kind}/${r.name}/${r.where}`)).toEqual(['Deployment/machine-config-operator/container', 'ConfigMap/machine-config-operator-images/images.json']);
    expect(mco.profiles).toEqual(['self-managed-high-availability', 'single-node-developer']);
    expect(mco.runs).toBe('all');
    expect([...files.keys()].filter((f) => f.startsWith('0000_80_machine-config_') && f.includes('daemonset'))).toEqual([]);
  });

  it('4.20: OLM v1 under OperatorLifecycleManagerV1, no SDN, no platform operators or rukpak, Cluster API TechPreviewNoUpgrade', () => {
    const names420 = fixtures['4.20'].truth.components.map((c) => c.name);
    for (const gone of ['sdn', 'kube-proxy', 'cluster-platform-operators-manager', 'olm-rukpak']) expect(names420).not.toContain(gone);
    for (const name of ['cluster-olm-operator', 'olm-catalogd', 'olm-operator-controller']) {
      const c = byName('4.20', name);
      expect(c.placement, name).toBe('control-plane-deployment');
      expect(c.capability, name).toBe('OperatorLifecycleManagerV1');
      expect(c.featureSet, name).toBeUndefined();
    }
    for (const name of CAPI_COMPONENTS) expect([byName('4.20', name).featureSet, byName('4.20', name).featureGate], name).toEqual(['TechPreviewNoUpgrade', undefined]);
  });

  it('5.0: Cluster API and CompatibilityRequirements by gate and capability, a negative gate, both annotations, an empty feature set', () => {
    for (const name of CAPI_COMPONENTS) {
      const c = byName('5.0', name);
      expect([c.featureSet, c.featureGate, c.capability], name).toEqual([undefined, 'ClusterAPIMachineManagement', 'ClusterAPI']);
    }
    const compat = byName('5.0', COMPATIBILITY_COMPONENT);
    expect([compat.featureSet, compat.featureGate, compat.capability]).toEqual([undefined, 'CRDCompatibilityRequirementOperator', 'CompatibilityRequirements']);
    expect(byName('5.0', GATEWAY_WITH_OLM_COMPONENT).featureGate).toBe('-GatewayAPIWithoutOLM');
    expect(byName('5.0', GATEWAY_WITHOUT_OLM_COMPONENT).featureGate).toBe('GatewayAPIWithoutOLM');
    const both = byName('5.0', BOTH_ANNOTATIONS_COMPONENT);
    expect(both.featureSet).toBe('TechPreviewNoUpgrade');
    expect(both.featureGate).toBeDefined();
    expect(byName('5.0', EMPTY_FEATURE_SET_COMPONENT).featureSet).toBe('');
    for (const name of [GATEWAY_WITH_OLM_COMPONENT, GATEWAY_WITHOUT_OLM_COMPONENT, BOTH_ANNOTATIONS_COMPONENT, EMPTY_FEATURE_SET_COMPONENT, COMPATIBILITY_COMPONENT]) {
      expect(byName('5.0', name).references, name).toHaveLength(1);
      expect(fixtures['4.20'].truth.components.map((c) => c.name), name).not.toContain(name);
    }
    const registry = byName('5.0', 'cluster-image-registry-operator');
    expect(registry.placement).toBe('operator-own-image');
    expect(registry.references.map((r) => `${r.kind}/${r.where}/${r.profiles.join(',')}`)).toEqual([
      'Deployment/container/self-managed-high-availability,single-node-developer',
      'Deployment/env/self-managed-high-availability,single-node-developer',
      'Deployment/container/ibm-cloud-managed',
    ]);
    expect(registry.runs).toBe('all');
  });
});

describe('the FeatureGate manifests', () => {
  const REQUIRED = ['ClusterAPIMachineManagement', 'CRDCompatibilityRequirementOperator', 'GatewayAPIWithoutOLM', 'OSStreams'];

  it.each(ERAS)('%s: one FeatureGate "cluster" per profile and feature set, in the shape of openshift/api payload-manifests/featuregates', async (era) => {
    const files = await filesOf(era);
    const gateFiles = [...files.keys()].filter((f) => f.includes('featuregate')).sort();
    const sets = era === '5.0' ? ['Default', 'DevPreviewNoUpgrade', 'OKD', 'TechPreviewNoUpgrade'] : ['Default', 'DevPreviewNoUpgrade', 'TechPreviewNoUpgrade'];
    expect(gateFiles).toEqual(['Hypershift', 'SelfManagedHA'].flatMap((p) => sets.map((s) => `0000_05_config-operator_01_featuregate-${p}-${s}.yaml`)));
    for (const file of gateFiles) {
      const text = files.get(file)!.toString('utf8');
      const doc = JSON.parse(text);
      expect(yaml.load(text)).toEqual(doc);
      const [, profileWord, featureSet] = /featuregate-(\w+)-(\w+)\.yaml$/.exec(file)!;
      const profile = profileWord === 'SelfManagedHA' ? 'self-managed-high-availability' : 'ibm-cloud-managed';
      expect(Object.keys(doc)).toEqual(['apiVersion', 'kind', 'metadata', 'spec', 'status']);
      expect(doc.apiVersion).toBe('config.openshift.io/v1');
      expect(doc.kind).toBe('FeatureGate');
      expect(doc.metadata).toEqual({
        annotations: {
          [`include.release.openshift.io/${profile}`]: 'false-except-for-the-config-operator',
          'release.openshift.io/feature-set': featureSet,
          ...(era === '5.0' ? { 'release.openshift.io/major-version': '4,5,6,7,8,9,10' } : {}),
        },
        name: 'cluster',
      });
      expect(doc.spec).toEqual({});
      expect(doc.status.featureGates).toHaveLength(1);
      const entry = doc.status.featureGates[0];
      expect(Object.keys(entry)).toEqual(['disabled', 'enabled', 'version']);
      expect(entry.version).toBe('');
      const enabled = entry.enabled.map((g: { name: string }) => g.name);
      const disabled = entry.disabled.map((g: { name: string }) => g.name);
      for (const list of [enabled, disabled]) expect(list).toEqual([...list].sort());
      expect(enabled.filter((g: string) => disabled.includes(g))).toEqual([]);
      const all = [...enabled, ...disabled];
      expect(all.length).toBeGreaterThanOrEqual(30);
      expect(all.length).toBeLessThanOrEqual(60);
      for (const gate of REQUIRED) expect(all, `${file} ${gate}`).toContain(gate);
      const tp = featureSet === 'TechPreviewNoUpgrade' || featureSet === 'DevPreviewNoUpgrade';
      expect(enabled.includes('ClusterAPIMachineManagement'), file).toBe(tp);
      expect(enabled.includes('CRDCompatibilityRequirementOperator'), file).toBe(tp);
      // As at openshift/api main: GatewayAPIWithoutOLM and OSStreams are on in every 5.0 set.
      expect(enabled.includes('GatewayAPIWithoutOLM'), file).toBe(era === '5.0' || tp);
      expect(enabled.includes('OSStreams'), file).toBe(era === '5.0' || tp);
      const truth = fixtures[era].truth.featureGates.find((s) => s.profile === profile && s.featureSet === featureSet)!;
      expect([truth.enabled, truth.disabled]).toEqual([enabled, disabled]);
    }
  });
});

describe('the CVO inclusion evaluator', () => {
  const ctx = (era: Era, name: (typeof SCENARIO_NAMES)[number]) => scenarioContext(era, SCENARIOS.find((s) => s.name === name)!);
  const sm = ['self-managed-high-availability', 'single-node-developer'];

  it('wants the profile, a known feature-set list that holds the cluster\'s, every capability', () => {
    for (const era of ERAS) {
      const d = ctx(era, 'Default');
      expect(isApplied({ profiles: sm }, d)).toBe(true);
      expect(isApplied({ profiles: ['ibm-cloud-managed'] }, d)).toBe(false);
      expect(isApplied({ profiles: sm, featureSet: '' }, d)).toBe(false);
      expect(isApplied({ profiles: sm, featureSet: 'Bogus' }, d)).toBe(false);
      expect(isApplied({ profiles: sm, featureSet: 'Default,TechPreviewNoUpgrade' }, d)).toBe(true);
      expect(isApplied({ profiles: sm, featureSet: 'Default,TechPreviewNoUpgrade' }, ctx(era, 'TechPreviewNoUpgrade'))).toBe(true);
      expect(isApplied({ profiles: sm, featureSet: 'TechPreviewNoUpgrade' }, d)).toBe(false);
      expect(isApplied({ profiles: sm, capability: 'Storage+CloudCredential' }, d)).toBe(true);
      expect(isApplied({ profiles: sm, capability: 'Storage+Bogus' }, d)).toBe(false);
      expect(isApplied({ profiles: sm, capability: 'Storage' }, ctx(era, 'None'))).toBe(false);
      expect(isApplied({ profiles: sm, hostedExclude: true }, d)).toBe(true);
    }
    expect(isApplied({ profiles: sm, featureSet: 'OKD' }, ctx('4.20', 'Default'))).toBe(false);
  });

  it('reads feature gates only in 5.0: A,-B, never with a feature set beside', () => {
    const d420 = ctx('4.20', 'Default');
    const d50 = ctx('5.0', 'Default');
    const tp50 = ctx('5.0', 'TechPreviewNoUpgrade');
    expect(isApplied({ profiles: sm, featureGate: 'ClusterAPIMachineManagement' }, d420)).toBe(true);
    expect(isApplied({ profiles: sm, featureGate: 'ClusterAPIMachineManagement' }, d50)).toBe(false);
    expect(isApplied({ profiles: sm, featureGate: 'ClusterAPIMachineManagement' }, tp50)).toBe(true);
    expect(isApplied({ profiles: sm, featureGate: 'OSStreams,-ClusterAPIMachineManagement' }, d50)).toBe(true);
    expect(isApplied({ profiles: sm, featureGate: 'OSStreams,-ClusterAPIMachineManagement' }, tp50)).toBe(false);
    expect(isApplied({ profiles: sm, featureSet: 'TechPreviewNoUpgrade', featureGate: 'OSStreams' }, ctx('4.20', 'TechPreviewNoUpgrade'))).toBe(true);
    expect(isApplied({ profiles: sm, featureSet: 'TechPreviewNoUpgrade', featureGate: 'OSStreams' }, tp50)).toBe(false);
  });

  it('knows ClusterAPI and CompatibilityRequirements in 5.0 only while their gates are on, OperatorLifecycleManagerV1 from 4.20', () => {
    expect(ctx('4.20', 'Default').knownCapabilities).toHaveLength(17);
    expect(ctx('4.20', 'Default').enabledCapabilities).toContain('OperatorLifecycleManagerV1');
    expect(ctx('4.20', 'Default').knownCapabilities).not.toContain('ClusterAPI');
    expect(ctx('5.0', 'Default').knownCapabilities).toHaveLength(17);
    expect(ctx('5.0', 'TechPreviewNoUpgrade').knownCapabilities).toHaveLength(19);
    expect(ctx('5.0', 'TechPreviewNoUpgrade').enabledCapabilities).toEqual(expect.arrayContaining(['ClusterAPI', 'CompatibilityRequirements']));
    expect(ctx('5.0', 'None').enabledCapabilities).toEqual([]);
    expect(ctx('5.0', 'HyperShift').enabledGates).toContain('HyperShiftOnlyDynamicResourceAllocation');
    expect(isApplied({ profiles: sm, capability: 'ClusterAPI' }, ctx('5.0', 'Default'))).toBe(false);
    expect(isApplied({ profiles: sm, capability: 'ClusterAPI' }, ctx('5.0', 'TechPreviewNoUpgrade'))).toBe(true);
  });
});

describe('the truth tables', () => {
  const pullSpecs = (era: Era, list: readonly string[]) => list.map((n) => byName(era, n).pullSpec).sort();
  const minus = (a: readonly string[], b: readonly string[]) => a.filter((x) => !b.includes(x)).sort();

  it('4.20: TechPreviewNoUpgrade adds exactly the 10 Cluster API images to Default', () => {
    const s = fixtures['4.20'].truth.scenarios;
    expect(CAPI_COMPONENTS).toHaveLength(10);
    expect(minus(s.TechPreviewNoUpgrade.applied, s.Default.applied)).toEqual(pullSpecs('4.20', CAPI_COMPONENTS));
    expect(minus(s.Default.applied, s.TechPreviewNoUpgrade.applied)).toEqual([]);
  });

  it('5.0: TechPreviewNoUpgrade adds exactly the 10 Cluster API images and the CompatibilityRequirements image', () => {
    const s = fixtures['5.0'].truth.scenarios;
    expect(minus(s.TechPreviewNoUpgrade.applied, s.Default.applied)).toEqual(pullSpecs('5.0', [...CAPI_COMPONENTS, COMPATIBILITY_COMPONENT]));
    expect(minus(s.Default.applied, s.TechPreviewNoUpgrade.applied)).toEqual([]);
  });

  it('5.0: the image of the GatewayAPIWithoutOLM manifest runs, that of -GatewayAPIWithoutOLM, both annotations or an empty feature set never', () => {
    const s = fixtures['5.0'].truth.scenarios;
    expect(s.Default.applied).toContain(byName('5.0', GATEWAY_WITHOUT_OLM_COMPONENT).pullSpec);
    expect(s.None.applied).not.toContain(byName('5.0', GATEWAY_WITHOUT_OLM_COMPONENT).pullSpec);
    for (const name of [GATEWAY_WITH_OLM_COMPONENT, BOTH_ANNOTATIONS_COMPONENT, EMPTY_FEATURE_SET_COMPONENT]) {
      for (const scenario of SCENARIO_NAMES) expect(s[scenario].applied, `${name} ${scenario}`).not.toContain(byName('5.0', name).pullSpec);
    }
  });

  it.each(ERAS)('%s: no scenario runs the rhel-10 stream; HyperShift runs no OS image at all; the others pin rhel-9 on every node', (era) => {
    const { scenarios, components } = fixtures[era].truth;
    const os = components.filter((c) => c.osStream !== undefined);
    const rhel10 = os.filter((c) => c.osStream === 'rhel-10');
    expect(rhel10.map((c) => c.name).sort()).toEqual(['rhel-coreos-10', 'rhel-coreos-10-extensions']);
    for (const name of SCENARIO_NAMES) {
      const s = scenarios[name];
      for (const c of rhel10) expect(s.applied, `${c.name} ${name}`).not.toContain(c.pullSpec);
      expect(s.osStreams.default).toBe('rhel-9');
      expect(s.osStreams.streams).toEqual({ 'rhel-9': ['rhel-coreos', 'rhel-coreos-extensions'], 'rhel-10': ['rhel-coreos-10', 'rhel-coreos-10-extensions'] });
      const unique = new Map(rhel10.flatMap((c) => c.layers.map((l) => [l.digest, l.uncompressedSize] as const)));
      expect(s.osStreams.bytesPerNode['rhel-10']).toBe([...unique.values()].reduce((a, b) => a + b, 0));
      expect(s.osStreams.bytesPerNode['rhel-10']).toBeGreaterThan(5 * 2 ** 20);
      const rhel9 = os.filter((c) => c.osStream === 'rhel-9').map((c) => c.pullSpec);
      if (name === 'HyperShift') {
        expect(s.applied.filter((p) => os.some((c) => c.pullSpec === p))).toEqual([]);
        expect(s.osStreams.pinned).toEqual([]);
        expect(s.applied).not.toContain(byName(era, 'machine-config-operator').pullSpec);
      } else {
        for (const p of rhel9) expect(s.roles.worker).toContain(p);
        expect(s.osStreams.pinned).toEqual(['rhel-9']);
        expect(s.roles.worker).toContain(byName(era, 'machine-config-operator').pullSpec);
      }
      expect(s.roles.worker, name).toContain(byName(era, 'pod').pullSpec);
    }
  });

  it.each(ERAS)('%s: capability set None runs no capability-gated image', (era) => {
    const { scenarios, components } = fixtures[era].truth;
    const none = scenarios.None;
    expect(none.enabledCapabilities).toEqual([]);
    for (const p of none.applied) {
      const c = components.find((x) => x.pullSpec === p)!;
      expect(c.references.some((r) => r.capability === undefined && r.runs !== 'never') || c.osStream !== undefined, c.name).toBe(true);
    }
    for (const c of components) {
      if (c.references.length > 0 && c.references.every((r) => r.capability !== undefined)) expect(none.applied, c.name).not.toContain(c.pullSpec);
    }
    expect(none.applied.length).toBeLessThan(scenarios.Default.applied.length / 2);
  });

  it.each(ERAS)('%s: per-role truth on AWS: workers run what runs everywhere, control-plane nodes also the release image, nothing of another platform', (era) => {
    const { scenarios, components, release } = fixtures[era].truth;
    const releaseImage = `quay.io/openshift-release-dev/ocp-release@${release.image.digest}`;
    for (const name of SCENARIO_NAMES) {
      const { roles, applied } = scenarios[name];
      expect(roles.controlPlane).toContain(releaseImage);
      expect(roles.worker.every((p) => roles.controlPlane.includes(p)), name).toBe(true);
      for (const p of roles.controlPlane) {
        if (p === releaseImage) continue;
        expect(applied).toContain(p);
        const c = components.find((x) => x.pullSpec === p)!;
        expect(c.platforms === undefined || c.platforms.includes('AWS'), `${name} ${c.name}`).toBe(true);
      }
      for (const list of [applied, roles.worker, roles.controlPlane]) expect(list).toEqual([...new Set(list)].sort());
    }
    const d = scenarios.Default;
    expect(names(era, d.roles.worker)).toEqual(expect.arrayContaining(['aws-ebs-csi-driver', 'coredns', 'ovn-kubernetes', 'machine-config-operator', 'pod', 'rhel-coreos']));
    expect(names(era, d.roles.controlPlane)).toEqual(expect.arrayContaining(['etcd', 'hyperkube', 'aws-cloud-controller-manager']));
    expect(names(era, d.roles.worker)).not.toContain('etcd');
    expect(names(era, d.roles.controlPlane)).not.toContain('azure-cloud-controller-manager');
    if (era === '5.0') expect(names(era, d.roles.worker)).toContain('cluster-image-registry-operator');
    else expect(names(era, d.roles.worker)).not.toContain('cluster-image-registry-operator');
  });

  it.each(ERAS)('%s: a truth row per component, consistent with the scenarios', (era) => {
    const { components, scenarios } = fixtures[era].truth;
    expect(components.map((c) => c.name)).toEqual(eraComponents(era).map((c) => c.name));
    for (const c of components) {
      expect(c.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(c.pullSpec).toBe(`quay.io/openshift-release-dev/ocp-v4.0-art-dev@${c.digest}`);
      expect(c.reason.length, c.name).toBeGreaterThan(10);
      const inSome = SCENARIO_NAMES.some((s) => scenarios[s].applied.includes(c.pullSpec));
      if (c.runs === 'never') expect(inSome, c.name).toBe(false);
    }
  });
});
