/**
 * Assemble the plan: a pure function from release facts, classifications and sizes to
 * PinnedImageSets. Deterministic: same input, same plan, byte for byte.
 */
import semver from 'semver';
import type { ComponentImage } from '../release/image-references.js';
import type { ReleaseInfo } from '../release/payload.js';
import type { Classification } from './classify.js';
import { newBytesPerNode, type HeldLayers, type NodeHolding } from './held.js';
import type { MeasuredImage } from './sizes.js';
import type { OperatorImage } from './operators.js';
import { PLAN_API_VERSION, type ImageRole, type Plan, type PlanCluster, type PlannedImage, type PlannedOperators, type PlannedRoleTotal, type PlannedSet, type SetRole, type SkippedImage } from './types.js';

/** PinnedImageSet.spec.pinnedImages holds at most 500 entries (openshift/api validation). */
export const MAX_IMAGES_PER_SET = 500;
/** MCO handles at most 100 PinnedImageSets per pool (FACTS §3); past it, operators share one set per role. */
export const MAX_SETS_PER_POOL = 100;
/** An operator's set: the OLM package it serves, for selectors (its bundles: the render's annotation). */
export const OPERATOR_PACKAGE_LABEL = 'prestage.dev/operator-package';

export const POOL_ROLE_LABEL = 'machineconfiguration.openshift.io/role';
const POOL_OF: Record<SetRole, string> = { 'control-plane': 'master', worker: 'worker' };

export interface ExtraImage {
  readonly name: string;
  readonly pullSpec: string;
  readonly digest: string;
  readonly role: ImageRole;
  readonly measured: MeasuredImage;
}

/** An operator's image, resolved to its digest and measured. */
export interface MeasuredOperatorImage extends OperatorImage {
  readonly pullSpec: string;
  readonly digest: string;
  readonly source: 'operator' | 'catalog';
  readonly measured: MeasuredImage;
}

export interface PlanInput {
  readonly release: ReleaseInfo;
  readonly releaseImage: MeasuredImage;
  readonly components: readonly ComponentImage[];
  readonly classifications: ReadonlyMap<string, Classification>;
  /** Keyed by component digest. */
  readonly sizes: ReadonlyMap<string, MeasuredImage>;
  readonly extras: readonly ExtraImage[];
  readonly cluster: PlanCluster;
  readonly namePrefix: string;
  readonly warnings: readonly string[];
  /** A live cluster: the images each node runs and their layers, for the new bytes per node. */
  readonly held?: { readonly nodes: readonly NodeHolding[]; readonly layers: HeldLayers };
  /** Operators planned beside the release. */
  readonly operators?: { readonly images: readonly MeasuredOperatorImage[]; readonly summary: PlannedOperators };
}

export function assemblePlan(input: PlanInput): Plan {
  const images: PlannedImage[] = [
    planned({
      name: 'release',
      names: ['release'],
      pullSpec: input.release.pullSpec,
      digest: input.release.digest,
      source: 'release',
      role: 'control-plane',
      evidence: ['the release image itself: the cluster-version-operator runs it on control-plane nodes'],
    }, input.releaseImage),
    ...input.components.flatMap((c) => {
      const cls = classificationOf(input, c);
      if (cls.role === 'none') return [];
      const measured = input.sizes.get(c.digest);
      if (!measured) throw new Error(`internal: component ${c.name} was not measured`);
      return [planned({ name: c.name, names: c.names, pullSpec: c.pullSpec, digest: c.digest, source: 'component', role: cls.role, evidence: cls.evidence }, measured)];
    }),
    ...input.extras.map((e) =>
      planned({ name: e.name, names: [e.name], pullSpec: e.pullSpec, digest: e.digest, source: 'extra', role: e.role, evidence: [`added with --image (--extra-role ${e.role})`] }, e.measured),
    ),
    ...(input.operators?.images ?? []).map((o) => ({
      ...planned({ name: o.name, names: [o.name], pullSpec: o.pullSpec, digest: o.digest, source: o.source, role: o.role, evidence: o.evidence }, o.measured),
      operator: { packages: o.packages, bundles: o.bundles },
    })),
  ];
  const unique = dedupeByPullSpec(images);
  const kept = new Set(unique.map((i) => i.digest));
  const skipped: SkippedImage[] = input.components
    .filter((c) => classificationOf(input, c).role === 'none' && !kept.has(c.digest))
    .map((c) => ({ name: c.name, names: c.names, pullSpec: c.pullSpec, digest: c.digest, why: classificationOf(input, c).evidence.join('; ') }))
    .sort((a, b) => a.name.localeCompare(b.name));

  const base = objectName(`${input.namePrefix}-${input.release.version}`);
  const warnings = [...input.warnings];
  const onRole = (role: SetRole) => (i: PlannedImage) => i.role === 'all' || i.role === role;
  const releaseImages = unique.filter((i) => i.operator === undefined);
  const sets = (['control-plane', 'worker'] as const).flatMap((role) => {
    const releaseSets = buildSets(`${base}-${role}`, role, releaseImages.filter(onRole(role)));
    return [...releaseSets, ...operatorSets(base, role, unique.filter((i) => i.operator !== undefined && onRole(role)(i)), releaseSets.length, warnings, input.operators?.summary)];
  });

  return {
    apiVersion: PLAN_API_VERSION,
    kind: 'Plan',
    release: {
      pullSpec: input.release.pullSpec,
      digest: input.release.digest,
      manifestDigest: input.release.manifestDigest,
      version: input.release.version,
      architecture: input.release.architecture,
      multiArch: input.release.multiArch,
      channels: input.release.channels,
    },
    profile: input.cluster.profile,
    cluster: input.cluster,
    images: unique,
    skipped,
    sets,
    ...(input.held ? { nodes: newBytesPerNode(unique, sets, input.held.nodes, input.held.layers) } : {}),
    ...(input.operators ? { operators: input.operators.summary, perNode: roleTotals(unique, sets) } : {}),
    warnings: [...new Set(warnings)].sort(),
  };
}

function classificationOf(input: PlanInput, c: ComponentImage): Classification {
  const cls = input.classifications.get(c.digest);
  if (!cls) throw new Error(`internal: component ${c.name} was not classified`);
  return cls;
}

type ImageIdentity = Omit<PlannedImage, 'compressedBytes' | 'diskBytes' | 'sizeMethod' | 'config' | 'layers'>;

function planned(id: ImageIdentity, m: MeasuredImage): PlannedImage {
  const methods = new Set(m.layers.map((l) => l.method));
  return {
    ...id,
    compressedBytes: m.config.size + sum(m.layers.map((l) => l.compressedBytes)),
    diskBytes: sum(m.layers.map((l) => l.diskBytes)),
    sizeMethod: methods.size === 1 ? [...methods][0]! : methods.size === 0 ? 'uncompressed' : 'mixed',
    config: m.config,
    layers: m.layers,
  };
}

/** An extra image that is also in the release keeps one entry: the wider role wins. */
function dedupeByPullSpec(images: PlannedImage[]): PlannedImage[] {
  const out = new Map<string, PlannedImage>();
  for (const img of images) {
    const seen = out.get(img.pullSpec);
    if (!seen) {
      out.set(img.pullSpec, img);
      continue;
    }
    const role: ImageRole = seen.role === img.role ? seen.role : 'all';
    out.set(img.pullSpec, { ...seen, role, evidence: [...seen.evidence, ...img.evidence] });
  }
  return [...out.values()].sort((a, b) => (a.source === b.source ? a.name.localeCompare(b.name) : SOURCE_ORDER[a.source] - SOURCE_ORDER[b.source]));
}

const SOURCE_ORDER: Record<PlannedImage['source'], number> = { release: 0, component: 1, extra: 2, catalog: 3, operator: 4 };

/**
 * One set per operator package and role (its label names the package, so GitOps and prune see
 * which operator a set serves); an image two packages bring is in both (MCO pins it once).
 */
function operatorSets(base: string, role: SetRole, images: readonly PlannedImage[], releaseSets: number, warnings: string[], summary: PlannedOperators | undefined): PlannedSet[] {
  if (images.length === 0) return [];
  const packages = [...new Set(images.flatMap((i) => i.operator!.packages))].sort();
  const perPackage = packages.map((pkg) => ({ pkg, images: images.filter((i) => i.operator!.packages.includes(pkg)) }));
  const count = perPackage.reduce((n, p) => n + Math.ceil(p.images.length / MAX_IMAGES_PER_SET), 0);
  if (releaseSets + count > MAX_SETS_PER_POOL) {
    warnings.push(`${packages.length} operator packages would make ${releaseSets + count} sets for the ${role} pool, over MCO's ${MAX_SETS_PER_POOL}: their images share one set per role`);
    return buildSets(`${base}-operators-${role}`, role, images);
  }
  return perPackage.flatMap(({ pkg, images: own }) => {
    const bundles = [...new Set(own.flatMap((i) => i.operator!.bundles))].sort();
    const head = newestBundle(pkg, bundles, summary);
    return buildSets(objectName(`${base}-op-${pkg}-${role}`), role, own).map((set) => ({
      ...set,
      labels: { ...set.labels, [OPERATOR_PACKAGE_LABEL]: objectName(pkg).slice(0, 63) },
      operator: { package: pkg, bundles, ...(head ? { head } : {}) },
    }));
  });
}

/** The bundle of the highest version among `bundles` of `pkg` (semver; a version it cannot read loses). */
function newestBundle(pkg: string, bundles: readonly string[], summary: PlannedOperators | undefined): string | undefined {
  const versions = (summary?.bundles ?? []).filter((b) => b.package === pkg && bundles.includes(b.name));
  const readable = versions.filter((b) => semver.valid(b.version, { loose: true }));
  return readable.sort((a, b) => semver.rcompare(a.version, b.version, { loose: true }))[0]?.name;
}

/** Per role, every set together on one node: blobs and layers counted once across sets. */
function roleTotals(images: readonly PlannedImage[], sets: readonly PlannedSet[]): PlannedRoleTotal[] {
  const byPullSpec = new Map(images.map((i) => [i.pullSpec, i]));
  return (['control-plane', 'worker'] as const).flatMap((role) => {
    const own = sets.filter((s) => s.role === role);
    if (own.length === 0) return [];
    const onNode = [...new Set(own.flatMap((s) => s.images))].map((p) => byPullSpec.get(p)!);
    return [{ role, sets: own.map((s) => s.name), images: onNode.length, ...setSizes(onNode) }].map(({ estimate: _, ...total }) => total);
  });
}

function buildSets(name: string, role: SetRole, images: readonly PlannedImage[]): PlannedSet[] {
  if (images.length === 0) return [];
  const sorted = [...images].sort((a, b) => a.pullSpec.localeCompare(b.pullSpec));
  const parts: PlannedImage[][] = [];
  for (let i = 0; i < sorted.length; i += MAX_IMAGES_PER_SET) parts.push(sorted.slice(i, i + MAX_IMAGES_PER_SET));
  return parts.map((part, i) => ({
    name: parts.length === 1 ? name : `${name}-part-${i + 1}`,
    role,
    labels: { [POOL_ROLE_LABEL]: POOL_OF[role] },
    images: part.map((p) => p.pullSpec),
    ...setSizes(part),
  }));
}

function setSizes(images: readonly PlannedImage[]): Pick<PlannedSet, 'compressedBytes' | 'diskBytes' | 'estimate'> {
  const blobs = new Map<string, number>();
  const layers = new Map<string, { diskBytes: number; exact: boolean }>();
  for (const img of images) {
    blobs.set(img.config.digest, img.config.size);
    for (const l of img.layers) {
      blobs.set(l.digest, l.compressedBytes);
      layers.set(l.digest, { diskBytes: l.diskBytes, exact: l.method !== 'estimate-2x' });
    }
  }
  const estimatedLayers = [...layers.values()].filter((l) => !l.exact).length;
  return {
    compressedBytes: sum([...blobs.values()]),
    diskBytes: sum([...layers.values()].map((l) => l.diskBytes)),
    estimate: { method: estimatedLayers === 0 ? 'exact' : 'partly-estimated', exactLayers: layers.size - estimatedLayers, estimatedLayers },
  };
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/** A Kubernetes object name from free text: lowercase, dots and dashes. */
export function objectName(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9.-]+/g, '-').replace(/^[.-]+|[.-]+$/g, '').slice(0, 253);
}
