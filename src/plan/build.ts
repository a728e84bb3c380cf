/**
 * The plan pipeline: read release facts (I/O) → the CVO's inputs (cvo-inputs.ts) → classify
 * (pure) → the node OS (os-streams.ts) → from a live cluster, re-classify by what runs → measure
 * (I/O) → assemble (pure).
 */
import { readFileSync } from 'node:fs';
import { BadInputError, RegistryError } from '../errors.js';
import { PlatformNotFoundError, type RegistryClient } from '../registry/client.js';
import { digestReference, parseReference } from '../registry/reference.js';
import { readRelease, type ReleaseFacts } from '../release/payload.js';
import type { ComponentImage } from '../release/image-references.js';
import type { ExtraImage, MeasuredOperatorImage } from './assemble.js';
import type { CatalogSelection } from '../catalog/selection.js';
import { chooseBundles, operatorSummary, parseOperatorReference, readCatalogs, readLiveCatalogs, withBundleDeployments, withLiveBundles } from './choose-bundles.js';
import { placeOperatorImages } from './operators.js';
import type { Classification, ClassifyOptions } from './classify.js';
import type { InclusionOptions } from './inclusion.js';
import type { OsImage, StreamChoice } from './os-streams.js';
import { PLATFORMS, type Platform } from './platform.js';
import type { LayerSizeCache, MeasuredImage } from './sizes.js';
import type { NodeHolding } from './held.js';
import type { LiveCluster } from './live.js';
import type { ImageRole, Plan, PlannedOsStreams, PlanObserved } from './types.js';

/** The classification options less what cvo-inputs.ts derives (gates, capabilities, feature sets, versions). */
export interface PlanOptions extends Omit<ClassifyOptions, Exclude<keyof InclusionOptions, 'profile' | 'exclude'>> {
  readonly release: string;
  readonly arch: string;
  /** `--feature-set`; undefined: the live cluster's, else Default. */
  readonly featureSet?: string;
  /** `--feature-gates A,-B` (CustomNoUpgrade). */
  readonly featureGates?: readonly string[];
  /** `--os-stream`: node OS streams pinned besides those the nodes boot by default. */
  readonly osStreams?: readonly string[];
  /**
   * `--capability-set` (install-config baselineCapabilitySet; undefined: the live cluster's
   * enabled capabilities, else vCurrent) and `--capabilities` (additional).
   */
  readonly capabilitySet?: string;
  readonly additionalCapabilities: readonly string[];
  /** A running cluster to plan the upgrade of (live.ts); its platform and capabilities unless flags say otherwise. */
  readonly live?: LiveCluster;
  /** Extra image references (tags are resolved to digests). */
  readonly extraImages: readonly string[];
  readonly extraRole: ImageRole;
  readonly namePrefix: string;
  /** Operator catalogs and what to stage of each (`--config`, `--catalog`/`--package`). */
  readonly operators?: readonly CatalogSelection[];
  /** What reading the inputs found to say (a config's fields prestage does not use). */
  readonly inputWarnings?: readonly string[];
  /**
   * A hop of a Control Plane Only update before its last: the worker pools stay paused until
   * `until`, so workers never boot this release's node OS (MCO syncs only status on a paused
   * pool), though they run its DaemonSets (FACTS §12).
   */
  readonly workersPaused?: { readonly until: string };
  /** Layer sizes read by earlier plans (the hops of a path share most layers): each read once. */
  readonly layerSizes?: LayerSizeCache;
}

/** Where a plan is, for a progress line. */
export type PlanProgress =
  | { readonly phase: 'release'; readonly release: string }
  | { readonly phase: 'sizing'; readonly done: number; readonly total: number };

/**
 * The decisions' modules, loaded while the release is read: its round trips leave the CPU idle,
 * and each module loaded before the first request delays it.
 */
function loadDecisions() {
  return Promise.all([import('./cvo-inputs.js'), import('./classify.js'), import('./os-streams.js'), import('./release-api.js'), import('./sizes.js'), import('./assemble.js'), import('./live.js')])
    .then(([cvo, classify, os, api, sizes, assemble, live]) => ({
      cvoInputs: cvo.cvoInputs,
      classifyComponents: classify.classifyComponents,
      runsMachineConfigOperator: classify.runsMachineConfigOperator,
      withoutMachineConfigOperator: classify.withoutMachineConfigOperator,
      osImagesOf: os.osImagesOf,
      isNodeOsImage: os.isNodeOsImage,
      chooseStreams: os.chooseStreams,
      classifyOsImages: os.classifyOsImages,
      majorMinor: api.majorMinor,
      measureImages: sizes.measureImages,
      assemblePlan: assemble.assemblePlan,
      classifyLive: live.classifyLive,
    }));
}
type Decisions = Awaited<ReturnType<typeof loadDecisions>>;

export async function buildPlan(client: RegistryClient, opts: PlanOptions, onProgress?: (progress: PlanProgress) => void): Promise<Plan> {
  onProgress?.({ phase: 'release', release: opts.release });
  checkOverrides(opts);
  const loading = loadDecisions();
  loading.catch(() => undefined);
  // Catalogs are read while the release is: both are mostly waiting on registries.
  const catalogWarnings: string[] = [];
  const catalogs = opts.operators && opts.operators.length > 0 ? readCatalogs(client, opts.operators, opts.arch, catalogWarnings) : undefined;
  catalogs?.catch(() => undefined);
  // So are the catalogs a live cluster's operators come from (live-operators.ts).
  const liveCatalogs = opts.live?.operators ? readLiveCatalogs(client, opts.live.operators, opts.arch) : undefined;
  liveCatalogs?.catch(() => undefined);
  const facts = await readRelease(client, opts.release, opts.arch);
  const decide = await loading;
  const { cvoInputs, classifyComponents, classifyLive, measureImages, assemblePlan } = decide;
  const warnings = [...facts.warnings, ...(opts.inputWarnings ?? [])];
  const selected = catalogs ? await chooseBundles(await catalogs, opts.operators!, warnings) : undefined;
  const operators = selected ? { ...selected, chosen: await withBundleDeployments(client, selected.chosen, opts.arch, warnings) } : undefined;
  warnings.push(...catalogWarnings);
  const { live } = opts;
  const cvo = cvoInputs({
    version: facts.release.version,
    documents: facts.documents,
    profile: opts.profile,
    ...(opts.featureSet !== undefined ? { featureSet: opts.featureSet } : {}),
    featureGates: opts.featureGates ?? [],
    ...(opts.capabilitySet !== undefined ? { capabilitySet: opts.capabilitySet } : {}),
    additionalCapabilities: opts.additionalCapabilities,
    exclude: opts.exclude,
    ...(live ? { live } : {}),
  });
  warnings.push(...cvo.warnings);
  const platform = opts.platform ?? (live?.platform !== undefined ? livePlatform(live.platform, warnings) : undefined);
  const classifyOptions: ClassifyOptions = { ...cvo.inclusion, controlPlaneOnly: opts.controlPlaneOnly, allNodes: opts.allNodes, ...(platform ? { platform } : {}) };
  let classifications = classifyComponents(facts.components, facts.documents, classifyOptions);
  const { osImages, streams } = await decideNodeOs(decide, client, facts, opts, classifications, warnings);
  let observed: PlanObserved | undefined;
  let current: ReleaseFacts | undefined;
  if (live) {
    onProgress?.({ phase: 'release', release: live.release.pullSpec });
    current = await readRelease(client, live.release.pullSpec, opts.arch);
    const planned = classifyLive({
      cluster: live,
      current: { version: current.release.version, digest: current.release.digest, components: current.components },
      target: { version: facts.release.version, components: facts.components },
      offline: classifications,
      forced: [...opts.allNodes, ...opts.controlPlaneOnly],
    });
    classifications = planned.classifications;
    observed = planned.observed;
    warnings.push(...planned.warnings);
  }
  if (opts.workersPaused) classifications = offPausedWorkers(decide.isNodeOsImage, facts.components, classifications, facts.release.version, opts.workersPaused.until);
  warnUnknownNames(opts, facts.components.flatMap((c) => c.names), warnings);
  const staged = await withLiveBundles(client, operators, live && current && liveCatalogs ? { cluster: live, read: await liveCatalogs, currentRelease: current.release.version, targetRelease: facts.release.version } : undefined, opts.arch, warnings);

  // Images in no set are not measured: nothing reads their sizes, but the OS streams left out (what they save).
  const kept = facts.components.filter((c) => classifications.get(c.digest)!.role !== 'none');
  const leftOutOs = osImages.filter((i) => classifications.get(i.component.digest)!.role === 'none').map((i) => i.component);
  const extraRefs = opts.extraImages.map((text) => parseReference(text));
  const operatorImages = staged ? placeOperatorImages(staged.chosen, staged.catalogs.filter((c) => !staged.offNodes.has(c.reference)).map((c) => ({ reference: c.reference, pullSpec: c.pullSpec, packages: staged.packagesOf.get(c.reference) ?? [] }))) : [];
  const operatorRefs = operatorImages.map((o) => parseOperatorReference(o.reference, o.bundles));
  const measured = await measureImages(
    client,
    [parseReference(facts.release.pullSpec), ...[...kept, ...leftOutOs].map((c) => parseReference(c.pullSpec)), ...extraRefs, ...operatorRefs],
    opts.arch,
    warnings,
    onProgress && ((done, total) => onProgress({ phase: 'sizing', done, total })),
    opts.layerSizes,
  );
  const releaseImage = measured[0]!;
  const sizes = new Map(kept.map((c, i) => [c.digest, measured[1 + i]!]));
  const leftOutSizes = new Map(leftOutOs.map((c, i) => [c.digest, measured[1 + kept.length + i]!]));
  const extras: ExtraImage[] = extraRefs.map((ref, i) => {
    const m = measured[1 + kept.length + leftOutOs.length + i]!;
    return { name: ref.repository.split('/').at(-1)!, pullSpec: digestReference(ref, m.digest), digest: m.digest, role: opts.extraRole, measured: m };
  });
  const operatorsMeasured: MeasuredOperatorImage[] = operatorImages.map((o, i) => {
    const m = measured[1 + kept.length + leftOutOs.length + extraRefs.length + i]!;
    return { ...o, pullSpec: digestReference(operatorRefs[i]!, m.digest), digest: m.digest, source: o.bundles.length === 0 ? 'catalog' : 'operator', measured: m };
  });
  if (!platform) warnPlatformSavings(kept, classifications, sizes, warnings);
  const measuredByDigest = new Map([[releaseImage.digest, releaseImage], ...[...sizes.values(), ...extras.map((e) => e.measured)].map((m) => [m.digest, m] as const)]);
  const held = live && current ? await readHeld(client, live, [current, facts], measuredByDigest, opts.arch, warnings) : undefined;

  return assemblePlan({
    release: facts.release,
    releaseImage,
    components: facts.components,
    classifications,
    sizes,
    extras,
    cluster: {
      profile: opts.profile,
      featureSet: cvo.inclusion.featureSet,
      capabilities: [...cvo.inclusion.capabilities].sort(),
      exclude: [...opts.exclude].sort(),
      platform: platform ?? null,
      ...(cvo.inclusion.featureGates ? { featureGates: { from: cvo.gatesFrom!, enabled: [...cvo.inclusion.featureGates].sort() } } : {}),
      ...(osImages.length > 0 ? { osStreams: osStreamSummary(osImages, streams, leftOutSizes) } : {}),
      ...(observed ? { observed } : {}),
    },
    namePrefix: opts.namePrefix,
    warnings,
    ...(held ? { held } : {}),
    ...(staged ? { operators: { images: operatorsMeasured, summary: { ...operatorSummary(staged), ...(staged.blocked.length > 0 ? { blocked: staged.blocked } : {}) } } } : {}),
  });
}

/** The node OS images of a hop the workers sit out: on control-plane nodes only, or in no set. */
function offPausedWorkers(isNodeOsImage: (c: ComponentImage) => boolean, components: readonly ComponentImage[], classifications: Map<string, Classification>, version: string, until: string): Map<string, Classification> {
  const out = new Map(classifications);
  for (const c of components) {
    const cls = out.get(c.digest)!;
    if (!isNodeOsImage(c) || (cls.role !== 'all' && cls.role !== 'worker')) continue;
    const why = `Control Plane Only update: the worker pools stay paused until ${until}, so workers never boot ${version}'s node OS`;
    out.set(c.digest, { ...cls, role: cls.role === 'all' ? 'control-plane' : 'none', evidence: [...cls.evidence, why] });
  }
  return out;
}

/**
 * What each node of a live cluster holds now, and the layers of those images: the release images
 * (current or target) its Pods name and the images sets already pin there, read from the
 * registry unless the plan measured them. An image that cannot be read counts as not held (its
 * layers are new): a warning, not a failure.
 */
async function readHeld(
  client: RegistryClient,
  live: LiveCluster,
  releases: readonly ReleaseFacts[],
  measured: ReadonlyMap<string, MeasuredImage>,
  arch: string,
  warnings: string[],
): Promise<{ nodes: NodeHolding[]; layers: Map<string, readonly string[]> }> {
  const pullSpecOf = new Map<string, string>();
  for (const release of releases) {
    pullSpecOf.set(release.release.digest, release.release.pullSpec);
    for (const c of release.components) pullSpecOf.set(c.digest, c.pullSpec);
  }
  const running = new Map<string, Set<string>>(live.nodes.map((n) => [n.name, new Set()]));
  for (const pod of live.pods) for (const digest of pod.digests) running.get(pod.node)?.add(digest);
  for (const { node, images } of live.pinned ?? []) {
    for (const pullSpec of images) {
      const digest = /@(sha256:[a-f0-9]{64})$/.exec(pullSpec)?.[1];
      if (!digest) continue;
      running.get(node)?.add(digest);
      if (!pullSpecOf.has(digest)) pullSpecOf.set(digest, pullSpec);
    }
  }
  const wanted = new Set([...running.values()].flatMap((digests) => [...digests].filter((d) => pullSpecOf.has(d))));
  const layers = new Map<string, readonly string[]>();
  const unread: string[] = [];
  await Promise.all([...wanted].map(async (digest) => {
    const known = measured.get(digest);
    if (known) return layers.set(digest, known.layers.map((l) => l.digest));
    try {
      const image = await client.resolveImage(parseReference(pullSpecOf.get(digest)!), arch);
      layers.set(digest, image.manifest.layers.map((l) => l.digest));
    } catch (error) {
      if (!(error instanceof RegistryError || error instanceof PlatformNotFoundError)) throw error;
      unread.push(pullSpecOf.get(digest)!);
    }
  }));
  if (unread.length > 0) warnings.push(`${unread.length} image(s) the nodes run could not be read (${unread.sort()[0]}${unread.length > 1 ? ', ...' : ''}): their layers count as new bytes`);
  return { nodes: live.nodes.map((n) => ({ name: n.name, role: n.role, images: [...running.get(n.name)!].sort() })), layers };
}

/**
 * What the machine-config operator does with the node OS (pure but for reading OS images'
 * labels): under a profile without it, its own image runs nowhere and no OS image is pinned;
 * else the OS streams the nodes boot are pinned (os-streams.ts). Flags that name a component win.
 */
async function decideNodeOs(decide: Decisions, client: RegistryClient, facts: ReleaseFacts, opts: PlanOptions, classifications: Map<string, Classification>, warnings: string[]): Promise<{ osImages: OsImage[]; streams: StreamChoice }> {
  const { live } = opts;
  const { runsMachineConfigOperator, withoutMachineConfigOperator, osImagesOf, chooseStreams, classifyOsImages, majorMinor } = decide;
  const forced = (names: readonly string[]) => names.some((n) => opts.allNodes.includes(n) || opts.controlPlaneOnly.includes(n));
  const mco = runsMachineConfigOperator(facts.components, classifications);
  if (!mco) withoutMachineConfigOperator(facts.components, classifications, opts.profile, forced);
  // Stream names (MCO's, from the images' labels) matter only with a choice to make: several
  // streams, pools that name theirs, or --os-stream.
  const byTag = osImagesOf(facts.components, new Map());
  const named = (opts.osStreams ?? []).length > 0 || (live?.osStreams !== undefined && (live.osStreams.defaultStream !== undefined || live.osStreams.pools.some((p) => p.stream !== undefined)));
  const osImages = new Set(byTag.map((i) => i.stream)).size > 1 || named
    ? osImagesOf(facts.components, await osImageLabels(client, byTag.map((i) => i.component), opts.arch, warnings))
    : byTag;
  const streams = chooseStreams(osImages, facts.documents, {
    requested: opts.osStreams ?? [],
    ...(live ? { live: live.osStreams ?? { pools: [] } } : {}),
    major: majorMinor(facts.release.version)?.[0] ?? 4,
    mco,
    profile: opts.profile,
  });
  classifyOsImages(osImages.filter((i) => !forced(i.component.names)), streams, classifications);
  return { osImages, streams };
}

/**
 * The config labels of the release's node OS images (their stream, `io.openshift.os.streamclass`,
 * as MCO reads it): one manifest and one small config per OS image, kept for a bundle. A config
 * that is no JSON leaves its image named by its tag, with a warning; a registry error fails the
 * plan, as it would when the image is measured.
 */
async function osImageLabels(client: RegistryClient, images: readonly ComponentImage[], arch: string, warnings: string[]): Promise<Map<string, Record<string, string>>> {
  const labels = new Map<string, Record<string, string>>();
  await Promise.all(images.map(async (c) => {
    const ref = parseReference(c.pullSpec);
    const image = await client.resolveImage(ref, arch);
    const bytes = await client.readBlob(ref, image.manifest.config, 1024 * 1024, true);
    try {
      labels.set(c.digest, (JSON.parse(bytes.toString('utf8')) as { config?: { Labels?: Record<string, string> } }).config?.Labels ?? {});
    } catch {
      warnings.push(`node OS image ${c.name}: its config is not JSON, so its stream is named by its tag`);
    }
  }));
  return labels;
}

/** The plan's OS stream summary: what is pinned, why, and what the streams left out would cost each node. */
function osStreamSummary(images: readonly OsImage[], choice: StreamChoice, leftOut: ReadonlyMap<string, MeasuredImage>): PlannedOsStreams {
  const skipped = choice.available.filter((s) => !choice.pinned.includes(s)).map((stream) => {
    const streamImages = images.filter((i) => i.stream === stream && leftOut.has(i.component.digest));
    const layers = new Map(streamImages.flatMap((i) => leftOut.get(i.component.digest)!.layers.map((l) => [l.digest, l] as const)));
    return {
      stream,
      images: streamImages.map((i) => i.component.name).sort(),
      compressedBytes: [...layers.values()].reduce((a, l) => a + l.compressedBytes, 0),
      diskBytes: [...layers.values()].reduce((a, l) => a + l.diskBytes, 0),
    };
  });
  return { available: choice.available, pinned: choice.pinned, why: choice.why, skipped };
}

/** The cluster's Infrastructure platform; one prestage does not know keeps every platform's images. */
function livePlatform(type: string, warnings: string[]): Platform | undefined {
  const known = PLATFORMS.find((p) => p.toLowerCase() === type.toLowerCase());
  if (!known) warnings.push(`the cluster's platform ${type} is not one prestage knows (${PLATFORMS.join(', ')}): images of every platform kept`);
  return known;
}

function checkOverrides(opts: PlanOptions): void {
  const both = opts.controlPlaneOnly.filter((n) => opts.allNodes.includes(n));
  if (both.length > 0) throw new BadInputError(`--control-plane-only and --all-nodes both name ${both.join(', ')}; name each component in one of them`);
}

/**
 * Unknown platform: every platform's images are kept. Say what `--platform` would leave out
 * on the platform where it saves least (unique layers, as a node stores them).
 */
function warnPlatformSavings(kept: readonly ComponentImage[], classifications: ReadonlyMap<string, Classification>, sizes: ReadonlyMap<string, MeasuredImage>, warnings: string[]): void {
  const specific = kept.filter((c) => classifications.get(c.digest)!.platforms !== undefined);
  if (specific.length === 0) return;
  const layersOf = (images: readonly ComponentImage[]) => new Map(images.flatMap((c) => sizes.get(c.digest)!.layers.map((l) => [l.digest, l.diskBytes] as const)));
  const all = layersOf(kept);
  let least: { platform: Platform; images: number; bytes: number } | undefined;
  for (const platform of PLATFORMS) {
    const stay = kept.filter((c) => classifications.get(c.digest)!.platforms?.includes(platform) ?? true);
    const stayLayers = layersOf(stay);
    const bytes = [...all].filter(([digest]) => !stayLayers.has(digest)).reduce((a, [, n]) => a + n, 0);
    const images = kept.length - stay.length;
    if (!least || images < least.images || (images === least.images && bytes < least.bytes)) least = { platform, images, bytes };
  }
  warnings.push(`platform unknown, so images of every platform are kept (${specific.length} serve only some platforms): --platform would leave out at least ${least!.images} images, ${(least!.bytes / 2 ** 20).toFixed(1)} MiB on disk per node`);
}

function warnUnknownNames(opts: PlanOptions, known: string[], warnings: string[]): void {
  const names = new Set(known);
  for (const n of [...opts.controlPlaneOnly, ...opts.allNodes]) {
    if (!names.has(n)) warnings.push(`--control-plane-only/--all-nodes name ${n} is not a component of this release`);
  }
}

/** `--images-file`: one reference per line; blank lines and `#` comments ignored. */
export function readImagesFile(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new BadInputError(`cannot read --images-file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  return text.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);
}
