/**
 * File-based catalog documents into the model (declcfg.ts), as opm's `declcfg.LoadFS` reads
 * them: every file under the catalog root is a stream of YAML or JSON documents (a first `{`
 * means JSON, as apimachinery's YAMLOrJSONDecoder sniffs), each with a `schema`; `olm.package`,
 * `olm.channel`, `olm.bundle` and `olm.deprecations` are kept, other schemas skipped as opm
 * keeps them opaque. A catalog is input from outside: every document is bounded in size, in
 * nesting and in count, and every field staging reads is checked for its type.
 *
 * The JSON stream is split into documents by a small scanner (strings and brackets only) so each
 * is parsed alone and its depth known before JSON.parse sees it: a catalog file of a large
 * package runs to tens of megabytes, and parsing it whole would hold all of it at once.
 */
import yaml from 'js-yaml';
import { BadInputError } from '../errors.js';
import type { BundleDeployment, CatalogBundle, CatalogChannel, CatalogPackage, ChannelEntry, Deprecation, GroupVersionKind, PackageRequirement, RelatedImage, Toleration } from './declcfg.js';

export interface CatalogLimits {
  /** Largest catalog file. */
  readonly maxFileBytes: number;
  /** Largest single document (a bundle with its CRDs and CSV inlined is the big one). */
  readonly maxDocumentBytes: number;
  /** Documents in the whole catalog. */
  readonly maxDocuments: number;
  /** Nesting of objects and arrays in one document. */
  readonly maxDepth: number;
  /** Related images of one bundle (real catalogs: at most 95). */
  readonly maxRelatedImages: number;
  /** Entries of one channel, properties of one bundle. */
  readonly maxEntries: number;
}

export const CATALOG_LIMITS: CatalogLimits = {
  maxFileBytes: 256 * 1024 * 1024,
  maxDocumentBytes: 32 * 1024 * 1024,
  maxDocuments: 1_000_000,
  maxDepth: 64,
  maxRelatedImages: 1000,
  maxEntries: 20_000,
};

/** What one catalog file holds, as the model's parts. */
export interface CatalogFile {
  readonly packages: CatalogPackage[];
  readonly channels: CatalogChannel[];
  readonly bundles: CatalogBundle[];
  readonly deprecations: Deprecation[];
  readonly documents: number;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** Parse one catalog file; `where` names it in errors (`catalog X: configs/etcd/catalog.json`). */
export function loadCatalogFile(text: string, where: string, limits: CatalogLimits = CATALOG_LIMITS, documentsSoFar = 0): CatalogFile {
  const out = { packages: [] as CatalogPackage[], channels: [] as CatalogChannel[], bundles: [] as CatalogBundle[], deprecations: [] as Deprecation[], documents: 0 };
  for (const { doc, index } of catalogDocuments(text, where, limits)) {
    if (doc === null || doc === undefined) continue;
    if (++out.documents + documentsSoFar > limits.maxDocuments) throw new BadInputError(`${where}: the catalog has over ${limits.maxDocuments} documents; not a sane catalog`);
    const at = `${where} document ${index + 1}`;
    if (!isObject(doc)) throw new BadInputError(`${at} is not an object; a catalog document is a mapping with a schema field`);
    const schema = doc.schema;
    if (typeof schema !== 'string' || schema === '') throw new BadInputError(`${at} has no schema field; opm refuses such a catalog, fix or remove the document`);
    if (schema === 'olm.package') out.packages.push(packageOf(doc, at));
    else if (schema === 'olm.channel') out.channels.push(channelOf(doc, at, limits));
    else if (schema === 'olm.bundle') out.bundles.push(bundleOf(doc, at, limits));
    else if (schema === 'olm.deprecations') out.deprecations.push(...deprecationsOf(doc, at, limits));
  }
  return out;
}

interface Document {
  readonly doc: Json | undefined;
  readonly index: number;
  /** A JSON document's own text (a rebuilt catalog carries kept documents as they were written). */
  readonly raw?: string;
}

/** Every document of a catalog file, parsed and bounded as loadCatalogFile reads them. */
export function catalogDocuments(text: string, where: string, limits: CatalogLimits = CATALOG_LIMITS): Iterable<Document> {
  return /^\s*\{/.test(text) ? jsonDocuments(text, where, limits) : yamlDocuments(text, where, limits);
}

/** Outside a string: the next quote or bracket. Inside one: the next quote or backslash. */
const STRUCTURE = /["{}[\]]/g;
const STRING_END = /["\\]/g;

/**
 * Concatenated JSON values, each sliced out and checked before it is parsed. The scan jumps from
 * one quote or bracket to the next with native regex search: a catalog runs to hundreds of MB.
 */
function* jsonDocuments(text: string, where: string, limits: CatalogLimits): Generator<Document> {
  let index = 0;
  let start = -1;
  let depth = 0;
  let at = 0;
  for (;;) {
    STRUCTURE.lastIndex = at;
    const found = STRUCTURE.exec(text);
    const i = found ? found.index : text.length;
    if (depth === 0 && /\S/.test(text.slice(at, i))) throw new BadInputError(`${where} is not valid JSON: a value outside an object at byte ${at + text.slice(at, i).search(/\S/)}; a JSON catalog file is a stream of objects`);
    if (!found) break;
    const c = text.charCodeAt(i);
    at = i + 1;
    if (c === 0x22) {
      if (depth === 0) throw new BadInputError(`${where} is not valid JSON: a value outside an object at byte ${i}; a JSON catalog file is a stream of objects`);
      at = stringEnd(text, at, where, index);
    } else if (c === 0x7b || c === 0x5b) {
      if (depth === 0) start = i;
      if (++depth > limits.maxDepth) throw new BadInputError(`${where} document ${index + 1} nests deeper than ${limits.maxDepth} levels; not a sane catalog`);
    } else {
      if (--depth < 0) throw new BadInputError(`${where} is not valid JSON (a closing bracket with nothing open, at byte ${i})`);
      if (depth === 0) {
        if (i + 1 - start > limits.maxDocumentBytes) throw new BadInputError(`${where} document ${index + 1} is ${i + 1 - start} bytes, over the ${limits.maxDocumentBytes}-byte limit for one catalog document`);
        const raw = text.slice(start, i + 1);
        yield { doc: parseJson(raw, where, index), index, raw };
        index++;
      }
    }
    if (depth > 0 && at - start > limits.maxDocumentBytes) throw new BadInputError(`${where} document ${index + 1} is over the ${limits.maxDocumentBytes}-byte limit for one catalog document`);
  }
  if (depth !== 0) throw new BadInputError(`${where} is not valid JSON: it ends inside document ${index + 1}`);
}

/** Where the string that opened before `from` ends (after its closing quote), escapes skipped. */
function stringEnd(text: string, from: number, where: string, index: number): number {
  let at = from;
  for (;;) {
    STRING_END.lastIndex = at;
    const found = STRING_END.exec(text);
    if (!found) throw new BadInputError(`${where} is not valid JSON: it ends inside document ${index + 1}`);
    if (text.charCodeAt(found.index) === 0x22) return found.index + 1;
    at = found.index + 2; // a backslash: skip the escaped character
  }
}

function parseJson(text: string, where: string, index: number): Json {
  try {
    return JSON.parse(text) as Json;
  } catch (error) {
    throw new BadInputError(`${where} document ${index + 1} is not valid JSON (${(error as Error).message})`);
  }
}

/** YAML documents (js-yaml's JSON schema: no custom tags, no functions), bounded like the JSON ones. */
function* yamlDocuments(text: string, where: string, limits: CatalogLimits): Generator<Document> {
  const parts = text.split(/^---[ \t]*$/m);
  let index = 0;
  for (const part of parts) {
    if (part.trim() === '') continue;
    if (Buffer.byteLength(part) > limits.maxDocumentBytes) throw new BadInputError(`${where} document ${index + 1} is over the ${limits.maxDocumentBytes}-byte limit for one catalog document`);
    let docs: unknown[];
    try {
      docs = yaml.loadAll(part, undefined, { schema: yaml.JSON_SCHEMA, json: true });
    } catch (error) {
      const message = error instanceof RangeError ? `nests too deeply (${error.message})` : `is not valid YAML (${(error as Error).message.split('\n')[0]})`;
      throw new BadInputError(`${where} document ${index + 1} ${message}`);
    }
    for (const doc of docs) {
      checkDepth(doc as Json, limits.maxDepth, `${where} document ${index + 1}`);
      yield { doc: doc as Json, index };
      index++;
    }
  }
}

/**
 * YAML aliases make a document a graph whose walk can grow exponentially: count what is walked,
 * and give up past a bound rather than walk a billion-laughs document.
 */
function checkDepth(doc: Json, maxDepth: number, at: string): void {
  let budget = 5_000_000;
  const walk = (value: Json, depth: number): void => {
    if (--budget < 0) throw new BadInputError(`${at} expands to over 5,000,000 values (YAML aliases?); not a sane catalog`);
    if (value === null || typeof value !== 'object') return;
    if (depth > maxDepth) throw new BadInputError(`${at} nests deeper than ${maxDepth} levels; not a sane catalog`);
    for (const child of Array.isArray(value) ? value : Object.values(value)) walk(child, depth + 1);
  };
  walk(doc, 1);
}

function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function text(doc: JsonObject, field: string, at: string, required = true): string | undefined {
  const value = doc[field];
  if (value === undefined || value === null) {
    if (required) throw new BadInputError(`${at}: ${String(doc.schema)} has no ${field}`);
    return undefined;
  }
  if (typeof value !== 'string') throw new BadInputError(`${at}: ${String(doc.schema)} field ${field} is not a string`);
  return value;
}

function list(doc: JsonObject, field: string, at: string, max: number): Json[] {
  const value = doc[field];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new BadInputError(`${at}: field ${field} is not a list`);
  if (value.length > max) throw new BadInputError(`${at}: field ${field} has ${value.length} items, over the limit of ${max}; not a sane catalog`);
  return value;
}

function packageOf(doc: JsonObject, at: string): CatalogPackage {
  const defaultChannel = text(doc, 'defaultChannel', at, false);
  const name = text(doc, 'name', at)!;
  // A package name becomes a path segment (a rebuilt catalog's `<package>/catalog.json`).
  if (name === '' || name === '.' || name === '..' || /[/\\\0\n]/.test(name)) throw new BadInputError(`${at}: package name ${JSON.stringify(name)} is not a name (a path segment without / or ..); not a sane catalog`);
  return { name, ...(defaultChannel ? { defaultChannel } : {}) };
}

function channelOf(doc: JsonObject, at: string, limits: CatalogLimits): CatalogChannel {
  const name = text(doc, 'name', at)!;
  const pkg = text(doc, 'package', at)!;
  const entries = list(doc, 'entries', at, limits.maxEntries).map((entry, i): ChannelEntry => {
    const where = `${at} (channel ${name}) entry ${i + 1}`;
    if (!isObject(entry)) throw new BadInputError(`${where} is not an object`);
    const replaces = text(entry, 'replaces', where, false);
    const skipRange = text(entry, 'skipRange', where, false);
    const skips = list(entry, 'skips', where, limits.maxEntries).map((s) => {
      if (typeof s !== 'string') throw new BadInputError(`${where}: skips holds a value that is not a bundle name`);
      return s;
    });
    return { name: text(entry, 'name', where)!, ...(replaces ? { replaces } : {}), skips, ...(skipRange ? { skipRange } : {}) };
  });
  return { name, package: pkg, entries };
}

function bundleOf(doc: JsonObject, at: string, limits: CatalogLimits): CatalogBundle {
  const name = text(doc, 'name', at)!;
  const pkg = text(doc, 'package', at)!;
  const where = `${at} (bundle ${name})`;
  const provides: GroupVersionKind[] = [];
  const requiresApis: GroupVersionKind[] = [];
  const requiresPackages: PackageRequirement[] = [];
  const constraints: string[] = [];
  let version: string | undefined;
  let maxOpenShiftVersion: string | undefined;
  let deployments: BundleDeployment[] | undefined;
  for (const property of list(doc, 'properties', where, limits.maxEntries)) {
    if (!isObject(property) || typeof property.type !== 'string') throw new BadInputError(`${where}: a property has no type`);
    const value = property.value;
    switch (property.type) {
      case 'olm.package': {
        if (version !== undefined) throw new BadInputError(`${where}: more than one olm.package property; a bundle has exactly one`);
        const v = objectValue(value, where, property.type);
        if (text(v, 'packageName', where) !== pkg) throw new BadInputError(`${where}: its olm.package property names package ${String(v.packageName)}, not ${pkg}`);
        version = text(v, 'version', where)!;
        break;
      }
      case 'olm.gvk':
        provides.push(gvkOf(value, where, property.type));
        break;
      case 'olm.gvk.required':
        requiresApis.push(gvkOf(value, where, property.type));
        break;
      case 'olm.package.required': {
        const v = objectValue(value, where, property.type);
        requiresPackages.push({ packageName: text(v, 'packageName', where)!, versionRange: text(v, 'versionRange', where)! });
        break;
      }
      case 'olm.maxOpenShiftVersion':
        // OLM trims the quotes off the value's JSON and parses what is left tolerantly (4.16,
        // "4.16", v4.16); a value it cannot read, or two of them, makes the CSV block every minor
        // update, so such values are kept for upgrade.ts to judge rather than refused here. A
        // number (4.16 unquoted) arrives as JSON.parse read it, as YAML catalogs reach OLM.
        maxOpenShiftVersion = maxOpenShiftVersion === undefined ? String(typeof value === 'object' ? JSON.stringify(value) : value) : `${maxOpenShiftVersion} and ${String(value)} (two olm.maxOpenShiftVersion properties)`;
        break;
      case 'olm.constraint':
        constraints.push(property.type);
        break;
      case 'olm.bundle.object': {
        const found = csvDeployments(value, where, limits);
        if (found) deployments = [...(deployments ?? []), ...found];
        break;
      }
    }
  }
  if (version === undefined) throw new BadInputError(`${where}: no olm.package property; a bundle has exactly one, naming its package and version`);
  const relatedImages = list(doc, 'relatedImages', where, limits.maxRelatedImages).map((r): RelatedImage => {
    if (!isObject(r)) throw new BadInputError(`${where}: a relatedImages item is not an object`);
    return { name: text(r, 'name', where, false) ?? '', image: text(r, 'image', where)! };
  });
  return {
    name,
    package: pkg,
    image: text(doc, 'image', at, false) ?? '',
    version,
    provides,
    requiresApis,
    requiresPackages,
    ...(maxOpenShiftVersion !== undefined ? { maxOpenShiftVersion } : {}),
    constraints,
    relatedImages,
    ...(deployments ? { deployments } : {}),
  };
}

function objectValue(value: Json | undefined, where: string, type: string): JsonObject {
  if (!isObject(value)) throw new BadInputError(`${where}: the ${type} property's value is not an object`);
  return value;
}

function gvkOf(value: Json | undefined, where: string, type: string): GroupVersionKind {
  const v = objectValue(value, where, type);
  return { group: text(v, 'group', where)!, version: text(v, 'version', where)!, kind: text(v, 'kind', where)! };
}

/**
 * An `olm.bundle.object` is a manifest of the bundle, base64 (Go's []byte) YAML or JSON; only the
 * ClusterServiceVersion's deployments matter to staging: where its pods run and what they run.
 */
function csvDeployments(value: Json | undefined, where: string, limits: CatalogLimits): BundleDeployment[] | undefined {
  const v = objectValue(value, where, 'olm.bundle.object');
  if (typeof v.data !== 'string') return undefined;
  const text = Buffer.from(v.data, 'base64').toString('utf8');
  // Most objects are CRDs, most of a catalog's bytes: only a CSV is parsed (opm writes JSON).
  if (!text.includes('ClusterServiceVersion')) return undefined;
  let object: Json;
  try {
    object = /^\s*\{/.test(text) ? (JSON.parse(text) as Json) : (yaml.load(text, { schema: yaml.JSON_SCHEMA, json: true }) as Json);
  } catch {
    throw new BadInputError(`${where}: an olm.bundle.object is not a YAML or JSON manifest`);
  }
  return isObject(object) && object.kind === 'ClusterServiceVersion' ? deploymentsOfCsv(object, where, limits) : undefined;
}

/** A ClusterServiceVersion's deployments (`spec.install.spec.deployments`), from the catalog or from its bundle image. */
export function deploymentsOfCsv(csv: unknown, where: string, limits: CatalogLimits = CATALOG_LIMITS): BundleDeployment[] {
  if (!isObject(csv as Json)) throw new BadInputError(`${where}: the ClusterServiceVersion is not an object`);
  checkDepth(csv as Json, limits.maxDepth, `${where} ClusterServiceVersion`);
  const spec = path(csv as JsonObject, ['spec', 'install', 'spec']);
  return list(spec, 'deployments', `${where} ClusterServiceVersion`, limits.maxEntries).map((d) => deploymentOf(d, where));
}

function deploymentOf(d: Json, where: string): BundleDeployment {
  if (!isObject(d)) throw new BadInputError(`${where}: a CSV deployment is not an object`);
  const pod = path(d, ['spec', 'template', 'spec']);
  const selector = isObject(pod.nodeSelector) ? pod.nodeSelector : {};
  const nodeSelector = Object.fromEntries(Object.entries(selector).filter((e): e is [string, string] => typeof e[1] === 'string'));
  const tolerations = (Array.isArray(pod.tolerations) ? pod.tolerations : []).filter(isObject).map((t): Toleration => {
    const pick = (k: string) => (typeof t[k] === 'string' ? { [k]: t[k] } : {});
    return { ...pick('key'), ...pick('operator'), ...pick('value'), ...pick('effect') };
  });
  const containers = [pod.containers, pod.initContainers].flatMap((c) => (Array.isArray(c) ? c : []));
  const images = containers.filter(isObject).map((c) => c.image).filter((i): i is string => typeof i === 'string');
  return { name: typeof d.name === 'string' ? d.name : '', nodeSelector, tolerations, images };
}

function path(object: JsonObject, keys: readonly string[]): JsonObject {
  let at: JsonObject = object;
  for (const key of keys) {
    const next = at[key];
    at = isObject(next) ? next : {};
  }
  return at;
}

function deprecationsOf(doc: JsonObject, at: string, limits: CatalogLimits): Deprecation[] {
  const pkg = text(doc, 'package', at)!;
  return list(doc, 'entries', at, limits.maxEntries).map((entry): Deprecation => {
    if (!isObject(entry) || !isObject(entry.reference)) throw new BadInputError(`${at}: an olm.deprecations entry has no reference`);
    const schema = entry.reference.schema;
    if (schema !== 'olm.package' && schema !== 'olm.channel' && schema !== 'olm.bundle') throw new BadInputError(`${at}: an olm.deprecations entry refers to schema ${String(schema)}, not olm.package, olm.channel or olm.bundle`);
    return { package: pkg, schema, name: text(entry.reference, 'name', at, false) ?? '', message: text(entry, 'message', at, false) ?? '' };
  });
}
