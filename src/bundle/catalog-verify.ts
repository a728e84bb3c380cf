/**
 * `bundle verify` of the operator catalogs a bundle carries, beyond the digests every image's
 * blobs get: a rebuilt catalog is the source image's layers and exactly two more (one deleting
 * the old configs and the stale opm cache, one holding the filtered catalog), its config names
 * each layer's diff_id and serves the configs without `--cache-dir`, and its catalog layer parses
 * as a catalog (catalog/load.ts) holding exactly the packages and bundles the bundle records,
 * each channel entry a bundle it holds, each default channel one of its channels.
 */
import type { Readable } from 'node:stream';
import { BadInputError, PrestageError } from '../errors.js';
import { CATALOG_IMAGE_LIMITS } from '../catalog/image.js';
import { loadCatalogFile } from '../catalog/load.js';
import { parseManifest, type Descriptor, type ImageManifest, type Manifest } from '../registry/manifest.js';
import { serveCommand } from './catalog-image.js';
import { readLayerChange } from './catalog-tree.js';
import { keptPlatforms } from './content.js';
import { REF_NAME, type Bundle } from './layout.js';

export interface CatalogReaders {
  /** A small blob (manifest, config), verified. */
  read(digest: string): Promise<Buffer>;
  /** A layer, verified; undefined where layers cannot be read (tar parts are checked by digest only). */
  readonly layer?: (layer: Descriptor) => Promise<Readable>;
}

/** One line per catalog; a catalog that is not what its record says is exit 2, one line. */
export async function checkCatalogs(bundle: Pick<Bundle, 'index' | 'metadata'>, readers: CatalogReaders, where: string): Promise<string[]> {
  const lines: string[] = [];
  for (const record of bundle.metadata.operators?.catalogs ?? []) {
    const at = `${where}: catalog ${record.reference}`;
    const fail = (why: string): never => {
      throw new BadInputError(`${at}: ${why}; create the bundle again`);
    };
    if (!record.rebuilt) {
      lines.push(`catalog ${record.reference}: carried whole (full), ${record.image}`);
      continue;
    }
    const rebuilt = await platformManifests(bundle, readers, record.image, fail);
    const source = await platformManifests(bundle, readers, record.source, fail);
    if (rebuilt.length !== source.length) fail(`the rebuilt image has ${rebuilt.length} platform manifests, the source ${source.length}`);
    for (const [i, image] of rebuilt.entries()) {
      const base = source[i]!.layers.map((l) => l.digest);
      if (image.layers.length !== base.length + 2 || base.some((d, j) => image.layers[j]!.digest !== d)) fail('the rebuilt image is not the source image\'s layers and two more');
      const config = JSON.parse((await readers.read(image.config.digest)).toString('utf8')) as { rootfs?: { diff_ids?: unknown[] }; config?: { Cmd?: unknown } };
      if (config.rootfs?.diff_ids?.length !== image.layers.length) fail(`its config names ${config.rootfs?.diff_ids?.length ?? 0} diff_ids for ${image.layers.length} layers`);
      const serve = serveCommand(config);
      if (serve.serves && (serve.cacheDir !== undefined || JSON.stringify(config.config?.Cmd) !== JSON.stringify(['serve', record.configsDir]))) fail(`its command is not serve ${record.configsDir} without --cache-dir, so opm would refuse its stale cache`);
    }
    if (!readers.layer) {
      lines.push(`catalog ${record.reference}: rebuilt ${digestOf(record.image)}, its catalog layer checked by digest only (verify the unpacked directory to parse it)`);
      continue;
    }
    const [deleting, content] = rebuilt[0]!.layers.slice(-2) as [Descriptor, Descriptor];
    const configsDir = record.configsDir ?? fail('its record names no configs directory');
    const open = (layer: Descriptor) => ({ ...layer, open: () => readers.layer!(layer) });
    for (const path of [configsDir, ...(record.cacheDir ? [record.cacheDir] : [])]) {
      // Read with the path as the root: a layer's changes are kept only where they touch it.
      if (!(await readLayerChange(open(deleting), path, CATALOG_IMAGE_LIMITS, at)).hidden.includes(path.slice(1))) fail(`its next-to-last layer does not delete ${path}`);
    }
    const files = (await readLayerChange(open(content), configsDir, CATALOG_IMAGE_LIMITS, at)).files;
    const packages = new Set<string>();
    const bundles = new Set<string>();
    for (const [rel, docs] of files) {
      const file = loadCatalogFile(docs.map((d) => d.raw ?? JSON.stringify(d.doc)).join('\n'), `${at}: ${configsDir}/${rel}`);
      file.packages.forEach((p) => packages.add(p.name));
      file.bundles.forEach((b) => bundles.add(`${b.package}/${b.name}`));
      for (const c of file.channels) for (const e of c.entries) if (!file.bundles.some((b) => b.package === c.package && b.name === e.name)) fail(`channel ${c.name} of package ${c.package} lists ${e.name}, which its catalog file does not hold`);
      for (const p of file.packages) if (!file.channels.some((c) => c.package === p.name && c.name === p.defaultChannel)) fail(`package ${p.name}'s default channel ${p.defaultChannel ?? '(none)'} is not among its channels`);
    }
    const names = [...bundles].map((b) => b.split('/')[1]!).sort();
    if (!same([...packages].sort(), record.packages ?? []) || !same(names, [...(record.bundles ?? [])].sort())) {
      fail(`its catalog layer holds packages ${[...packages].sort().join(', ')} and ${bundles.size} bundles, not the recorded ${(record.packages ?? []).join(', ')} and ${(record.bundles ?? []).length}`);
    }
    lines.push(`catalog ${record.reference}: rebuilt ${digestOf(record.image)} holds ${(record.packages ?? []).join(', ')} (${names.length} bundles) over ${configsDir}, deleting the stale opm cache: verified`);
  }
  return lines;
}

/** The image manifests an index entry names (a list's kept platforms). */
async function platformManifests(bundle: Pick<Bundle, 'index' | 'metadata'>, readers: CatalogReaders, name: string, fail: (why: string) => never): Promise<ImageManifest[]> {
  const entry = bundle.index.manifests.find((m) => m.annotations[REF_NAME] === name) ?? fail(`index.json does not name ${name}`);
  const top = await manifest(readers, entry.digest, name);
  if (top.kind === 'image') return [top];
  const out: ImageManifest[] = [];
  for (const child of keptPlatforms(top, bundle.metadata.architecture, bundle.metadata.allPlatforms, name)) {
    const m = await manifest(readers, child.digest, name);
    if (m.kind === 'image') out.push(m);
  }
  return out;
}

async function manifest(readers: CatalogReaders, digest: string, name: string): Promise<Manifest> {
  try {
    return parseManifest(await readers.read(digest), undefined, `${name} manifest ${digest}`);
  } catch (err) {
    throw err instanceof PrestageError ? new BadInputError(err.message) : err;
  }
}

function same(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function digestOf(pullSpec: string): string {
  return pullSpec.slice(pullSpec.indexOf('@') + 1);
}

