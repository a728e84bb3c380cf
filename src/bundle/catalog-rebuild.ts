/**
 * `bundle create` with operators: each catalog the plan stages from travels FILTERED, as
 * oc-mirror v2 mirrors it, rebuilt from the source catalog image the bundle already holds (its
 * manifests, config and layers, or the source registry's for blobs left to a previous bundle):
 * the source's documents for what the plan stages (catalog-filter.ts), written as new layers over
 * the source's (catalog-image.ts), every blob hashed as built and again once written into the
 * layout. A catalog selected `full: true` with no packages is carried whole, as oc-mirror
 * mirrors it. What travels is recorded in prestage-bundle.json for `push` and `verify`.
 */
import type { Readable } from 'node:stream';
import { BadInputError } from '../errors.js';
import { CATALOG_IMAGE_LIMITS, catalogRootOf } from '../catalog/image.js';
import type { CatalogSelection } from '../catalog/selection.js';
import type { Plan } from '../plan/types.js';
import type { RegistryClient } from '../registry/client.js';
import { parseManifest, type Descriptor, type ImageManifest } from '../registry/manifest.js';
import { isRepositoryPath, isTag, parseReference } from '../registry/reference.js';
import { openVerifiedBlob, readVerifiedBlob, verifiedBlobStream } from './blob-files.js';
import { filterCatalog } from './catalog-filter.js';
import { blobOf, catalogLayers, rebuiltConfig, rebuiltList, rebuiltManifest, serveCommand, type Blob } from './catalog-image.js';
import { applyLayers } from '../catalog/layers.js';
import { readLayerChange } from './catalog-tree.js';
import type { BundleContent, BundleImage } from './content.js';
import { REF_NAME, type CatalogRecord, type IndexEntry } from './layout.js';
import type { LayoutFile } from './layout-write.js';
import type { SyncBehind } from './sync-behind.js';
import { IN_MEMORY_BLOB, storeBlob } from './transfer.js';

export interface CatalogInputs {
  readonly dir: string;
  readonly plan: Plan;
  readonly content: BundleContent;
  /** What the command asked of each catalog (`--config`, `--catalog`/`--package`); none for a plan file alone. */
  readonly selections: readonly CatalogSelection[];
  /** Blobs left to the previous bundle (`--since`): read from the source registry instead. */
  readonly external: (digest: string) => boolean;
  readonly client: RegistryClient;
  readonly written: SyncBehind;
  readonly warn: (line: string) => void;
}

export interface CarriedCatalogs {
  /** The rebuilt images, as index.json names them. */
  readonly entries: readonly IndexEntry[];
  readonly files: readonly LayoutFile[];
  readonly records: readonly CatalogRecord[];
}

export async function carryCatalogs(inputs: CatalogInputs): Promise<CarriedCatalogs> {
  const entries: IndexEntry[] = [];
  const files = new Map<string, LayoutFile>();
  const records: CatalogRecord[] = [];
  for (const catalog of inputs.plan.operators?.catalogs ?? []) {
    const selection = inputs.selections.find((s) => s.catalog === catalog.reference);
    const image = inputs.content.images.find((i) => i.pullSpec === catalog.pullSpec);
    if (!image) throw new Error(`bundle create: catalog ${catalog.pullSpec} is not among the bundle's images`);
    const targets = catalogTargets(catalog.reference, selection);
    if (selection?.full && selection.packages.length === 0) {
      records.push({ reference: catalog.reference, source: image.pullSpec, image: image.pullSpec, rebuilt: false, ...targets });
      continue;
    }
    const built = await rebuildCatalog(inputs, catalog.reference, image, selection);
    for (const blob of built.blobs) files.set(blob.digest, { digest: blob.digest, size: blob.bytes.length });
    const name = `${image.ref.registry}/${image.ref.repository}@${built.top.digest}`;
    entries.push({ mediaType: built.top.mediaType, digest: built.top.digest, size: built.top.bytes.length, annotations: { [REF_NAME]: name } });
    records.push({ reference: catalog.reference, source: image.pullSpec, image: name, rebuilt: true, configsDir: built.configsDir, packages: built.packages, bundles: built.bundles, ...(built.cacheDir ? { cacheDir: built.cacheDir } : {}), ...targets });
  }
  return { entries, files: [...files.values()], records };
}

/** Where push puts the catalog: the ISC's targetCatalog and targetTag, else its own repository and tag. */
function catalogTargets(reference: string, selection: CatalogSelection | undefined): Pick<CatalogRecord, 'targetCatalog' | 'tag'> {
  const where = `catalog ${reference}`;
  const targetCatalog = selection?.targetCatalog;
  if (targetCatalog !== undefined && !isRepositoryPath(targetCatalog)) throw new BadInputError(`${where}: targetCatalog ${JSON.stringify(targetCatalog)} is not a repository path (lowercase components joined by /)`);
  const tag = selection?.targetTag ?? parseReference(reference).tag;
  if (tag !== undefined && !isTag(tag)) throw new BadInputError(`${where}: targetTag ${JSON.stringify(tag)} is not a tag ([A-Za-z0-9_][A-Za-z0-9._-]{0,127})`);
  return { ...(targetCatalog !== undefined ? { targetCatalog } : {}), ...(tag !== undefined ? { tag } : {}) };
}

interface Rebuilt {
  readonly top: Blob;
  readonly blobs: readonly Blob[];
  readonly configsDir: string;
  readonly cacheDir?: string;
  readonly packages: readonly string[];
  readonly bundles: readonly string[];
}

async function rebuildCatalog(inputs: CatalogInputs, reference: string, image: BundleImage, selection: CatalogSelection | undefined): Promise<Rebuilt> {
  const where = `catalog ${reference}`;
  const [top, ...children] = image.manifests;
  const isList = parseManifest(top!.bytes, top!.mediaType, `${where} manifest ${top!.digest}`).kind === 'list';
  const platforms = (isList ? children : [top!]).map((m) => ({ bytes: m.bytes, manifest: parseManifest(m.bytes, m.mediaType, `${where} manifest ${m.digest}`) as ImageManifest, digest: m.digest }));
  const configs = await Promise.all(platforms.map((p) => readConfig(inputs, image, p.manifest.config, where)));
  const configsDir = configsDirOf(configs[0]!, reference);
  const kept = new Map<string, Set<string>>();
  for (const b of inputs.plan.operators!.bundles.filter((x) => x.catalog === reference)) kept.set(b.package, (kept.get(b.package) ?? new Set()).add(b.name));
  // The catalog's documents are the same on every platform: read from the first one's layers.
  const changes = await Promise.all(platforms[0]!.manifest.layers.map((layer) => readLayerChange({ ...layer, open: () => layerStream(inputs, image, layer) }, configsDir, CATALOG_IMAGE_LIMITS, where, (pkg) => kept.has(pkg))));
  const warnings: string[] = [];
  const filtered = filterCatalog(applyLayers(changes, configsDir), kept, selection, where, warnings);
  warnings.forEach(inputs.warn);

  const blobs: Blob[] = [];
  const rebuilt = new Map<string, Blob>();
  let cacheDir: string | undefined;
  for (const [i, platform] of platforms.entries()) {
    const source = configs[i]!;
    const serve = serveCommand(JSON.parse(source.toString('utf8')) as Record<string, unknown>);
    cacheDir ??= serve.cacheDir;
    const layers = await catalogLayers(platform.manifest.mediaType, configsDir, serve.cacheDir, filtered.files, createdOf(source));
    const config = blobOf(rebuiltConfig(source, layers, configsDir, where), platform.manifest.config.mediaType);
    const manifest = blobOf(rebuiltManifest(platform.bytes, config, layers), platform.manifest.mediaType);
    blobs.push(...layers, config, manifest);
    rebuilt.set(platform.digest, manifest);
  }
  const list = isList ? blobOf(rebuiltList(top!.bytes, rebuilt), top!.mediaType) : undefined;
  if (list) blobs.push(list);
  await store(inputs, blobs);
  return { top: list ?? rebuilt.get(top!.digest)!, blobs, configsDir, ...(cacheDir ? { cacheDir } : {}), packages: filtered.packages, bundles: filtered.bundles };
}

/** Into the layout, each blob once, then read back and checked against its digest. */
async function store(inputs: CatalogInputs, blobs: readonly Blob[]): Promise<void> {
  const seen = new Set<string>();
  for (const blob of blobs) {
    if (seen.has(blob.digest)) continue;
    seen.add(blob.digest);
    inputs.written.add(storeBlob(inputs.dir, blob.digest, blob.bytes), blob.bytes.length);
    if (blob.bytes.length <= IN_MEMORY_BLOB) await readVerifiedBlob(inputs.dir, blob.digest, `rebuilt catalog blob ${blob.digest}`);
    else await (await openVerifiedBlob(inputs.dir, { mediaType: blob.mediaType, digest: blob.digest, size: blob.bytes.length })).close();
  }
}

async function readConfig(inputs: CatalogInputs, image: BundleImage, config: Descriptor, where: string): Promise<Buffer> {
  if (inputs.external(config.digest)) return inputs.client.readBlob(image.ref, config, 4 * 1024 * 1024);
  return readVerifiedBlob(inputs.dir, config.digest, `${where} config ${config.digest}`);
}

/** A layer from the layout (hashed whole before it is read), or from the source for one the previous bundle carried. */
async function layerStream(inputs: CatalogInputs, image: BundleImage, layer: Descriptor): Promise<Readable> {
  return inputs.external(layer.digest) ? inputs.client.blobStream(image.ref, layer) : verifiedBlobStream(inputs.dir, layer);
}

/** The FBC root the configs label names, checked as planning checks it (catalog/image.ts). */
function configsDirOf(config: Buffer, named: string): string {
  let labels: Record<string, unknown>;
  try {
    labels = (JSON.parse(config.toString('utf8')) as { config?: { Labels?: Record<string, unknown> | null } }).config?.Labels ?? {};
  } catch {
    throw new BadInputError(`catalog ${named}: its image config is not JSON; not a catalog image`);
  }
  return catalogRootOf(labels, named);
}

/** The source's creation time: the new layers' file times, so a rerun builds the same bytes. */
function createdOf(config: Buffer): Date {
  const { created } = JSON.parse(config.toString('utf8')) as { created?: unknown };
  const time = typeof created === 'string' ? new Date(created) : new Date(0);
  return Number.isNaN(time.getTime()) ? new Date(0) : time;
}

