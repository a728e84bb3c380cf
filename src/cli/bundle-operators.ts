/**
 * What `bundle create|verify|push` say and write of the operator catalogs a bundle carries:
 * create's line per catalog (rebuilt, filtered to what the plan stages, or carried whole),
 * verify's catalog checks (bundle/catalog-verify.ts), and push's CatalogSource and ClusterCatalog
 * files beside the ImageDigestMirrorSet (bundle/catalog-resources.ts), never under a dry run.
 */
import { join } from 'node:path';
import { writeFileAtomic } from '../atomic-file.js';
import { verifiedBlobStream } from '../bundle/blob-files.js';
import { catalogResources } from '../bundle/catalog-resources.js';
import { checkCatalogs } from '../bundle/catalog-verify.js';
import type { Bundle, CatalogRecord } from '../bundle/layout.js';
import type { PushReport } from '../bundle/push.js';
import type { Descriptor } from '../registry/manifest.js';
import { count } from '../plural.js';

/** `bundle create`: one line per catalog. */
export function catalogLines(records: readonly CatalogRecord[]): string[] {
  return records.map((r) => r.rebuilt
    ? `catalog ${r.reference}: rebuilt ${r.image.slice(r.image.indexOf('@') + 1)} with ${count(r.packages?.length ?? 0, 'package')} (${(r.packages ?? []).join(', ')}), ${count(r.bundles?.length ?? 0, 'bundle')}; ${r.configsDir}${r.cacheDir ? ` and the stale opm cache ${r.cacheDir}` : ''} deleted below it, served as serve ${r.configsDir} (opm builds its cache at start)`
    : `catalog ${r.reference}: carried whole (full: true)`);
}

/** `bundle verify`: a directory's catalog layers are parsed; tar parts' only hashed (`layers` absent). */
export function verifyCatalogs(bundle: Pick<Bundle, 'index' | 'metadata'>, read: (digest: string) => Promise<Buffer>, dir: string | undefined, where: string): Promise<string[]> {
  const layer = dir !== undefined ? (d: Descriptor) => verifiedBlobStream(dir, d) : undefined;
  return checkCatalogs(bundle, { read, ...(layer ? { layer } : {}) }, where);
}

/** The files push writes for the catalogs, by name: the dry run lists them. */
export function catalogResourceFiles(report: Pick<PushReport, 'catalogs'>): string[] {
  return report.catalogs.flatMap((c) => catalogResources(c.mirror, c.tagged).map((r) => r.file));
}

/** Write each pushed catalog's CatalogSource and ClusterCatalog into `outputDir`; their lines. */
export async function writeCatalogResources(report: Pick<PushReport, 'catalogs'>, outputDir: string): Promise<string[]> {
  const lines: string[] = [];
  for (const c of report.catalogs) {
    const resources = catalogResources(c.mirror, c.tagged);
    for (const r of resources) await writeFileAtomic(join(outputDir, r.file), r.text);
    lines.push(`catalog ${c.record.reference}: ${c.mirror}${c.tagged ? ` (${c.tagged})` : ''}; wrote ${resources.map((r) => `${join(outputDir, r.file)} (${r.kind} ${r.name})`).join(' and ')}`);
  }
  return lines;
}
