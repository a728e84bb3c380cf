/**
 * Where `bundle push` puts the operator catalogs a bundle carries: the ImageSetConfiguration's
 * `targetCatalog` under the push target (as oc-mirror places it under its destination), else
 * where the catalog's source repository goes like every image; tagged with `targetTag`, else the
 * tag the catalog was named by. A rebuilt catalog is pushed only there (no source serves it, so
 * the mirror set never names it); one carried whole also stays where its repository goes.
 */
import { BadInputError } from '../errors.js';
import { parseReference } from '../registry/reference.js';
import type { CatalogRecord } from './layout.js';
import { mirrorRepository, type MirrorTarget } from './mirror.js';

/** The repository of the target a catalog is pushed to. */
export function catalogRepository(record: CatalogRecord, target: MirrorTarget): string {
  if (record.targetCatalog === undefined) return mirrorRepository(parseReference(record.reference), target);
  return [target.prefix, record.targetCatalog].filter(Boolean).join('/');
}

/** The bundle's images with each catalog in its place (`catalog` set on the image pushed as the catalog). */
export function withCatalogs<T extends { readonly pullSpec: string; readonly repository: string; readonly catalog?: CatalogRecord }>(images: readonly T[], records: readonly CatalogRecord[], target: MirrorTarget): T[] {
  const out = [...images];
  for (const record of records) {
    const at = out.findIndex((i) => i.pullSpec === record.image && i.catalog === undefined);
    if (at < 0) throw new BadInputError(`the bundle's catalog ${record.reference} names image ${record.image}, which its index.json lacks; the bundle was altered: create it again`);
    const catalog = { ...out[at]!, repository: catalogRepository(record, target), catalog: record };
    if (record.rebuilt) out[at] = catalog;
    else out.push(catalog);
  }
  return out;
}
