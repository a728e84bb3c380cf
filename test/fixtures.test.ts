/**
 * The contract of the synthetic release fixture: deterministic bytes, the shape of a real
 * 4.16 payload, ground truth that matches what the manifests say, hostile inputs that are
 * hostile in exactly the documented way, and a push that a real registry accepts.
 */
import { Readable } from 'node:stream';
import { createGunzip, gunzipSync } from 'node:zlib';
import yaml from 'js-yaml';
import tar from 'tar-stream';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MediaTypes, sha256 } from '../fixtures/image.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { pushFixture } from '../fixtures/push.js';
import { liveTruth, simulatedCluster } from '../fixtures/live-cluster.js';
import { PROFILE_ANNOTATIONS } from '../fixtures/manifests.js';
import type { ImageConfigDocument, ImageStreamDocument, KubeDocument, ManifestDocument } from './support/documents.js';
import {
  ALIASES, COMPONENT_REPOSITORY, CURRENT_TAG, CURRENT_VERSION, MULTI_TAG, RELEASE_REPOSITORY, RELEASE_TAG, SKIPPED_TAG, VERSION,
  buildReleaseFixture, manifestsByDigest, summarizeFixture, type ComponentTruth, type ReleaseFixture,
} from '../fixtures/release.js';

let fixture: ReleaseFixture;
beforeAll(() => {
  fixture = buildReleaseFixture();
});

interface TarFile {
  readonly type: string;
  readonly data: Buffer;
  readonly linkname?: string;
}

async function readTar(gzip: Buffer): Promise<Map<string, TarFile>> {
  const extract = tar.extract();
  Readable.from([gunzipSync(gzip)]).pipe(extract);
  const files = new Map<string, TarFile>();
  for await (const entry of extract) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    files.set(entry.header.name, { type: entry.header.type ?? 'file', data: Buffer.concat(chunks), ...(entry.header.linkname ? { linkname: entry.header.linkname } : {}) });
  }
  return files;
}

function json<T>(bytes: Buffer): T {
  return JSON.parse(bytes.toString('utf8')) as T;
}

function manifest(digest: string): { bytes: Buffer; mediaType: string; doc: ManifestDocument } {
  const m = manifestsByDigest(fixture).get(digest);
  if (!m) throw new Error(`no manifest ${digest}`);
  return { bytes: m.bytes, mediaType: m.mediaType, doc: json(m.bytes) };
}

function blob(digest: string): Buffer {
  const b = fixture.blobs.get(digest);
  if (!b) throw new Error(`no blob ${digest}`);
  return b;
}

function lastLayerOf(imageDigest: string): Buffer {
  return blob(manifest(imageDigest).doc.layers.at(-1)!.digest);
}

function repository(name: string) {
  const repo = fixture.repositories.find((r) => r.name === name);
  if (!repo) throw new Error(`no repository ${name}`);
  return repo;
}

/**
 * Digests the docs quote. Layers are deflated by fflate (pinned in package.json), not by Node's
 * zlib, so they are the same on every Node.js build and CPU; a new fflate version may change them.
 */
const PINNED = {
  release: 'sha256:0cf6405341bcfe4e84d4f529aa78d245305bbdc6af98db69e722a08010856331',
  multi: 'sha256:98afe2b3076b12ea3888fa22399e65050a111808850357987880ed0aa513081e',
};

describe('determinism', () => {
  it('keeps the release digests the README quotes', () => {
    expect(fixture.truth.release.image.digest).toBe(PINNED.release);
    expect(fixture.truth.multi.listDigest).toBe(PINNED.multi);
  });

  it('generates byte-identical blobs, manifests and truth on every run', () => {
    const again = buildReleaseFixture();
    expect(JSON.stringify(again.truth)).toBe(JSON.stringify(fixture.truth));
    expect([...again.blobs.keys()]).toEqual([...fixture.blobs.keys()]);
    for (const [digest, bytes] of again.blobs) expect(bytes.equals(blob(digest))).toBe(true);
    const manifests = (f: ReleaseFixture) => f.repositories.map((r) => [r.name, r.manifests.map((m) => m.digest), r.tags]);
    expect(manifests(again)).toEqual(manifests(fixture));
  });
});

describe('shape of the payload', () => {
  it('has about 190 unique, real-looking component names', () => {
    const names = fixture.truth.components.map((c) => c.name);
    expect(names.length).toBeGreaterThanOrEqual(180);
    expect(names.length).toBeLessThanOrEqual(200);
    expect(new Set(names).size).toBe(names.length);
    for (const name of ['machine-config-operator', 'cluster-version-operator', 'etcd', 'hyperkube', 'ovn-kubernetes', 'rhel-coreos', 'rhel-coreos-extensions', 'haproxy-router', 'installer']) {
      expect(names).toContain(name);
    }
    for (const name of names) expect(name).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
  });

  it('makes 40-60 % of the components control-plane-only, like a real cluster', () => {
    const { components, controlPlaneOnly } = summarizeFixture(fixture);
    expect(controlPlaneOnly / components).toBeGreaterThanOrEqual(0.4);
    expect(controlPlaneOnly / components).toBeLessThanOrEqual(0.6);
  });

  it('covers every placement case several times', () => {
    const counts = new Map<string, number>();
    for (const c of fixture.truth.components) counts.set(c.placement, (counts.get(c.placement) ?? 0) + 1);
    for (const how of ['control-plane-deployment', 'daemonset', 'operand-env', 'operand-arg', 'deployment-anywhere', 'unreferenced', 'configmap-only', 'tech-preview-only']) {
      expect(counts.get(how), how).toBeGreaterThanOrEqual(3);
    }
    expect(counts.get('other-profile-only')).toBeGreaterThanOrEqual(2);
    expect(counts.get('node-os')).toBe(2);
    // Images that run on every node though a master-pinned Deployment names them: in a DaemonSet too,
    // as a sidecar, or as an operator's own image that the operator runs in a DaemonSet it creates.
    expect(counts.get('operator-own-image')).toBe(1);
    expect((counts.get('control-plane-and-daemonset') ?? 0) + (counts.get('sidecar') ?? 0) + (counts.get('operator-own-image') ?? 0)).toBeGreaterThanOrEqual(3);
  });

  it('shares three base layers across every component except the node OS images', () => {
    const [first] = fixture.truth.components;
    const base = first!.layers.slice(0, 3).map((l) => l.digest);
    for (const c of fixture.truth.components) {
      if (c.placement === 'node-os') expect(c.layers.some((l) => base.includes(l.digest))).toBe(false);
      else expect(c.layers.slice(0, 3).map((l) => l.digest)).toEqual(base);
    }
  });

  it('shares a middle layer among many images and gives each image one or two layers of its own', () => {
    const users = new Map<string, number>();
    for (const c of fixture.truth.components) for (const l of c.layers) users.set(l.digest, (users.get(l.digest) ?? 0) + 1);
    const middle = [...users.values()].filter((n) => n > 3 && n < fixture.truth.components.length - 2);
    expect(Math.max(...middle)).toBeGreaterThanOrEqual(fixture.truth.components.length / 4);
    for (const c of fixture.truth.components) {
      if (c.placement === 'node-os') continue;
      const own = c.layers.filter((l) => users.get(l.digest) === 1).length;
      expect(own, c.name).toBeGreaterThanOrEqual(1);
      expect(own, c.name).toBeLessThanOrEqual(2);
    }
  });

  it('makes rhel-coreos the biggest component and keeps the whole fixture small', () => {
    const size = (c: ComponentTruth) => c.layers.reduce((n, l) => n + l.size, 0);
    const biggest = [...fixture.truth.components].sort((a, b) => size(b) - size(a))[0]!;
    expect(biggest.name).toBe('rhel-coreos');
    expect(size(biggest)).toBeGreaterThan(2 * 2 ** 20);
    const { compressedBytes } = summarizeFixture(fixture);
    expect(compressedBytes).toBeGreaterThan(15 * 2 ** 20);
    expect(compressedBytes).toBeLessThan(40 * 2 ** 20);
  });

  it('uses Docker schema2 for most components and OCI for a sizable minority', () => {
    const oci = fixture.truth.components.filter((c) => c.mediaType === MediaTypes.ociManifest).length;
    const docker = fixture.truth.components.filter((c) => c.mediaType === MediaTypes.dockerManifest).length;
    expect(oci + docker).toBe(fixture.truth.components.length);
    expect(oci).toBeGreaterThan(fixture.truth.components.length * 0.15);
    expect(docker).toBeGreaterThan(oci);
  });
});

describe('bytes and digests', () => {
  it('names every blob and manifest by the sha256 of its bytes', () => {
    for (const [digest, bytes] of fixture.blobs) expect(sha256(bytes)).toBe(digest);
    for (const repo of fixture.repositories) for (const m of repo.manifests) expect(sha256(m.bytes)).toBe(m.digest);
  });

  it('gives every repository the blobs its manifests reference, with descriptor sizes that match', () => {
    for (const repo of fixture.repositories) {
      const held = new Set(repo.blobs);
      const manifests = new Set(repo.manifests.map((m) => m.digest));
      for (const m of repo.manifests) {
        const doc = json<ManifestDocument>(m.bytes);
        for (const d of doc.layers ? [doc.config, ...doc.layers] : []) {
          expect(held.has(d.digest), `${repo.name} ${d.digest}`).toBe(true);
          expect(blob(d.digest).length).toBe(d.size);
        }
        for (const child of doc.manifests ?? []) {
          expect(manifests.has(child.digest)).toBe(true);
          expect(manifest(child.digest).bytes.length).toBe(child.size);
        }
      }
    }
  });

  it('records uncompressed sizes that match each layer\'s gzip ISIZE trailer and diff id', () => {
    const layers = new Map<string, { uncompressedSize: number; diffId: string }>();
    for (const c of fixture.truth.components) for (const l of c.layers) layers.set(l.digest, l);
    for (const l of fixture.truth.release.image.layers) layers.set(l.digest, l);
    for (const [digest, l] of layers) {
      const bytes = blob(digest);
      expect(bytes.readUInt32LE(bytes.length - 4), digest).toBe(l.uncompressedSize % 2 ** 32);
      const tarBytes = gunzipSync(bytes);
      expect(tarBytes.length).toBe(l.uncompressedSize);
      expect(sha256(tarBytes)).toBe(l.diffId);
    }
  });

  it('lists the layers\' diff ids and the architecture in each image config', () => {
    for (const c of fixture.truth.components) {
      const config = json<ImageConfigDocument>(blob(c.config.digest));
      expect(config.rootfs.diff_ids).toEqual(c.layers.map((l) => l.diffId));
      expect(config.architecture).toBe('amd64');
      expect(config.config.Labels['io.openshift.build.commit.id']).toBe(c.commit);
      expect(config.config.Labels['io.openshift.build.source-location']).toBe(c.source);
    }
  });

  it('compresses component layers to 40-70 % of their size', () => {
    let size = 0;
    let uncompressed = 0;
    for (const c of fixture.truth.components) for (const l of c.layers.slice(3)) {
      size += l.size;
      uncompressed += l.uncompressedSize;
    }
    expect(size / uncompressed).toBeGreaterThan(0.4);
    expect(size / uncompressed).toBeLessThan(0.7);
  });
});

describe('the x86_64 release image', () => {
  it('is the CVO image plus one last layer, Docker schema2, labelled with the version and base image', () => {
    const { release, components } = fixture.truth;
    const cvo = components.find((c) => c.name === 'cluster-version-operator')!;
    expect(release.image.mediaType).toBe(MediaTypes.dockerManifest);
    expect(release.image.layers.slice(0, -1)).toEqual(cvo.layers);
    expect(release.image.layers.at(-1)).toEqual(release.manifestsLayer);
    const labels = json<ImageConfigDocument>(blob(release.image.config.digest)).config.Labels;
    expect(labels['io.openshift.release']).toBe(VERSION);
    expect(labels['io.openshift.release.base-image-digest']).toBe(cvo.digest);
    expect(repository(RELEASE_REPOSITORY).tags).toContainEqual({ tag: RELEASE_TAG, digest: release.image.digest });
  });

  it('holds release-manifests/ in its last layer, the biggest group of payload files', async () => {
    const files = await readTar(lastLayerOf(fixture.truth.release.image.digest));
    const names = [...files.keys()].filter((n) => files.get(n)!.type === 'file').map((n) => n.replace(/^release-manifests\//, ''));
    expect([...files.keys()].every((n) => n.startsWith('release-manifests/'))).toBe(true);
    expect(names.sort()).toEqual(fixture.truth.release.manifestFiles);
    expect(names.filter((n) => /^0000_\d\d_[a-z0-9-]+_.*\.yaml$/.test(n)).length).toBeGreaterThan(100);
    expect(names.some((n) => n.startsWith('0000_00_cluster-version-operator_'))).toBe(true);
    expect(fixture.truth.release.manifestsLayer.uncompressedSize).toBeGreaterThan(2 * 2 ** 20);
  });

  it('has an ImageStream image-references naming every component by digest, plus aliases and one non-DockerImage tag', async () => {
    const files = await readTar(lastLayerOf(fixture.truth.release.image.digest));
    const refs = json<ImageStreamDocument>(files.get('release-manifests/image-references')!.data);
    expect(refs.kind).toBe('ImageStream');
    expect(refs.apiVersion).toBe('image.openshift.io/v1');
    expect(refs.metadata.name).toBe(VERSION);
    const tags = refs.spec.tags as { name: string; from: { kind: string; name: string }; annotations: Record<string, string> }[];
    expect(tags.map((t) => t.name)).toEqual([...tags.map((t) => t.name)].sort());
    const byName = new Map(tags.map((t) => [t.name, t]));
    for (const c of fixture.truth.components) {
      const tag = byName.get(c.name)!;
      expect(tag.from).toEqual({ kind: 'DockerImage', name: `quay.io/${COMPONENT_REPOSITORY}@${c.digest}` });
      expect(tag.annotations['io.openshift.build.commit.id']).toBe(c.commit);
      expect(tag.annotations['io.openshift.build.source-location']).toBe(c.source);
    }
    for (const [alias, target] of Object.entries(ALIASES)) {
      expect(byName.get(alias)!.from.name).toBe(byName.get(target)!.from.name);
      expect(fixture.truth.components.find((c) => c.name === target)!.names).toContain(alias);
    }
    expect(byName.get(SKIPPED_TAG.name)!.from.kind).not.toBe('DockerImage');
    expect(tags.length).toBe(fixture.truth.components.length + Object.keys(ALIASES).length + 1);
  });

  it('has cincinnati release-metadata with previous versions and channels', async () => {
    const files = await readTar(lastLayerOf(fixture.truth.release.image.digest));
    const meta = json<unknown>(files.get('release-manifests/release-metadata')!.data);
    expect(meta).toEqual({
      kind: 'cincinnati-metadata-v0',
      version: VERSION,
      previous: fixture.truth.release.previous,
      metadata: { url: fixture.truth.release.url, 'io.openshift.upgrades.graph.release.channels': 'candidate-4.16,eus-4.16,fast-4.16,stable-4.16' },
    });
  });
});

/** Where a component's pullspec appears in the release manifests. */
interface Reference {
  readonly kind: string;
  readonly where: 'container' | 'initContainer' | 'env' | 'args' | 'data';
  readonly pinned: boolean;
  readonly defaultProfile: boolean;
}

async function referencesByDigest(): Promise<Map<string, Reference[]>> {
  const files = await readTar(lastLayerOf(fixture.truth.release.image.digest));
  const refs = new Map<string, Reference[]>();
  const add = (text: string, ref: Reference) => {
    for (const match of text.matchAll(/@(sha256:[0-9a-f]{64})/g)) refs.set(match[1]!, [...(refs.get(match[1]!) ?? []), ref]);
  };
  for (const [name, file] of files) {
    if (!name.endsWith('.yaml')) continue;
    for (const doc of yaml.loadAll(file.data.toString('utf8')) as KubeDocument[]) {
      const a = doc.metadata?.annotations ?? {};
      const defaultProfile = a[PROFILE_ANNOTATIONS.selfManaged] === 'true' && a[PROFILE_ANNOTATIONS.featureSet] === undefined;
      const pod = doc.spec?.template?.spec;
      if (!pod) {
        add(JSON.stringify(doc), { kind: doc.kind, where: 'data', pinned: false, defaultProfile });
        continue;
      }
      const selector = pod.nodeSelector ?? {};
      const pinned = doc.kind === 'Deployment' && ('node-role.kubernetes.io/master' in selector || 'node-role.kubernetes.io/control-plane' in selector);
      for (const c of pod.containers ?? []) {
        add(c.image, { kind: doc.kind, where: 'container', pinned, defaultProfile });
        for (const e of c.env ?? []) if (typeof e.value === 'string') add(e.value, { kind: doc.kind, where: 'env', pinned, defaultProfile });
        for (const arg of c.args ?? []) add(arg, { kind: doc.kind, where: 'args', pinned, defaultProfile });
      }
      for (const c of pod.initContainers ?? []) add(c.image, { kind: doc.kind, where: 'initContainer', pinned, defaultProfile });
    }
  }
  return refs;
}

describe('ground truth agrees with the manifests', () => {
  it('references each component exactly the way its placement says', async () => {
    const refs = await referencesByDigest();
    for (const c of fixture.truth.components) {
      const all = refs.get(c.digest) ?? [];
      const inDefault = all.filter((r) => r.defaultProfile);
      const workload = (r: Reference) => r.where === 'container' || r.where === 'initContainer';
      const label = `${c.name} (${c.placement})`;
      switch (c.placement) {
        case 'control-plane-deployment':
          expect(inDefault.length, label).toBeGreaterThan(0);
          expect(inDefault.every((r) => r.kind === 'Deployment' && r.pinned && workload(r)), label).toBe(true);
          break;
        case 'control-plane-and-daemonset':
        case 'sidecar':
          expect(inDefault.some((r) => r.kind === 'Deployment' && r.pinned && workload(r)), label).toBe(true);
          expect(inDefault.some((r) => r.kind === 'DaemonSet' && workload(r)), label).toBe(true);
          break;
        case 'operator-own-image':
          // As real manifests name MCO's image: its operator Deployment and its images.json, never a DaemonSet
          // (the operator creates machine-config-daemon from its own template); it still runs on every node.
          expect(inDefault.some((r) => r.kind === 'Deployment' && r.pinned && r.where === 'container'), label).toBe(true);
          expect(inDefault.some((r) => r.kind === 'ConfigMap' && r.where === 'data'), label).toBe(true);
          expect(all.every((r) => r.kind !== 'DaemonSet' && (r.kind === 'ConfigMap' || r.pinned)), label).toBe(true);
          expect(c.runs, label).toBe('all');
          break;
        case 'daemonset':
          expect(inDefault.length, label).toBeGreaterThan(0);
          expect(inDefault.every((r) => r.kind === 'DaemonSet' && workload(r)), label).toBe(true);
          break;
        case 'deployment-anywhere':
          expect(inDefault.some((r) => r.kind === 'Deployment' && !r.pinned && r.where === 'container'), label).toBe(true);
          break;
        case 'operand-env':
        case 'operand-arg':
          expect(inDefault.length, label).toBeGreaterThan(0);
          expect(inDefault.every((r) => r.where === (c.placement === 'operand-env' ? 'env' : 'args')), label).toBe(true);
          break;
        case 'configmap-only':
        case 'node-os':
          expect(inDefault.length, label).toBeGreaterThan(0);
          expect(inDefault.every((r) => r.kind === 'ConfigMap'), label).toBe(true);
          break;
        case 'other-profile-only':
        case 'tech-preview-only':
          expect(all.length, label).toBeGreaterThan(0);
          expect(inDefault, label).toEqual([]);
          break;
        case 'unreferenced':
          expect(all, label).toEqual([]);
          break;
      }
      expect(c.role, label).toBe(c.runs === 'never' ? 'none' : c.runs);
    }
  });

  it('names operands the way release-4.16 manifests do: env vars, --images= args and images.json keys', async () => {
    const files = await readTar(lastLayerOf(fixture.truth.release.image.digest));
    const text = (name: string) => files.get(name)!.data.toString('utf8');
    const digestOf = (name: string) => fixture.truth.components.find((c) => c.name === name)!.digest;
    const ccm = [...files.keys()].find((n) => n.startsWith('release-manifests/0000_26_cloud-controller-manager-operator_03_configmap'))!;
    const images = (yaml.loadAll(text(ccm)) as Array<{ data: Record<string, string> }>).find((d) => d.data['images.json'])!;
    expect(JSON.parse(images.data['images.json']!).cloudControllerManagerAWS).toMatch(new RegExp(`@${digestOf('aws-cloud-controller-manager')}$`));
    const storage = [...files.keys()].find((n) => n.startsWith('release-manifests/0000_50_cluster-storage-operator_04_deployment.yaml'))!;
    expect(text(storage)).toMatch(new RegExp(`name: AWS_EBS_DRIVER_IMAGE\\n\\s+value: \\S+@${digestOf('aws-ebs-csi-driver')}\\n`));
    const hosted = [...files.keys()].find((n) => n.startsWith('release-manifests/0000_20_kube-apiserver-operator_04_deployment'))!;
    expect(text(hosted)).toContain('exclude.release.openshift.io/internal-openshift-hosted: "true"');
    const mco = (yaml.loadAll(text('release-manifests/0000_80_machine-config_03_configmap.yaml')) as Array<{ metadata: { name: string }; data: Record<string, string> }>)
      .find((d) => d.metadata.name === 'machine-config-operator-images')!;
    expect(JSON.parse(mco.data['images.json']!).machineConfigOperator).toMatch(new RegExp(`@${digestOf('machine-config-operator')}$`));
    expect([...files.keys()].filter((n) => n.startsWith('release-manifests/0000_80_machine-config_') && n.includes('daemonset'))).toEqual([]);
  });

  it('has per-role truth from the truth columns: nothing of another platform or a disabled capability', () => {
    const byPullSpec = new Map(fixture.truth.components.map((c) => [c.pullSpec, c]));
    const { awsDefault, awsNone } = fixture.truth.roles;
    for (const p of [...awsDefault.worker, ...awsDefault.controlPlane]) {
      const c = byPullSpec.get(p);
      if (c) expect(c.platforms === undefined || c.platforms.includes('AWS'), c.name).toBe(true);
    }
    for (const p of awsNone.controlPlane) expect(byPullSpec.get(p)?.capability, p).toBeUndefined();
    expect(awsDefault.worker.every((p) => awsDefault.controlPlane.includes(p))).toBe(true);
    expect(awsDefault.worker.length).toBeGreaterThan(30);
    expect(awsDefault.worker.length).toBeLessThan(fixture.truth.components.length / 3);
  });

  it('includes unpinned ibm-cloud-managed copies of some control-plane Deployments', async () => {
    const refs = await referencesByDigest();
    const withCopies = fixture.truth.components.filter((c) => c.role === 'control-plane' && (refs.get(c.digest) ?? []).some((r) => !r.defaultProfile && !r.pinned));
    expect(withCopies.length).toBeGreaterThanOrEqual(3);
  });
});

describe('the current release (what a cluster runs before the upgrade) and the simulated cluster', () => {
  const nodes = [{ name: 'master-0', role: 'control-plane' as const }, { name: 'worker-0', role: 'worker' as const }, { name: 'worker-1', role: 'worker' as const }];

  it('has the same components less the new ones, the rebuilt ones under other digests, tagged 4.16.2', async () => {
    const { current, components } = fixture.truth;
    expect(repository(RELEASE_REPOSITORY).tags).toContainEqual({ tag: CURRENT_TAG, digest: current.digest });
    expect(current.components.map((c) => c.name).sort()).toEqual(components.map((c) => c.name).filter((n) => !current.newInTarget.includes(n)).sort());
    for (const c of current.components) {
      const target = components.find((t) => t.name === c.name)!;
      expect(c.digest === target.digest, c.name).toBe(!current.rebuiltInTarget.includes(c.name));
      expect(manifestsByDigest(fixture).has(c.digest), c.name).toBe(true);
    }
    const files = await readTar(lastLayerOf(current.digest));
    const refs = json<ImageStreamDocument>(files.get('release-manifests/image-references')!.data);
    expect(refs.metadata.name).toBe(CURRENT_VERSION);
    expect(refs.spec.tags.map((t) => t.from.name).sort()).toEqual(current.components.flatMap((c) => c.names.map(() => c.pullSpec)).sort());
    expect(json<ImageConfigDocument>(blob(manifest(current.digest).doc.config.digest)).config.Labels['io.openshift.release']).toBe(CURRENT_VERSION);
  });

  it('runs the current digests of what the truth columns say runs on AWS, by role, and nothing of the target', () => {
    const cluster = simulatedCluster(fixture.truth, nodes);
    const currentSpecs = new Set(fixture.truth.current.components.map((c) => c.pullSpec));
    const release = `quay.io/${RELEASE_REPOSITORY}@${fixture.truth.current.digest}`;
    for (const image of [...cluster.running.worker, ...cluster.running.controlPlane]) expect(currentSpecs.has(image) || image === release, image).toBe(true);
    const worker = (name: string) => cluster.running.worker.includes(fixture.truth.current.components.find((c) => c.name === name)!.pullSpec);
    const master = (name: string) => cluster.running.controlPlane.includes(fixture.truth.current.components.find((c) => c.name === name)!.pullSpec);
    expect([worker('coredns'), master('coredns')]).toEqual([true, true]);
    expect([worker('etcd'), master('etcd')]).toEqual([false, true]);
    expect([worker('cli-artifacts'), master('cli-artifacts')]).toEqual([true, false]);
    expect([worker('aws-ebs-csi-driver'), worker('azure-disk-csi-driver'), worker('sdn'), master('insights-operator'), master('console')]).toEqual([true, false, false, false, false]);
    expect(cluster.running.controlPlane).toContain(release);
    const bound = cluster.pods.filter((p) => p.spec.nodeName);
    expect(bound.every((p) => p.status.containerStatuses![0]!.imageID.startsWith('mirror.example.com:5000/'))).toBe(true);
    expect(cluster.pods.length - bound.length).toBe(1);
  });

  it('gives a live plan its per-role truth: the target digests of what runs, plus new components, pause and OS images', () => {
    const cluster = simulatedCluster(fixture.truth, nodes);
    const truth = liveTruth(fixture.truth, cluster);
    const pullSpec = (name: string) => fixture.truth.components.find((c) => c.name === name)!.pullSpec;
    for (const name of ['multus-networkpolicy', 'pod', 'rhel-coreos', 'coredns']) {
      expect(truth.worker, name).toContain(pullSpec(name));
      expect(truth.controlPlane, name).toContain(pullSpec(name));
    }
    expect(truth.controlPlane).toContain(pullSpec('console'));
    expect(truth.worker).not.toContain(pullSpec('etcd'));
    expect(truth.controlPlane).not.toContain(pullSpec('cli-artifacts'));
    expect(truth.controlPlane).toContain(`quay.io/${RELEASE_REPOSITORY}@${fixture.truth.release.image.digest}`);
  });
});

describe('the -multi release', () => {
  it('is a Docker manifest list of per-arch release images for amd64, arm64, ppc64le and s390x', () => {
    const list = manifest(fixture.truth.multi.listDigest);
    expect(list.mediaType).toBe(MediaTypes.dockerList);
    expect(list.doc.manifests.map((m) => m.platform?.architecture)).toEqual(['amd64', 'arm64', 'ppc64le', 's390x']);
    expect(repository(RELEASE_REPOSITORY).tags).toContainEqual({ tag: MULTI_TAG, digest: fixture.truth.multi.listDigest });
    for (const [arch, image] of Object.entries(fixture.truth.multi.perArch)) {
      expect(json<ImageConfigDocument>(blob(image.config.digest)).architecture).toBe(arch);
      expect(image.layers.at(-1)).toEqual(fixture.truth.multi.manifestsLayer);
    }
  });

  it('points image-references at component manifest lists, both Docker lists and OCI indexes', async () => {
    const files = await readTar(blob(fixture.truth.multi.manifestsLayer.digest));
    const refs = json<ImageStreamDocument>(files.get('release-manifests/image-references')!.data);
    const meta = json<{ metadata: Record<string, string> }>(files.get('release-manifests/release-metadata')!.data);
    expect(meta.metadata['release.openshift.io/architecture']).toBe('multi');
    const multi = fixture.truth.multi.components;
    expect(refs.spec.tags.map((t) => t.from.name).sort()).toEqual(multi.map((c) => c.pullSpec).sort());
    expect(new Set(multi.map((c) => c.listMediaType))).toEqual(new Set([MediaTypes.dockerList, MediaTypes.ociIndex]));
    for (const c of multi) {
      const amd64 = fixture.truth.components.find((x) => x.name === c.name)!;
      expect(c.perArch.amd64.digest).toBe(amd64.digest);
      expect(c.perArch.arm64.layers).toEqual(amd64.layers);
    }
  });
});

describe('bad inputs', () => {
  it('includes a plain image with no release-manifests/', async () => {
    const files = await readTar(lastLayerOf(fixture.truth.bad.notARelease.digest));
    expect([...files.keys()].some((n) => n.startsWith('release-manifests/'))).toBe(false);
  });

  it('includes image-references with the wrong kind, the wrong apiVersion and a tag instead of a digest', async () => {
    const refsOf = async (digest: string) => json<ImageStreamDocument>((await readTar(lastLayerOf(digest))).get('release-manifests/image-references')!.data);
    expect((await refsOf(fixture.truth.bad.wrongKind.digest)).kind).toBe('Deployment');
    expect((await refsOf(fixture.truth.bad.wrongApiVersion.digest)).apiVersion).toBe('v1');
    const tagOnly = await refsOf(fixture.truth.bad.tagOnly.digest);
    expect(tagOnly.spec.tags.map((t) => t.from.name)).toContain(fixture.truth.bad.tagOnly.tagPullSpec);
  });

  it('includes a gzip bomb of about 1 MiB that inflates to exactly its recorded size, over 1 GiB', async () => {
    const bomb = fixture.truth.bad.gzipBomb;
    const bytes = blob(bomb.layerDigest);
    expect(bytes.length).toBe(bomb.compressedSize);
    expect(bomb.compressedSize).toBeLessThan(2 * 2 ** 20);
    expect(bomb.uncompressedSize).toBeGreaterThan(2 ** 30);
    expect(bytes.readUInt32LE(bytes.length - 4)).toBe(bomb.uncompressedSize % 2 ** 32);
    expect(manifest(bomb.digest).doc.layers.at(-1)!.digest).toBe(bomb.layerDigest);
    // Inflating it all also makes zlib check the hand-built stream's CRC and ISIZE.
    let total = 0;
    for await (const chunk of Readable.from([bytes]).pipe(createGunzip({ chunkSize: 2 ** 20 }))) total += (chunk as Buffer).length;
    expect(total).toBe(bomb.uncompressedSize);
  });

  it('includes hostile tar entries before a valid release-manifests/', async () => {
    const files = await readTar(lastLayerOf(fixture.truth.bad.pathTraversal.digest));
    for (const name of fixture.truth.bad.pathTraversal.hostileEntries) expect(files.has(name), name).toBe(true);
    expect(files.get('release-manifests/0000_99_evil-link.yaml')).toMatchObject({ type: 'symlink', linkname: '/etc/passwd' });
    const refs = json<ImageStreamDocument>(files.get('release-manifests/image-references')!.data);
    expect(refs.spec.tags.map((t) => t.name)).toEqual([...fixture.truth.bad.pathTraversal.components].sort());
  });

  it('includes a manifest list with only amd64', () => {
    const list = manifest(fixture.truth.bad.noArm.digest);
    expect(list.doc.manifests.map((m) => m.platform?.architecture)).toEqual(['amd64']);
    expect(list.doc.manifests[0]!.digest).toBe(fixture.truth.release.image.digest);
  });

  it('includes a component layer of two gzip members whose ISIZE trailer understates its size', async () => {
    const c = fixture.truth.bad.multiMemberGzip.component;
    const bytes = blob(c.layerDigest);
    expect(bytes.readUInt32LE(bytes.length - 4)).toBe(c.isizeTrailer);
    expect(c.isizeTrailer).toBeLessThan(c.uncompressedSize);
    expect(gunzipSync(bytes).length).toBe(c.uncompressedSize);
    expect(manifest(c.digest).doc.layers.at(-1)!.digest).toBe(c.layerDigest);
    const refs = json<ImageStreamDocument>((await readTar(lastLayerOf(fixture.truth.bad.multiMemberGzip.digest))).get('release-manifests/image-references')!.data);
    expect(refs.spec.tags.map((t) => t.from.name)).toContain(c.pullSpec);
  });
});

describe('pushing to a real registry', () => {
  let registry: RegistryHandle;
  beforeAll(async () => {
    registry = await startRegistry();
  });
  afterAll(async () => {
    await registry?.stop();
  });

  async function get(path: string, headers: Record<string, string> = {}) {
    const res = await request(`${registry.url}${path}`, { headers });
    const body = Buffer.from(await res.body.arrayBuffer());
    return { status: res.statusCode, headers: res.headers, body };
  }

  it('pushes every blob, manifest and tag, then serves them by tag and by digest', async () => {
    const report = await pushFixture(registry.url, fixture);
    expect(report.blobsUploaded).toBe(fixture.blobs.size);
    expect(report.tags).toBe(fixture.repositories.reduce((n, r) => n + r.tags.length, 0));

    const release = await get(`/v2/${RELEASE_REPOSITORY}/manifests/${RELEASE_TAG}`, { accept: MediaTypes.dockerManifest });
    expect(release.status).toBe(200);
    expect(release.headers['docker-content-digest']).toBe(fixture.truth.release.image.digest);
    expect(sha256(release.body)).toBe(fixture.truth.release.image.digest);

    const multi = await get(`/v2/${RELEASE_REPOSITORY}/manifests/${MULTI_TAG}`, { accept: `${MediaTypes.dockerList}, ${MediaTypes.ociIndex}` });
    expect(multi.headers['docker-content-digest']).toBe(fixture.truth.multi.listDigest);

    const oci = fixture.truth.multi.components.find((c) => c.listMediaType === MediaTypes.ociIndex)!;
    const index = await get(`/v2/${COMPONENT_REPOSITORY}/manifests/${oci.listDigest}`, { accept: MediaTypes.ociIndex });
    expect(index.headers['content-type']).toBe(MediaTypes.ociIndex);

    const isize = await get(`/v2/${RELEASE_REPOSITORY}/blobs/${fixture.truth.release.manifestsLayer.digest}`, { range: 'bytes=-4' });
    expect(isize.status).toBe(206);
    expect(isize.body.readUInt32LE(0)).toBe(fixture.truth.release.manifestsLayer.uncompressedSize);

    for (const bad of Object.values(fixture.truth.bad)) {
      expect((await get(`/v2/${bad.repository}/manifests/${bad.tag}`, { accept: `${MediaTypes.dockerManifest}, ${MediaTypes.dockerList}` })).headers['docker-content-digest']).toBe(bad.digest);
    }
  });

  it('skips blobs the registry already has on a second push', async () => {
    const report = await pushFixture(registry.url, fixture);
    expect(report.blobsUploaded).toBe(0);
    expect(report.blobsMounted).toBe(0);
  });
});
