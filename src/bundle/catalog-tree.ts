/**
 * A catalog image's file-based catalog as its filesystem holds it, read from layer streams (the
 * bundle's own blobs, or the source registry for blobs a previous bundle carried) by the one layer
 * reader (catalog/layers.ts). Unlike catalog/image.ts, which keeps a compact model, this keeps the
 * documents themselves (a JSON document as its own text), so a filtered catalog can be written from
 * what the catalog said; only the documents of the packages asked for are kept, so a large catalog
 * costs little memory.
 */
import { BadInputError } from '../errors.js';
import type { CatalogImageLimits } from '../catalog/image.js';
import { readLayerChange as readLayer, type LayerChange, type LayerSource } from '../catalog/layers.js';
import { catalogDocuments } from '../catalog/load.js';

/** One document of a catalog file: parsed, with its text when it was JSON. */
export interface CatalogDoc {
  readonly doc: { readonly [key: string]: unknown };
  readonly raw?: string;
}

/** The package a document belongs to: an `olm.package`'s name, anything else's `package`. */
export function packageOf(doc: CatalogDoc['doc']): string | undefined {
  const name = doc.schema === 'olm.package' ? doc.name : doc.package;
  return typeof name === 'string' ? name : undefined;
}

/**
 * One layer's changes under `configsDir`, each file as its kept documents; `keep` picks the
 * packages whose documents are kept (every document when absent). `where` names the catalog in
 * one-line errors.
 */
export function readLayerChange(layer: LayerSource, configsDir: string, limits: CatalogImageLimits, where: string, keep?: (pkg: string) => boolean): Promise<LayerChange<CatalogDoc[]>> {
  return readLayer(layer, configsDir, limits, where, (text, rel) => keptDocuments(text, `${where}: ${configsDir}/${rel}`, limits, keep));
}

function keptDocuments(text: string, where: string, limits: CatalogImageLimits, keep?: (pkg: string) => boolean): CatalogDoc[] {
  const kept: CatalogDoc[] = [];
  for (const { doc, index, raw } of catalogDocuments(text, where, limits)) {
    if (doc === null || doc === undefined) continue;
    if (typeof doc !== 'object' || Array.isArray(doc)) throw new BadInputError(`${where} document ${index + 1} is not an object`);
    const pkg = packageOf(doc);
    if (keep && (pkg === undefined || !keep(pkg))) continue;
    kept.push(raw !== undefined ? { doc, raw } : { doc });
  }
  return kept;
}
