/**
 * The filtered catalog a bundle carries, from the source catalog's own documents: the packages
 * the plan stages from it, their kept channels holding only kept entries, the bundles the plan
 * stages (what oc-mirror's selection keeps, and the dependencies prestage adds, so every bundle
 * the catalog offers has its images in the mirror), and the deprecations of what is kept.
 * Documents the filter leaves whole are written as the catalog wrote them; those it changes
 * (a channel's entries, a default channel, a deprecation list) from their parsed objects. One
 * `<package>/catalog.json` per package, as `opm render` writes a catalog. Pure.
 */
import type { DeclarativeConfig } from '../catalog/declcfg.js';
import { loadCatalogFile } from '../catalog/load.js';
import { selectFromCatalog } from '../catalog/select.js';
import type { CatalogSelection } from '../catalog/selection.js';
import { BadInputError } from '../errors.js';
import { packageOf, type CatalogDoc } from './catalog-tree.js';

export interface FilteredCatalog {
  /** `<package>/catalog.json` → its documents, JSON. */
  readonly files: ReadonlyMap<string, string>;
  readonly packages: readonly string[];
  readonly bundles: readonly string[];
}

type Json = { readonly [key: string]: unknown };

/**
 * `tree`: the source catalog's files (catalog-tree.ts), holding at least the documents of every
 * package in `kept`; `kept`: the bundles the plan stages, by package; `selection`: what the
 * command asked of this catalog, when known (a plan file alone names only the bundles).
 */
export function filterCatalog(tree: ReadonlyMap<string, readonly CatalogDoc[]>, kept: ReadonlyMap<string, ReadonlySet<string>>, selection: CatalogSelection | undefined, where: string, warnings: string[]): FilteredCatalog {
  const docs = [...tree.values()].flat().filter((d) => kept.has(packageOf(d.doc) ?? ''));
  const model = modelOf(docs, where);
  // The selection's kept channels, as select.ts filters them (the plan chose its bundles so; its warnings were said then).
  const selected = selection ? selectFromCatalog(model, selection, []).config : undefined;
  const entries = new Map<string, Set<string>>();
  const key = (pkg: string, channel: string): string => `${pkg}/${channel}`;
  for (const c of selected?.channels ?? []) {
    const names = c.entries.map((e) => e.name).filter((n) => kept.get(c.package)?.has(n));
    if (names.length > 0) entries.set(key(c.package, c.name), new Set(names));
  }
  // A kept bundle no kept channel lists (a dependency, or a plan file's bundle) keeps the channels that hold it.
  for (const [pkg, names] of kept) {
    for (const name of names) {
      const listed = model.channels.some((c) => c.package === pkg && entries.get(key(pkg, c.name))?.has(name));
      if (listed) continue;
      const holding = model.channels.filter((c) => c.package === pkg && c.entries.some((e) => e.name === name));
      if (holding.length === 0) throw new BadInputError(`${where}: package ${pkg} has no channel that lists bundle ${name}; the plan does not match this catalog`);
      for (const c of holding) entries.set(key(pkg, c.name), (entries.get(key(pkg, c.name)) ?? new Set()).add(name));
    }
  }
  const selectedDefaults = new Map((selected?.packages ?? []).map((p) => [p.name, p.defaultChannel]));
  const files = new Map<string, string>();
  const bundles: string[] = [];
  for (const pkg of [...kept.keys()].sort()) {
    const channels = model.channels.filter((c) => c.package === pkg && entries.has(key(pkg, c.name))).map((c) => c.name);
    if (channels.length === 0) throw new BadInputError(`${where}: no channel of package ${pkg} holds a bundle the plan stages`);
    const out: string[] = [];
    for (const d of docs.filter((x) => packageOf(x.doc) === pkg)) {
      const doc = d.doc;
      if (doc.schema === 'olm.package') {
        const wanted = selectedDefaults.get(pkg) ?? (typeof doc.defaultChannel === 'string' ? doc.defaultChannel : undefined);
        const defaultChannel = wanted !== undefined && channels.includes(wanted) ? wanted : channels[0]!;
        if (defaultChannel !== wanted) warnings.push(`${where}: package ${pkg}: its default channel ${wanted ?? '(none)'} holds no bundle the plan stages; the filtered catalog defaults to ${defaultChannel}`);
        out.push(defaultChannel === doc.defaultChannel ? text(d) : json({ ...doc, defaultChannel }));
      } else if (doc.schema === 'olm.channel') {
        const names = entries.get(key(pkg, String(doc.name)));
        if (!names) continue;
        const all = Array.isArray(doc.entries) ? (doc.entries as Json[]) : [];
        const keptEntries = all.filter((e) => names.has(String(e.name)));
        out.push(keptEntries.length === all.length ? text(d) : json({ ...doc, entries: keptEntries }));
      } else if (doc.schema === 'olm.bundle') {
        if (!kept.get(pkg)!.has(String(doc.name))) continue;
        bundles.push(String(doc.name));
        out.push(text(d));
      } else if (doc.schema === 'olm.deprecations') {
        const all = Array.isArray(doc.entries) ? (doc.entries as Json[]) : [];
        const keptEntries = all.filter((e) => deprecationKept(e, pkg, channels, kept.get(pkg)!));
        if (keptEntries.length > 0) out.push(keptEntries.length === all.length ? text(d) : json({ ...doc, entries: keptEntries }));
      } else {
        // Schemas opm keeps opaque (its cache serves them per package): the package's own travel with it.
        out.push(text(d));
      }
    }
    files.set(`${pkg}/catalog.json`, `${out.join('\n')}\n`);
  }
  const missing = [...kept].flatMap(([pkg, names]) => [...names].filter((n) => !bundles.includes(n)).map((n) => `${pkg}/${n}`));
  if (missing.length > 0) throw new BadInputError(`${where}: the catalog holds no olm.bundle ${missing.join(', ')}, which the plan stages; plan again against this catalog`);
  return { files, packages: [...kept.keys()].sort(), bundles: bundles.sort() };
}

/** The model of the kept documents (load.ts checks each as a catalog's). */
function modelOf(docs: readonly CatalogDoc[], where: string): DeclarativeConfig {
  const file = loadCatalogFile(docs.map(text).join('\n'), where);
  return { packages: file.packages, channels: file.channels, bundles: file.bundles, deprecations: file.deprecations };
}

function deprecationKept(entry: Json, pkg: string, channels: readonly string[], bundles: ReadonlySet<string>): boolean {
  const reference = (entry.reference ?? {}) as Json;
  if (reference.schema === 'olm.package') return true;
  if (reference.schema === 'olm.channel') return channels.includes(String(reference.name));
  if (reference.schema === 'olm.bundle') return bundles.has(String(reference.name));
  return false;
}

function text(d: CatalogDoc): string {
  return d.raw ?? json(d.doc);
}

function json(doc: Json): string {
  return JSON.stringify(doc, null, 4);
}
