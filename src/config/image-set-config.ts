/**
 * Reads an oc-mirror v2 ImageSetConfiguration (mirror.openshift.io/v2alpha1) as strictly as
 * oc-mirror does (openshift/oc-mirror internal/pkg/config/load.go: a JSON decode that refuses
 * unknown fields; validate.go; catalog-filter's own checks), so a file prestage accepts is one
 * oc-mirror accepts. What prestage does not act on (helm, archiveSize, ...) parses and is listed
 * in `ignored` for the CLI to warn about.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import yaml from 'js-yaml';
import { BadInputError, systemErrorText } from '../errors.js';
import { parseVersionBound } from '../catalog/select.js';
import type { CatalogSelection, ChannelSelection, PackageSelection } from '../catalog/selection.js';

export interface PlatformChannel {
  readonly name: string;
  readonly type: 'ocp' | 'okd';
  readonly minVersion?: string;
  readonly maxVersion?: string;
  readonly shortestPath: boolean;
  readonly full: boolean;
}

export interface ImageSetConfiguration {
  readonly platform?: { readonly channels: readonly PlatformChannel[]; readonly graph: boolean; readonly architectures: readonly string[] };
  readonly operators: readonly CatalogSelection[];
  /** The images' names (references). */
  readonly additionalImages: readonly string[];
  /** Regular expressions over image references, as oc-mirror matches them. */
  readonly blockedImages: readonly string[];
  /** Paths of fields that are set but that prestage does not act on: `mirror.helm`, `mirror.operators[0].skipDependencies`. */
  readonly ignored: readonly string[];
}

const API_VERSION = 'mirror.openshift.io/v2alpha1';
const KIND = 'ImageSetConfiguration';
const MAX_BYTES = 1024 * 1024;
const MAX_NODES = 100_000;
const MAX_DEPTH = 64;
/** oc-mirror's IsValidPathComponent: one or more registry path components. */
const TARGET_CATALOG = /^[a-z0-9]+(?:(?:[._]|__|-*)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-*)[a-z0-9]+)*)*$/;

type Fields = Record<string, unknown>;

/** One file's decoding: where errors point, and what was set but is ignored. */
class Decoder {
  readonly ignored: string[] = [];
  constructor(readonly file: string) {}

  fail(path: string, why: string): never {
    throw new BadInputError(`${this.file}: ${path}: ${why}`);
  }

  /**
   * The object's fields by their oc-mirror names, refusing any other, as Go's DisallowUnknownFields
   * does (which, like encoding/json, matches names case-insensitively). A null is an absent field.
   */
  fields(value: unknown, path: string, known: readonly string[]): Fields {
    if (value === null || value === undefined) return {};
    if (typeof value !== 'object' || Array.isArray(value)) this.fail(path, `must be a mapping, not ${describe(value)}`);
    const out: Fields = {};
    for (const [key, v] of Object.entries(value)) {
      const name = known.find((k) => k.toLowerCase() === key.toLowerCase());
      const at = path ? `${path}.${key}` : key;
      if (name === undefined) this.fail(at, `unknown field: oc-mirror's ${KIND} has no such field and refuses it; remove it or use one of: ${known.join(', ')}`);
      if (name in out) this.fail(at, `${name} is given twice; give it once`);
      if (v !== null) out[name] = v;
    }
    return out;
  }

  string(o: Fields, key: string, path: string, required = false): string | undefined {
    const v = o[key];
    if ((v === undefined || v === '') && required) this.fail(`${path}.${key}`, 'is required');
    if (v === undefined || v === '') return undefined;
    if (typeof v !== 'string') this.fail(`${path}.${key}`, `must be a string, not ${describe(v)}${typeof v === 'number' ? ` (quote it: "${v}")` : ''}`);
    return v;
  }

  bool(o: Fields, key: string, path: string): boolean {
    const v = o[key];
    if (v !== undefined && typeof v !== 'boolean') this.fail(`${path}.${key}`, `must be true or false, not ${describe(v)}`);
    return v === true;
  }

  list(o: Fields, key: string, path: string): unknown[] {
    const v = o[key];
    if (v === undefined) return [];
    if (!Array.isArray(v)) this.fail(`${path}.${key}`, `must be a list, not ${describe(v)}`);
    return v;
  }

  strings(o: Fields, key: string, path: string): string[] {
    return this.list(o, key, path).map((v, i) => {
      if (typeof v !== 'string' || v === '') this.fail(`${path}.${key}[${i}]`, `must be a non-empty string, not ${describe(v)}`);
      return v;
    });
  }

  /** Records a set field prestage does not act on; a zero value (false, "", [], 0) is as good as unset. */
  ignore(o: Fields, key: string, path: string): void {
    const v = o[key];
    const empty = v === undefined || v === false || v === '' || v === 0 || (Array.isArray(v) && v.length === 0) || (typeof v === 'object' && v !== null && Object.keys(v).length === 0);
    if (!empty) this.ignored.push(path ? `${path}.${key}` : key);
  }

  /** minVersion/maxVersion: Masterminds semver as oc-mirror validates it (`4.16` allowed). */
  bound(o: Fields, key: 'minVersion' | 'maxVersion', path: string): string | undefined {
    const v = this.string(o, key, path);
    if (v !== undefined && !parseVersionBound(v)) this.fail(`${path}.${key}`, `"${v}" must respect semantic versioning notation (like 1.2.3), as oc-mirror requires`);
    return v;
  }
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return 'a list';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'a mapping';
  return `${typeof v} ${JSON.stringify(v)}`;
}

/** Aliases make a YAML value a graph: walk it with a budget instead of trusting its size. */
function checkBounds(value: unknown, file: string): void {
  let nodes = 0;
  const walk = (v: unknown, depth: number): void => {
    if (++nodes > MAX_NODES) throw new BadInputError(`${file}: expands to over ${MAX_NODES} values (YAML aliases?); an ImageSetConfiguration is far smaller`);
    if (v === null || typeof v !== 'object') return;
    if (depth > MAX_DEPTH) throw new BadInputError(`${file}: nests deeper than ${MAX_DEPTH} levels; an ImageSetConfiguration is far shallower`);
    for (const child of Array.isArray(v) ? v : Object.values(v)) walk(child, depth + 1);
  };
  walk(value, 1);
}

function platform(d: Decoder, value: unknown): NonNullable<ImageSetConfiguration['platform']> {
  const path = 'mirror.platform';
  const p = d.fields(value, path, ['graph', 'channels', 'architectures', 'platforms', 'release', 'kubeVirtContainer']);
  d.ignore(p, 'release', path);
  d.ignore(p, 'kubeVirtContainer', path);
  const names = new Set<string>();
  const channels = d.list(p, 'channels', path).map((value, i): PlatformChannel => {
    const at = `${path}.channels[${i}]`;
    const c = d.fields(value, at, ['name', 'type', 'minVersion', 'maxVersion', 'shortestPath', 'full']);
    const name = d.string(c, 'name', at, true)!;
    if (names.has(name)) d.fail(at, `release channel ${name}: duplicate found in configuration; list it once`);
    names.add(name);
    // oc-mirror reads an unknown type as ocp; a typo there should not silently pick the platform.
    const type = d.string(c, 'type', at) ?? 'ocp';
    if (type !== 'ocp' && type !== 'okd') d.fail(`${at}.type`, `"${type}" is not a platform type; write ocp or okd`);
    const version = (key: 'minVersion' | 'maxVersion'): string | undefined => {
      const v = d.string(c, key, at);
      if (v !== undefined && !/^v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/.test(v)) d.fail(`${at}.${key}`, `"${v}" is not a release version like 4.16.3`);
      return v?.replace(/^v/, '');
    };
    return { name, type, minVersion: version('minVersion'), maxVersion: version('maxVersion'), shortestPath: d.bool(c, 'shortestPath', at), full: d.bool(c, 'full', at) };
  });
  const architectures = d.strings(p, 'architectures', path);
  const platforms = d.list(p, 'platforms', path).map((value, i) => {
    const at = `${path}.platforms[${i}]`;
    const f = d.fields(value, at, ['os', 'architecture']);
    const os = d.string(f, 'os', at, true)!;
    if (os !== 'linux') d.fail(`${at}.os`, `"${os}": OpenShift release images are linux only; write linux`);
    return d.string(f, 'architecture', at, true)!;
  });
  if (platforms.length > 0 && architectures.length > 0) d.fail(path, 'platforms and architectures cannot be used together (oc-mirror refuses both); keep one');
  // oc-mirror's release collector mirrors amd64 when neither names an architecture.
  const archs = platforms.length > 0 ? platforms : architectures.length > 0 ? architectures : ['amd64'];
  return { channels, graph: d.bool(p, 'graph', path), architectures: archs };
}

function packageChannel(d: Decoder, value: unknown, at: string): ChannelSelection {
  const c = d.fields(value, at, ['name', 'minVersion', 'maxVersion']);
  return { name: d.string(c, 'name', at, true)!, minVersion: d.bound(c, 'minVersion', at), maxVersion: d.bound(c, 'maxVersion', at) };
}

function includePackage(d: Decoder, value: unknown, at: string, full: boolean): PackageSelection {
  // Refused by name, since a config written for an older oc-mirror v2 may still carry it.
  const removed = ['bundles', 'selectedBundles'].find((key) => value !== null && typeof value === 'object' && key in value);
  if (removed) d.fail(`${at}.${removed}`, 'selecting bundles by name was removed from oc-mirror v2 (oc-mirror#1045), which now refuses the field; use minVersion and maxVersion (both the same version for exactly one bundle)');
  const p = d.fields(value, at, ['name', 'channels', 'defaultChannel', 'minVersion', 'maxVersion']);
  const name = d.string(p, 'name', at, true)!;
  const minVersion = d.bound(p, 'minVersion', at);
  const maxVersion = d.bound(p, 'maxVersion', at);
  const seen = new Set<string>();
  const channels = d.list(p, 'channels', at).map((v, i) => {
    const ch = packageChannel(d, v, `${at}.channels[${i}]`);
    if (seen.has(ch.name)) d.fail(`${at}.channels[${i}]`, `operator ${name}: duplicate channel entry ${ch.name}; list it once`);
    seen.add(ch.name);
    if ((ch.minVersion || ch.maxVersion) && (minVersion || maxVersion)) {
      d.fail(`${at}.channels[${i}]`, `operator ${name}: mixing both filtering by minVersion/maxVersion and filtering by channel minVersion/maxVersion is not allowed; put the range on the package or on its channels`);
    }
    if ((ch.minVersion || ch.maxVersion) && full) d.fail(`${at}.channels[${i}]`, 'full: true cannot be mixed with minVersion/maxVersion (catalog-filter refuses both); drop one');
    return ch;
  });
  if ((minVersion || maxVersion) && full) d.fail(at, 'full: true cannot be mixed with minVersion/maxVersion (catalog-filter refuses both); drop one');
  return { name, defaultChannel: d.string(p, 'defaultChannel', at), minVersion, maxVersion, channels };
}

function operator(d: Decoder, value: unknown, at: string): CatalogSelection {
  const o = d.fields(value, at, ['catalog', 'targetCatalog', 'targetTag', 'full', 'skipDependencies', 'targetCatalogSourceTemplate', 'platforms', 'packages']);
  for (const key of ['skipDependencies', 'targetCatalogSourceTemplate', 'platforms']) d.ignore(o, key, at);
  const catalog = d.string(o, 'catalog', at, true)!;
  const targetCatalog = d.string(o, 'targetCatalog', at);
  if (targetCatalog !== undefined && !TARGET_CATALOG.test(targetCatalog)) {
    d.fail(`${at}.targetCatalog`, `"${targetCatalog}" is not a repository path (lowercase components separated by /, no tag or digest)`);
  }
  const full = d.bool(o, 'full', at);
  const seen = new Set<string>();
  const packages = d.list(o, 'packages', at).map((v, i) => {
    const pkg = includePackage(d, v, `${at}.packages[${i}]`, full);
    if (seen.has(pkg.name)) d.fail(`${at}.packages[${i}]`, `catalog ${catalog}: duplicate package entry ${pkg.name}; list it once, with all its channels`);
    seen.add(pkg.name);
    return pkg;
  });
  return { catalog, targetCatalog, targetTag: d.string(o, 'targetTag', at), full, packages };
}

function mirror(d: Decoder, value: unknown): Omit<ImageSetConfiguration, 'ignored'> {
  const m = d.fields(value, 'mirror', ['platform', 'operators', 'additionalImages', 'helm', 'blockedImages', 'samples']);
  if (m.helm !== undefined) {
    const h = d.fields(m.helm, 'mirror.helm', ['repositories', 'local']);
    const chart = (v: unknown, at: string): void => {
      d.strings(d.fields(v, at, ['name', 'version', 'path', 'imagePaths', 'platforms']), 'imagePaths', at);
    };
    d.list(h, 'repositories', 'mirror.helm').forEach((v, i) => {
      const at = `mirror.helm.repositories[${i}]`;
      d.list(d.fields(v, at, ['url', 'name', 'charts']), 'charts', at).forEach((c, j) => chart(c, `${at}.charts[${j}]`));
    });
    d.list(h, 'local', 'mirror.helm').forEach((c, i) => chart(c, `mirror.helm.local[${i}]`));
    d.ignore(m, 'helm', 'mirror');
  }
  d.list(m, 'samples', 'mirror').forEach((v, i) => d.fields(v, `mirror.samples[${i}]`, ['name']));
  d.ignore(m, 'samples', 'mirror');
  const catalogs = new Set<string>();
  const operators = d.list(m, 'operators', 'mirror').map((v, i) => {
    const op = operator(d, v, `mirror.operators[${i}]`);
    const key = [op.catalog, op.targetCatalog ?? '', op.targetTag ?? ''].join(' ');
    if (catalogs.has(key)) d.fail(`mirror.operators[${i}]`, `catalog ${op.catalog}: duplicate found in configuration; list it once, or give each a different targetCatalog/targetTag`);
    catalogs.add(key);
    return op;
  });
  const additionalImages = d.list(m, 'additionalImages', 'mirror').map((v, i) => {
    const at = `mirror.additionalImages[${i}]`;
    const a = d.fields(v, at, ['name', 'targetRepo', 'targetTag', 'platforms']);
    for (const key of ['targetRepo', 'targetTag', 'platforms']) d.ignore(a, key, at);
    return d.string(a, 'name', at, true)!;
  });
  const blockedImages = d.list(m, 'blockedImages', 'mirror').map((v, i) => {
    const at = `mirror.blockedImages[${i}]`;
    const name = d.string(d.fields(v, at, ['name']), 'name', at, true)!;
    try {
      new RegExp(name);
    } catch (error) {
      d.fail(`${at}.name`, `"${name}" is not a regular expression (${(error as Error).message}); blocked images are matched as regular expressions`);
    }
    return name;
  });
  return { platform: m.platform === undefined ? undefined : platform(d, m.platform), operators, additionalImages, blockedImages };
}

export function parseImageSetConfiguration(text: string, file: string): ImageSetConfiguration {
  if (Buffer.byteLength(text) > MAX_BYTES) throw new BadInputError(`${file}: over ${MAX_BYTES} bytes; an ImageSetConfiguration is far smaller`);
  let doc: unknown;
  try {
    doc = yaml.load(text, { filename: file, schema: yaml.JSON_SCHEMA });
  } catch (error) {
    if (error instanceof yaml.YAMLException) {
      const at = error.mark ? `:${error.mark.line + 1}:${error.mark.column + 1}` : '';
      throw new BadInputError(`${file}${at}: not valid YAML: ${error.reason}`);
    }
    if (error instanceof RangeError) throw new BadInputError(`${file}: nests too deeply to read; an ImageSetConfiguration is far shallower`);
    throw error;
  }
  if (doc === undefined || doc === null) throw new BadInputError(`${file}: is empty; write an ImageSetConfiguration (apiVersion: ${API_VERSION}, kind: ${KIND}, mirror: ...)`);
  checkBounds(doc, file);
  const d = new Decoder(file);
  if (typeof doc !== 'object' || Array.isArray(doc)) d.fail('(top level)', `must be a mapping, not ${describe(doc)}`);
  // load.go's order: kind, then the mirror stanza, then the strict decode.
  const top = doc as Fields;
  if (top.kind === undefined) d.fail('kind', `configuration missing kind; write kind: ${KIND}`);
  if (top.kind !== KIND) {
    const delete_ = top.kind === 'DeleteImageSetConfiguration' ? ' (a DeleteImageSetConfiguration deletes from a registry; prestage stages)' : '';
    d.fail('kind', `cannot parse ${JSON.stringify(top.kind)} as ${KIND}${delete_}; write kind: ${KIND}`);
  }
  if (top.apiVersion !== API_VERSION) {
    const v1 = top.apiVersion === 'mirror.openshift.io/v1alpha2' ? ' (v1alpha2 is oc-mirror v1\'s format: convert it to v2alpha1)' : '';
    d.fail('apiVersion', `${JSON.stringify(top.apiVersion ?? null)} is not ${API_VERSION}${v1}; write apiVersion: ${API_VERSION}`);
  }
  if (!('mirror' in top)) d.fail('mirror', 'configuration missing the mirror stanza; add mirror: with platform, operators or additionalImages');
  if ('delete' in top) d.fail('delete', `is not allowed in ${KIND} (it belongs in a DeleteImageSetConfiguration); remove it`);
  const fields = d.fields(top, '', ['apiVersion', 'kind', 'mirror', 'archiveSize']);
  if (fields.archiveSize !== undefined && !Number.isSafeInteger(fields.archiveSize)) d.fail('archiveSize', `must be a whole number of GB, not ${describe(fields.archiveSize)}`);
  d.ignore(fields, 'archiveSize', '');
  return { ...mirror(d, fields.mirror), ignored: d.ignored };
}

/** Reads `--config FILE` (synchronously: flags are turned into options before anything runs), at most one byte past the bound. */
export function readImageSetConfiguration(file: string): ImageSetConfiguration {
  let text: string;
  try {
    const fd = openSync(file, 'r');
    try {
      const buffer = Buffer.alloc(MAX_BYTES + 1);
      let length = 0;
      while (length < buffer.length) {
        const n = readSync(fd, buffer, length, buffer.length - length, null);
        if (n === 0) break;
        length += n;
      }
      text = buffer.subarray(0, length).toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    if (e.code === 'ENOENT') throw new BadInputError(`--config ${file}: no such file; give the path of an ImageSetConfiguration`);
    if (e.code) throw new BadInputError(`--config ${file}: cannot read it: ${systemErrorText(e)}`);
    throw error;
  }
  return parseImageSetConfiguration(text, file);
}
