/**
 * An operator catalog at the scale of Red Hat's operator index, for `npm run bench:operators`
 * (FACTS §11: community-operators-prod holds 333 packages and about 7,000 bundles; relatedImages
 * per bundle median 2, mean 5.1, max 95; Red Hat's bundles inline their CRDs and CSV as
 * `olm.bundle.object`, so one package's catalog.json runs to several MB and the configs to a few
 * hundred MB). Deterministic: every choice comes from a seeded stream (fixtures/entropy.ts).
 *
 * - Packages (default 400) and bundles (default 8,000) spread unevenly (a few packages of a few
 *   hundred bundles, many of a handful); versions climb by patch, minor and major steps.
 * - Channels: `stable` holds every bundle as one replaces chain (some entries also skip the one
 *   before last, one package's entries skip up to 90 earlier ones as in OCPBUGS-52471, heads carry a
 *   skipRange); `stable-X.Y` channels for the last minors, each starting by replacing the last
 *   bundle of the minor before (outside the channel); some packages default to their newest minor.
 * - Dependencies: some packages require a provider package by `olm.package.required` (a range
 *   that covers the provider's head) or by `olm.gvk.required` (an API only the provider serves).
 * - Documents: about 60% of packages carry the CSV and their CRDs as base64 `olm.bundle.object`
 *   (JSON CRDs with openAPIV3Schema descriptions, a CSV with a base64 icon), the rest only
 *   `olm.csv.metadata`; the CRD bytes are spread so the configs total `configsBytes`.
 * - Images, all named by digest under registry.redhat.io: the bundle image, the operator, and
 *   operands. Only the bundles a selection can bring are built and pushed (the ones the ISC keeps
 *   under oc-mirror's rules, and every channel head of the providers they require); the other
 *   bundles name digests no registry holds, as a real index names images nobody mirrored. Built
 *   images share the release fixture's base layers and add a small layer of their own; half the
 *   operand repositories serve OCI indexes (amd64 and arm64).
 * - The catalog image: an OCI index (amd64, arm64) over opm's layout: a base layer, an opm layer,
 *   `/configs/<pkg>/catalog.json`, the `operators.operatorframework.io.index.configs.v1` label.
 *   (Red Hat's index also ships a prebuilt `/tmp/cache` layer; this one does not.)
 *
 * Beside the content it returns the ImageSetConfiguration selecting `selected` packages (by
 * name alone, the head of `stable`, a channel range, a package minVersion) and what oc-mirror v2
 * keeps under its documented rules (FACTS §11, catalog-filter's filter), modelled here on the
 * generator's own channels and versions, not by prestage's code: the bundles, their relatedImages
 * and the providers OLM would add, which oc-mirror leaves out (oc-mirror#1462).
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import yaml from 'js-yaml';
import semver from 'semver';
import { sharedLayers, syntheticLayer } from '../fixtures/component-images.js';
import { Prng } from '../fixtures/entropy.js';
import { buildImage, buildList, gzipLayer, layerBlob, sha256, type BuiltImage, type LayerBlob } from '../fixtures/image.js';
import { RegistryContent } from '../fixtures/repositories.js';
import { tarArchive, type TarEntry } from '../fixtures/tar.js';

export const SCALE_REGISTRY = 'registry.redhat.io';
export const SCALE_CATALOG_REPOSITORY = 'redhat/redhat-operator-index';
export const SCALE_CATALOG_TAG = 'v4.16';
const CREATED = '2024-07-01T00:00:00Z';
const AMD64 = { architecture: 'amd64', os: 'linux' } as const;
const ARM64 = { architecture: 'arm64', os: 'linux', variant: 'v8' } as const;
const KiB = 1024;
const MiB = 1024 * KiB;

export interface CatalogScaleOptions {
  readonly seed?: string;
  readonly packages?: number;
  readonly bundles?: number;
  /** Uncompressed bytes of all catalog.json files together (approximately). */
  readonly configsBytes?: number;
  /** Packages the ImageSetConfiguration names. */
  readonly selected?: number;
}

/** An image a bundle names, with the digests a plan may report for it (an index and its amd64 child). */
export interface ScaleImage {
  readonly reference: string;
  readonly digests: readonly string[];
}

export interface ScaleCatalog {
  /** `registry.redhat.io/redhat/redhat-operator-index:v4.16`. */
  readonly reference: string;
  readonly digest: string;
  /** The catalog image, the built bundle, operator and operand images; push it whole. */
  readonly content: RegistryContent;
  /** The ImageSetConfiguration (mirror.openshift.io/v2alpha1), YAML, no platform section. */
  readonly isc: string;
  /** What oc-mirror keeps under its rules: bundles by package, and every image they name (relatedImages) plus the catalog. */
  readonly ocMirror: { readonly bundles: ReadonlyMap<string, readonly string[]>; readonly images: readonly ScaleImage[] };
  /** Providers OLM installs beside the selection (oc-mirror leaves them out): package, the head it takes, the selected packages that need it. */
  readonly dependencies: ReadonlyArray<{ readonly package: string; readonly bundle: string; readonly requiredBy: readonly string[] }>;
  readonly stats: CatalogScaleStats;
}

export interface CatalogScaleStats {
  readonly packages: number;
  readonly bundles: number;
  readonly channels: number;
  readonly relatedImages: { readonly median: number; readonly mean: number; readonly max: number };
  readonly configsBytes: number;
  readonly largestFile: { readonly path: string; readonly bytes: number };
  readonly configsLayerBytes: number;
  readonly catalogImageBytes: number;
  readonly packagesWithObjects: number;
  readonly packagesWithDependencies: number;
  /** The package whose entries skip up to 90 earlier ones (OCPBUGS-52471), and whether the ISC selects it. */
  readonly manySkips: { readonly package: string; readonly selected: boolean };
  /** Images built and pushed (bundle, operator, operand), and bytes of their blobs. */
  readonly builtImages: number;
  readonly builtBlobBytes: number;
}

interface GenBundle {
  readonly name: string;
  readonly version: string;
}

interface GenEntry {
  readonly name: string;
  readonly replaces?: string;
  readonly skips?: readonly string[];
  readonly skipRange?: string;
}

interface GenChannel {
  readonly name: string;
  readonly entries: readonly GenEntry[];
  /** The bundle outside the channel that its first entry replaces. */
  readonly beyond?: string;
}

interface GenPackage {
  readonly name: string;
  readonly namespace: string;
  readonly bundles: readonly GenBundle[];
  readonly channels: readonly GenChannel[];
  readonly defaultChannel: string;
  readonly objects: boolean;
  /** relatedImages per bundle, the bundle image included. */
  related: number;
  operands: string[];
  /** Bytes of CRDs each bundle inlines (objects packages). */
  crdBytes: number;
  readonly api: { readonly group: string; readonly version: string; readonly kind: string };
  requires?: { readonly provider: string; readonly how: 'package' | 'api' };
  readonly manySkips: boolean;
}

/** Package name parts: real index names are product words joined by dashes. */
const FIRST = ['advanced', 'amq', 'ansible', 'aws', 'azure', 'bare', 'camel', 'cert', 'cluster', 'compliance', 'cost', 'data', 'dev', 'edge', 'elastic', 'external', 'fence', 'file', 'fleet', 'gcp', 'gpu', 'integrity', 'jaeger', 'kernel', 'kiali', 'kube', 'local', 'logging', 'loki', 'mesh', 'metal', 'migration', 'multicluster', 'net', 'nfd', 'node', 'numa', 'object', 'observability', 'ocs', 'odf', 'open', 'power', 'ptp', 'quay', 'rhacs', 'rhbk', 'run', 'sandboxed', 'secrets', 'secure', 'self', 'serverless', 'service', 'smb', 'sriov', 'storage', 'stream', 'tempo', 'vault', 'volsync', 'web', 'windows', 'workload'];
const SECOND = ['agent', 'api', 'backup', 'bridge', 'broker', 'builds', 'cache', 'catalog', 'config', 'console', 'controller', 'csi', 'descheduler', 'dns', 'events', 'gateway', 'gitops', 'health', 'hub', 'index', 'ingress', 'lifecycle', 'manager', 'metrics', 'monitor', 'network', 'pipelines', 'policy', 'provisioner', 'proxy', 'registry', 'remediation', 'scheduler', 'security', 'spaces', 'streams', 'sync', 'terminal', 'tracing', 'tuning', 'virtualization', 'workflow'];
const WORDS = ['the', 'resource', 'specifies', 'which', 'cluster', 'nodes', 'when', 'field', 'value', 'must', 'be', 'set', 'to', 'a', 'valid', 'name', 'of', 'an', 'object', 'in', 'same', 'namespace', 'defaults', 'if', 'omitted', 'is', 'used', 'for', 'each', 'replica', 'condition', 'status', 'observed', 'generation', 'reconcile', 'operator', 'configuration', 'secret', 'reference', 'storage', 'class', 'volume', 'claim', 'template', 'selector', 'label', 'annotation', 'toleration', 'affinity', 'deprecated', 'since', 'version', 'use', 'instead', 'optional', 'required', 'minimum', 'maximum', 'pattern', 'format', 'string', 'integer', 'boolean', 'array', 'items'];

function hex(label: string): string {
  return createHash('sha256').update(label).digest('hex');
}

/** Lognormal-ish weight: a few heavy packages, many light ones. */
function weight(prng: Prng, spread: number): number {
  const u = Math.max(prng.float(), 1e-9);
  const v = prng.float();
  return Math.exp(spread * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
}

/** Split `total` into `parts` integers of at least `min` with weights `w`, capped at `max`. */
function apportion(total: number, w: readonly number[], min: number, max: number): number[] {
  const sum = w.reduce((a, b) => a + b, 0);
  const out = w.map((x) => Math.min(max, Math.max(min, Math.round((total * x) / sum))));
  let diff = total - out.reduce((a, b) => a + b, 0);
  const order = w.map((x, i) => [x, i] as const).sort((a, b) => b[0] - a[0]).map(([, i]) => i);
  for (let pass = 0; diff !== 0 && pass < 10_000; pass++) {
    for (const i of order) {
      if (diff === 0) break;
      if (diff > 0 && out[i]! < max) { out[i]!++; diff--; } else if (diff < 0 && out[i]! > min) { out[i]!--; diff++; }
    }
  }
  return out;
}

/** relatedImages per bundle (bundle image included): median 2, mean about 5, tail to 95. */
function relatedCount(prng: Prng): number {
  const r = prng.float();
  if (r < 0.565) return 2;
  if (r < 0.715) return 3;
  if (r < 0.885) return prng.int(4, 10);
  if (r < 0.985) return prng.int(9, 24);
  return prng.int(26, 95);
}

function versionsOf(prng: Prng, count: number): string[] {
  let [major, minor, patch] = [prng.int(0, 2) === 0 ? 0 : prng.int(1, 4), prng.int(0, 9), 0];
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    out.push(`${major}.${minor}.${patch}`);
    const step = prng.float();
    if (step < 0.03) [major, minor, patch] = [major + 1, 0, 0];
    else if (step < 0.25) [minor, patch] = [minor + 1, 0];
    else patch++;
  }
  return out;
}

function generatePackages(prng: Prng, packages: number, bundles: number): GenPackage[] {
  const names = new Set<string>();
  while (names.size < packages) {
    const name = `${prng.pick(FIRST)}-${prng.pick(SECOND)}-operator`;
    names.add(names.has(name) ? `${prng.pick(FIRST)}-${name}` : name);
  }
  const list = [...names].sort();
  const counts = apportion(bundles, list.map(() => weight(prng, 1.1)), 1, 400);
  const manySkipsAt = counts.indexOf(Math.max(...counts.filter((c) => c >= 90 && c <= 200).concat([0]))) ;
  const out: GenPackage[] = [];
  for (const [i, name] of list.entries()) {
    const p = new Prng(`catalog-scale/package/${name}`);
    const n = counts[i]!;
    const versions = versionsOf(p, n);
    const bundleList = versions.map((version) => ({ name: `${name}.v${version}`, version }));
    const manySkips = i === manySkipsAt;
    const stable: GenEntry[] = bundleList.map((b, j) => {
      const skips = manySkips ? bundleList.slice(Math.max(0, j - 90), Math.max(0, j - 1)).map((x) => x.name) : j >= 2 && j % 7 === 0 ? [bundleList[j - 2]!.name] : [];
      return { name: b.name, ...(j > 0 ? { replaces: bundleList[j - 1]!.name } : {}), ...(skips.length > 0 ? { skips } : {}), ...(j === n - 1 && n > 1 ? { skipRange: `>=${bundleList[0]!.version} <${b.version}` } : {}) };
    });
    const channels: GenChannel[] = [{ name: 'stable', entries: stable }];
    const minors = [...new Set(versions.map((v) => v.split('.').slice(0, 2).join('.')))];
    for (const minor of minors.slice(-3)) {
      const members = bundleList.map((b, j) => [b, j] as const).filter(([b]) => b.version.startsWith(`${minor}.`));
      if (members.length < 2 || minors.length < 2) continue;
      const first = members[0]![1];
      const beyond = first > 0 ? bundleList[first - 1]!.name : undefined;
      channels.push({ name: `stable-${minor}`, entries: members.map(([b], k) => ({ name: b.name, ...(k > 0 ? { replaces: members[k - 1]![0].name } : beyond ? { replaces: beyond } : {}) })), ...(beyond ? { beyond } : {}) });
    }
    const defaultChannel = channels.length > 1 && p.float() < 0.2 ? channels.at(-1)!.name : 'stable';
    const related = relatedCount(p);
    const namespace = name.replace(/-operator$/, '').split('-')[0]!;
    out.push({
      name,
      namespace: `${namespace}${p.int(1, 3) === 1 ? '' : `-${p.pick(['rhel8', 'rhel9', 'tech-preview'])}`}`,
      bundles: bundleList,
      channels,
      defaultChannel,
      objects: p.float() < 0.6,
      related,
      operands: Array.from({ length: Math.max(0, related - 2) }, (_, k) => `${name.replace(/-operator$/, '')}-${p.pick(SECOND)}-${k}-rhel9`),
      crdBytes: 0,
      api: { group: `${name.replace(/-operator$/, '').replace(/-/g, '')}.openshift.io`, version: p.pick(['v1', 'v1beta1', 'v1alpha1']), kind: `${name.split('-').map((s) => s[0]!.toUpperCase() + s.slice(1)).join('').replace(/Operator$/, '')}` },
      manySkips,
    });
  }
  // The longest relatedImages list is 95 long, as in the community catalog.
  const widest = out.reduce((a, p) => (p.related > a.related ? p : a), out[0]!);
  const wp = new Prng(`catalog-scale/package/${widest.name}/operands`);
  widest.operands.push(...Array.from({ length: 95 - widest.related }, (_, k) => `${widest.name.replace(/-operator$/, '')}-${wp.pick(SECOND)}-${widest.related - 2 + k}-rhel9`));
  widest.related = 95;
  // One package in about seven requires a provider: a small package (under 20 bundles) nobody else requires.
  const providers = out.filter((p) => p.bundles.length <= 20 && p.bundles.length >= 2);
  const byName = new Map(out.map((p) => [p.name, p]));
  let next = 0;
  for (const pkg of out) {
    if (providers.length === 0 || prng.float() >= 0.15) continue;
    const provider = providers[next++ % providers.length]!;
    if (provider.name === pkg.name || provider.requires) continue;
    pkg.requires = { provider: provider.name, how: prng.float() < 0.5 ? 'package' : 'api' };
  }
  for (const pkg of out) if (pkg.requires && byName.get(pkg.requires.provider)?.requires) delete pkg.requires;
  return out;
}

/** Spread `padBytes` of CRDs over the objects packages: per bundle, capped so no file passes `fileCap`. */
function spreadCrdBytes(prng: Prng, pkgs: GenPackage[], padBytes: number, fileCap: number, docCap: number): void {
  const objects = pkgs.filter((p) => p.objects);
  const w = new Map(objects.map((p) => [p, weight(prng, 0.9)]));
  const fixed = new Map<GenPackage, number>();
  for (let pass = 0; pass < 8; pass++) {
    const free = objects.filter((p) => !fixed.has(p));
    const left = padBytes - [...fixed].reduce((a, [p, c]) => a + c * p.bundles.length, 0);
    const denom = free.reduce((a, p) => a + w.get(p)! * p.bundles.length, 0);
    let capped = false;
    for (const p of free) {
      const c = (left * w.get(p)!) / denom;
      const cap = Math.min(docCap, fileCap / p.bundles.length);
      if (c > cap) { fixed.set(p, cap); capped = true; } else p.crdBytes = c;
    }
    if (!capped) break;
  }
  for (const [p, c] of fixed) p.crdBytes = c;
  for (const p of objects) p.crdBytes = Math.max(4 * KiB, Math.round(p.crdBytes));
}

/** A CRD as operator-sdk writes one: JSON, an openAPIV3Schema whose properties carry prose descriptions. */
function crdJson(prng: Prng, group: string, kind: string, bytes: number): string {
  const properties: Record<string, unknown> = {};
  const fill = (): string => {
    const words: string[] = [];
    for (let i = prng.int(12, 60); i > 0; i--) words.push(prng.pick(WORDS));
    return words.join(' ');
  };
  let size = 600;
  for (let i = 0; size < bytes; i++) {
    const description = fill();
    properties[`${prng.pick(WORDS)}${prng.pick(WORDS)[0]!.toUpperCase()}${prng.pick(WORDS)}${i}`] = { description, type: prng.pick(['string', 'integer', 'boolean', 'object']), ...(i % 5 === 0 ? { enum: [prng.pick(WORDS), prng.pick(WORDS)] } : {}) };
    size += description.length + 60;
  }
  const plural = `${kind.toLowerCase()}s`;
  return JSON.stringify({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}`, annotations: { 'controller-gen.kubebuilder.io/version': 'v0.14.0' } },
    spec: { group, names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() }, scope: 'Namespaced', versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties } } } } }] },
  });
}

/** A ClusterServiceVersion with its deployment (the operator image), related images and an icon. */
function csvOf(pkg: GenPackage, bundle: GenBundle, operator: string, related: readonly { name: string; image: string }[], iconBytes: Buffer): Record<string, unknown> {
  return {
    apiVersion: 'operators.coreos.com/v1alpha1',
    kind: 'ClusterServiceVersion',
    metadata: { name: bundle.name, annotations: { capabilities: 'Seamless Upgrades', 'operators.openshift.io/valid-subscription': '["OpenShift Platform Plus"]', containerImage: operator } },
    spec: {
      displayName: pkg.name,
      version: bundle.version,
      icon: [{ base64data: iconBytes.toString('base64'), mediatype: 'image/png' }],
      install: { strategy: 'deployment', spec: { deployments: [{ name: `${pkg.name}-controller-manager`, spec: { template: { spec: { containers: [{ name: 'manager', image: operator }] } } } }] } },
      relatedImages: related.filter((r) => r.name !== '').map((r) => ({ name: r.name, image: r.image })),
    },
  };
}

/** The selection the ISC makes of one package, and what oc-mirror keeps of it. */
interface Pick {
  readonly pkg: GenPackage;
  readonly kind: 'name' | 'stable-head' | 'channel-range' | 'package-min';
  readonly entry: Record<string, unknown>;
  readonly kept: readonly string[];
}

const cmp = (a: string, b: string): number => semver.compare(a, b);

/** catalog-filter's keep for one channel, on a chain whose versions climb: the head without a range; with one, the entries in it and the bundle the chain's tail replaces when in it. */
function keptOf(pkg: GenPackage, channel: GenChannel, min?: string, max?: string): string[] {
  const versions = new Map(pkg.bundles.map((b) => [b.name, b.version]));
  if (min === undefined && max === undefined) return [channel.entries.at(-1)!.name];
  const inRange = (name: string): boolean => {
    const v = versions.get(name);
    return v !== undefined && (min === undefined || cmp(v, min) >= 0) && (max === undefined || cmp(v, max) <= 0);
  };
  const kept = channel.entries.filter((e) => inRange(e.name)).map((e) => e.name);
  if (channel.beyond && inRange(channel.beyond) && kept.length > 0) kept.push(channel.beyond);
  return kept;
}

function choose(prng: Prng, pkgs: readonly GenPackage[], count: number): Pick[] {
  const providers = new Set(pkgs.flatMap((p) => (p.requires ? [p.requires.provider] : [])));
  const candidates = pkgs.filter((p) => !providers.has(p.name));
  const taken = new Set<string>();
  const picks: Pick[] = [];
  const take = (filter: (p: GenPackage) => boolean, n: number, kind: Pick['kind']): void => {
    const pool = candidates.filter((p) => !taken.has(p.name) && filter(p));
    for (let i = 0; i < n && pool.length > 0; i++) {
      const pkg = pool.splice(prng.int(0, pool.length - 1), 1)[0]!;
      taken.add(pkg.name);
      const stable = pkg.channels[0]!;
      const defaultChannel = pkg.defaultChannel === 'stable' ? {} : { defaultChannel: 'stable' };
      if (kind === 'name') {
        picks.push({ pkg, kind, entry: { name: pkg.name }, kept: [...new Set(pkg.channels.map((c) => keptOf(pkg, c)[0]!))] });
      } else if (kind === 'stable-head') {
        picks.push({ pkg, kind, entry: { name: pkg.name, ...defaultChannel, channels: [{ name: 'stable' }] }, kept: keptOf(pkg, stable) });
      } else if (kind === 'channel-range') {
        const n = pkg.bundles.length;
        const hi = prng.float() < 0.3 ? n - 1 : prng.int(Math.max(2, n - 6), n - 2);
        const lo = Math.max(0, hi - prng.int(2, 8));
        const min = pkg.bundles[lo]!.version;
        const max = hi === n - 1 ? undefined : pkg.bundles[hi]!.version;
        picks.push({ pkg, kind, entry: { name: pkg.name, ...defaultChannel, channels: [{ name: 'stable', minVersion: min, ...(max ? { maxVersion: max } : {}) }] }, kept: keptOf(pkg, stable, min, max) });
      } else {
        const min = pkg.bundles[Math.max(0, pkg.bundles.length - prng.int(2, 5))]!.version;
        const kept = new Set(pkg.channels.flatMap((c) => keptOf(pkg, c, min)));
        picks.push({ pkg, kind, entry: { name: pkg.name, minVersion: min }, kept: [...kept] });
      }
    }
  };
  const big = (p: GenPackage) => p.bundles.length >= 10;
  // The heavy cases first, so the sample always holds them: many skips, a long relatedImages list, dependencies of both kinds.
  take((p) => p.manySkips, 1, 'channel-range');
  take((p) => p.related >= 26 && big(p), 1, 'channel-range');
  take((p) => p.requires?.how === 'package' && big(p), 2, 'channel-range');
  take((p) => p.requires?.how === 'api', 2, 'name');
  take((p) => p.requires !== undefined && p.defaultChannel === 'stable' && p.bundles.length >= 6, 1, 'package-min');
  take((p) => p.objects && big(p), 3, 'channel-range');
  take((p) => !p.objects && big(p), 2, 'stable-head');
  take((p) => p.defaultChannel === 'stable' && p.bundles.length >= 6, 2, 'package-min');
  take((p) => p.objects, 3, 'stable-head');
  take(() => true, count - picks.length, 'name');
  return picks.slice(0, count).sort((a, b) => (a.pkg.name < b.pkg.name ? -1 : 1));
}

/** Build the catalog, the images a selection brings, and the ISC. */
export function buildScaleCatalog(options: CatalogScaleOptions = {}): ScaleCatalog {
  const seed = options.seed ?? 'redhat-operator-index';
  const prng = new Prng(`catalog-scale/${seed}`);
  const pkgs = generatePackages(prng, options.packages ?? 400, options.bundles ?? 8000);
  const configsBytes = options.configsBytes ?? 300 * MiB;
  // About 3 KiB of each bundle document is not CRDs; the rest of the bytes are.
  // Each bundle document without its CRDs: about 3 KiB, 200 bytes a related image, and the CSV (its icon) or its metadata.
  spreadCrdBytes(prng, pkgs, Math.max(0, configsBytes - pkgs.reduce((a, p) => a + p.bundles.length * (3 * KiB + p.related * 200 + (p.objects ? 30 * KiB : 2 * KiB)), 0)), 40 * MiB, 8 * MiB);
  const picks = choose(prng, pkgs, options.selected ?? 20);
  const byName = new Map(pkgs.map((p) => [p.name, p]));

  // What a selection can bring: the kept bundles, and every channel head of the providers they require.
  const built = new Set<string>();
  const dependencies = new Map<string, { bundle: string; requiredBy: Set<string> }>();
  for (const pick of picks) {
    for (const b of pick.kept) built.add(b);
    const req = pick.pkg.requires;
    if (!req) continue;
    const provider = byName.get(req.provider)!;
    const head = provider.channels.find((c) => c.name === provider.defaultChannel)!.entries.at(-1)!.name;
    for (const c of provider.channels) built.add(c.entries.at(-1)!.name);
    const dep = dependencies.get(provider.name) ?? { bundle: head, requiredBy: new Set<string>() };
    dep.requiredBy.add(pick.pkg.name);
    dependencies.set(provider.name, dep);
  }

  // An image is built when any bundle that can be brought names it (operands are shared by the bundles of one minor).
  const operatorRepo = (pkg: GenPackage): string => `${pkg.namespace}/${pkg.name.replace(/-operator$/, '')}-rhel9-operator`;
  const minorOf = (version: string): string => version.split('.').slice(0, 2).join('.');
  const keysOf = (pkg: GenPackage, bundle: GenBundle): string[] => [`${operatorRepo(pkg)}#${bundle.version}`, ...pkg.operands.map((o) => `${pkg.namespace}/${o}#${minorOf(bundle.version)}`)];
  const realKeys = new Set(pkgs.flatMap((pkg) => pkg.bundles.filter((b) => built.has(b.name)).flatMap((b) => keysOf(pkg, b))));
  const content = new RegistryContent();
  const base = sharedLayers().base;
  const images = new Map<string, ScaleImage>();
  let builtImages = 0;
  const builtBlobs = new Set<string>();
  const own = (label: string): LayerBlob => syntheticLayer(`catalog-scale/${label}`, [{ path: `usr/bin/${label.split('/').at(-1)!.slice(0, 60)}`, binary: 12 * KiB, mode: 0o755 }, { path: `usr/share/licenses/${label.replace(/[^a-z0-9]+/gi, '-').slice(0, 80)}/LICENSE`, text: 4 * KiB }]);
  const record = (repo: ReturnType<RegistryContent['repository']>, image: BuiltImage): void => {
    repo.addImage(image);
    builtBlobs.add(image.config.digest);
    for (const l of image.layers) builtBlobs.add(l.digest);
    builtImages++;
  };
  /** A runtime image (operator or operand) by digest: built when a bundle that can be brought names it, else a digest nobody serves. */
  const runtimeImage = (repository: string, label: string, list: boolean): ScaleImage => {
    const key = `${repository}#${label}`;
    const known = images.get(key);
    if (known) return known;
    let image: ScaleImage;
    if (!realKeys.has(key)) {
      image = { reference: `${SCALE_REGISTRY}/${repository}@sha256:${hex(`catalog-scale/${seed}/${key}`)}`, digests: [] };
    } else {
      const repo = content.repository(`${SCALE_REGISTRY}/${repository}`);
      const layer = own(`${repository}/${label}`);
      const amd = buildImage({ format: 'oci', platform: AMD64, layers: [...base, layer], labels: { version: label }, entrypoint: [`/usr/bin/${repository.split('/').at(-1)!}`], created: CREATED });
      if (list) {
        const arm = buildImage({ format: 'oci', platform: ARM64, layers: [...base, layer], labels: { version: label }, entrypoint: [`/usr/bin/${repository.split('/').at(-1)!}`], created: CREATED });
        record(repo, amd);
        record(repo, arm);
        const index = repo.addList(buildList('oci', [amd, arm]));
        image = { reference: `${SCALE_REGISTRY}/${repository}@${index.digest}`, digests: [index.digest, amd.digest] };
      } else {
        record(repo, amd);
        image = { reference: `${SCALE_REGISTRY}/${repository}@${amd.digest}`, digests: [amd.digest] };
      }
    }
    images.set(key, image);
    return image;
  };

  const files = new Map<string, Buffer>();
  const relatedCounts: number[] = [];
  let channelsTotal = 0;
  for (const pkg of pkgs) {
    const p = new Prng(`catalog-scale/${seed}/documents/${pkg.name}`);
    const crdCount = pkg.objects ? Math.max(1, Math.min(120, Math.round(pkg.crdBytes / (80 * KiB)))) : 0;
    // The same CRDs in every bundle of a package, as real operators ship them release after release.
    const crds = Array.from({ length: crdCount }, (_, k) => Buffer.from(crdJson(p, pkg.api.group, k === 0 ? pkg.api.kind : `${pkg.api.kind}${p.pick(WORDS)[0]!.toUpperCase()}${k}`, ((pkg.crdBytes / crdCount) * 3) / 4)).toString('base64'));
    const icon = p.bytes(p.int(6, 24) * KiB);
    const documents: string[] = [JSON.stringify({ schema: 'olm.package', name: pkg.name, defaultChannel: pkg.defaultChannel, icon: { base64data: icon.subarray(0, 2 * KiB).toString('base64'), mediatype: 'image/png' } }, null, 4)];
    for (const c of pkg.channels) documents.push(JSON.stringify({ schema: 'olm.channel', name: c.name, package: pkg.name, entries: c.entries }, null, 4));
    channelsTotal += pkg.channels.length;
    for (const bundle of pkg.bundles) {
      const real = built.has(bundle.name);
      const operator = runtimeImage(operatorRepo(pkg), bundle.version, false);
      const operands = pkg.operands.map((o, k) => runtimeImage(`${pkg.namespace}/${o}`, minorOf(bundle.version), k % 2 === 0));
      const related = [{ name: 'manager', image: operator.reference }, ...operands.map((o, k) => ({ name: pkg.operands[k]!.replace(/-rhel9$/, ''), image: o.reference }))];
      const csv = csvOf(pkg, bundle, operator.reference, related, icon);
      let bundleRef: ScaleImage;
      const bundleRepo = `${pkg.namespace}/${pkg.name.replace(/-operator$/, '')}-operator-bundle`;
      if (real) {
        const repo = content.repository(`${SCALE_REGISTRY}/${bundleRepo}`);
        const layer = gzipLayer(tarArchive([
          { type: 'dir', path: 'manifests' },
          { type: 'file', path: `manifests/${pkg.name}.clusterserviceversion.yaml`, data: Buffer.from(yaml.dump(csv, { sortKeys: true, lineWidth: -1, noRefs: true })) },
          { type: 'dir', path: 'metadata' },
          { type: 'file', path: 'metadata/annotations.yaml', data: Buffer.from(`annotations:\n  operators.operatorframework.io.bundle.package.v1: ${pkg.name}\n  operators.operatorframework.io.bundle.channels.v1: ${pkg.channels.filter((c) => c.entries.some((e) => e.name === bundle.name)).map((c) => c.name).join(',')}\n  operators.operatorframework.io.bundle.manifests.v1: manifests/\n`) },
        ]));
        const image = buildImage({ format: 'docker', platform: AMD64, layers: [layer], labels: { 'operators.operatorframework.io.bundle.package.v1': pkg.name }, entrypoint: [], created: CREATED });
        record(repo, image);
        bundleRef = { reference: `${SCALE_REGISTRY}/${bundleRepo}@${image.digest}`, digests: [image.digest] };
      } else {
        bundleRef = { reference: `${SCALE_REGISTRY}/${bundleRepo}@sha256:${hex(`catalog-scale/${seed}/bundle/${bundle.name}`)}`, digests: [] };
      }
      images.set(`bundle#${bundle.name}`, bundleRef);
      const properties: unknown[] = [
        { type: 'olm.gvk', value: { group: pkg.api.group, kind: pkg.api.kind, version: pkg.api.version } },
        { type: 'olm.package', value: { packageName: pkg.name, version: bundle.version } },
      ];
      if (pkg.requires) {
        const provider = byName.get(pkg.requires.provider)!;
        const head = provider.bundles.at(-1)!.version;
        properties.push(pkg.requires.how === 'package'
          ? { type: 'olm.package.required', value: { packageName: provider.name, versionRange: `>=${semver.major(head)}.0.0 <${semver.major(head) + 1}.0.0` } }
          : { type: 'olm.gvk.required', value: { group: provider.api.group, kind: provider.api.kind, version: provider.api.version } });
      }
      if (pkg.objects) {
        for (const crd of crds) properties.push({ type: 'olm.bundle.object', value: { data: crd } });
        properties.push({ type: 'olm.bundle.object', value: { data: Buffer.from(JSON.stringify(csv)).toString('base64') } });
      } else {
        properties.push({ type: 'olm.csv.metadata', value: { annotations: (csv.metadata as { annotations: unknown }).annotations, description: Array.from({ length: 120 }, () => p.pick(WORDS)).join(' '), displayName: pkg.name, installModes: [{ supported: true, type: 'AllNamespaces' }], keywords: [pkg.namespace], provider: { name: 'Red Hat' } } });
      }
      const relatedImages = [{ name: '', image: bundleRef.reference }, ...related];
      relatedCounts.push(relatedImages.length);
      documents.push(JSON.stringify({ schema: 'olm.bundle', name: bundle.name, package: pkg.name, image: bundleRef.reference, properties, relatedImages }, null, 4));
    }
    files.set(`configs/${pkg.name}/catalog.json`, Buffer.from(`${documents.join('\n')}\n`));
  }

  // The catalog image: base, opm, configs; an OCI index over amd64 and arm64 (the configs layer shared).
  const dirs = [...new Set([...files.keys()].flatMap((path) => path.split('/').slice(0, -1).map((_, i, parts) => parts.slice(0, i + 1).join('/'))))].sort();
  const tar = tarArchive([...dirs.map((path): TarEntry => ({ type: 'dir', path })), ...[...files].sort(([a], [b]) => (a < b ? -1 : 1)).map(([path, data]): TarEntry => ({ type: 'file', path, data }))]);
  // Node's zlib, not fflate: hundreds of MB; the bytes are the same on one Node release.
  const configs = layerBlob(gzipSync(tar, { level: 6 }), tar.length, sha256(tar));
  const opm = syntheticLayer('catalog-scale/opm', [{ path: 'bin/opm', binary: 4 * MiB, mode: 0o755 }, { path: 'bin/grpc_health_probe', binary: 600 * KiB, mode: 0o755 }]);
  const labels = { 'operators.operatorframework.io.index.configs.v1': '/configs' };
  const catalogRepo = content.repository(`${SCALE_REGISTRY}/${SCALE_CATALOG_REPOSITORY}`);
  const children = [AMD64, ARM64].map((platform) => buildImage({ format: 'oci', platform, layers: [base[0]!, opm, configs], labels, entrypoint: ['/bin/opm', 'serve', '/configs', '--cache-dir=/tmp/cache'], created: CREATED }));
  const catalogList = catalogRepo.addList(buildList('oci', children));
  catalogRepo.tag(SCALE_CATALOG_TAG, catalogList.digest);
  const reference = `${SCALE_REGISTRY}/${SCALE_CATALOG_REPOSITORY}:${SCALE_CATALOG_TAG}`;

  // oc-mirror's set: the kept bundles' relatedImages (the bundle image among them) and the catalog.
  const ocImages = new Map<string, ScaleImage>([[reference, { reference, digests: [catalogList.digest, children[0]!.digest] }]]);
  const keptBundles = new Map<string, string[]>();
  for (const pick of picks) {
    keptBundles.set(pick.pkg.name, [...pick.kept].sort());
    for (const name of pick.kept) {
      const bundle = pick.pkg.bundles.find((b) => b.name === name)!;
      const refs = [images.get(`bundle#${name}`)!, ...keysOf(pick.pkg, bundle).map((key) => images.get(key)!)];
      for (const r of refs) ocImages.set(r.reference, r);
    }
  }
  const isc = yaml.dump({
    apiVersion: 'mirror.openshift.io/v2alpha1',
    kind: 'ImageSetConfiguration',
    mirror: { operators: [{ catalog: reference, packages: picks.map((p) => p.entry) }] },
  }, { lineWidth: -1, noRefs: true });

  const sorted = [...relatedCounts].sort((a, b) => a - b);
  const largest = [...files].reduce((a, [path, data]) => (data.length > a.bytes ? { path, bytes: data.length } : a), { path: '', bytes: 0 });
  const stats: CatalogScaleStats = {
    packages: pkgs.length,
    bundles: relatedCounts.length,
    channels: channelsTotal,
    relatedImages: { median: sorted[Math.floor(sorted.length / 2)] ?? 0, mean: sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length), max: sorted.at(-1) ?? 0 },
    configsBytes: [...files.values()].reduce((a, b) => a + b.length, 0),
    largestFile: largest,
    configsLayerBytes: configs.size,
    catalogImageBytes: children[0]!.config.size + children[0]!.layers.reduce((a, l) => a + l.size, 0),
    packagesWithObjects: pkgs.filter((p) => p.objects).length,
    packagesWithDependencies: pkgs.filter((p) => p.requires).length,
    manySkips: { package: pkgs.find((p) => p.manySkips)?.name ?? '', selected: picks.some((p) => p.pkg.manySkips) },
    builtImages,
    builtBlobBytes: [...builtBlobs].reduce((a, d) => a + (content.blobs.get(d)?.length ?? 0), 0),
  };
  return {
    reference,
    digest: catalogList.digest,
    content,
    isc,
    ocMirror: { bundles: keptBundles, images: [...ocImages.values()] },
    dependencies: [...dependencies].map(([pkg, d]) => ({ package: pkg, bundle: d.bundle, requiredBy: [...d.requiredBy].sort() })),
    stats,
  };
}
