/**
 * The operator manifests of a release payload as planning reads them: every document of every
 * YAML or JSON file, kept whole when it may name an image, else only its kind and annotations.
 *
 * Most of a payload's bytes are CustomResourceDefinitions (85% of the fixture's 2 MB, as in
 * real releases) that name no image; of those planning needs only what sits above their
 * `spec`. A YAML file whose text cannot name a digest is therefore split into its documents
 * and each is parsed only down to its `kind` and `metadata`: the same result as a full parse
 * for any valid file, at a fraction of the CPU (the bulk of `plan`'s parsing time).
 */
import yaml from 'js-yaml';

/**
 * One parsed document of an operator manifest file. A document that cannot name an image (no
 * string in it holds `@sha256:`, and it is not a ConfigMap, whose data may be JSON with escapes,
 * nor a FeatureGate, whose status lists the payload's enabled gates)
 * keeps only its kind and `metadata.annotations`: all that planning reads of it (inclusion
 * vocabulary), and the rest of it is not held for the whole plan.
 */
export interface ManifestDocument {
  readonly file: string;
  readonly doc: Record<string, unknown>;
}

/** Operator manifests are multi-document YAML (or JSON); a file that does not parse is reported and skipped. */
export function parseDocuments(files: ReadonlyMap<string, string>, warnings: string[]): ManifestDocument[] {
  const documents: ManifestDocument[] = [];
  for (const file of [...files.keys()].sort()) {
    if (!/\.(ya?ml|json)$/.test(file)) continue;
    const text = files.get(file)!;
    try {
      const docs = headsOnly(file, text) ?? yaml.loadAll(text);
      for (const doc of docs) {
        if (isObject(doc)) documents.push({ file, doc: mayNameImages(doc) ? doc : slim(doc) });
      }
    } catch (err) {
      warnings.push(`skipped unparsable manifest ${file}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  return documents;
}

/**
 * Whether planning reads a document whole: it may name an image digest (a string holding
 * `@sha256:`, or a ConfigMap), or it is a FeatureGate (the payload's enabled gates per profile
 * and feature set live in its status).
 */
function mayNameImages(doc: Record<string, unknown>): boolean {
  return doc.kind === 'ConfigMap' || doc.kind === 'FeatureGate' || holdsDigest(doc);
}

function holdsDigest(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('@sha256:');
  if (Array.isArray(value)) {
    for (const v of value) if (holdsDigest(v)) return true;
  } else if (value && typeof value === 'object') {
    for (const k in value) if (Object.hasOwn(value, k) && holdsDigest((value as Record<string, unknown>)[k])) return true;
  }
  return false;
}

/** What planning reads of a document that names no image: its kind and annotations. */
function slim(doc: Record<string, unknown>): Record<string, unknown> {
  const annotations = (doc.metadata as { annotations?: unknown } | undefined)?.annotations;
  return { kind: doc.kind, ...(annotations !== undefined ? { metadata: { annotations } } : {}) };
}

function isObject(doc: unknown): doc is Record<string, unknown> {
  return doc !== null && typeof doc === 'object' && !Array.isArray(doc);
}

const DOCUMENT_MARKER = /^---[ \t]*$/;
/** A top-level key: a line at column 0 that is not a comment, a sequence entry or a flow/scalar continuation. */
const TOP_LEVEL_KEY = /^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]|$)/;
/** What planning reads of a document that names no image lives under these keys. */
const HEAD_KEYS = new Set(['apiVersion', 'kind', 'metadata']);

/**
 * The documents of a YAML file that cannot name an image, each parsed down to its `kind` and
 * `metadata`; undefined when the file needs a full parse: JSON, a text holding `sha256` (it may
 * name a digest) or `ConfigMap`, or document syntax beyond bare `---` separators (directives,
 * `...` ends, content on a `---` line), whose documents a line split would get wrong.
 *
 * A document is cut before its first top-level key other than apiVersion, kind and metadata,
 * once kind and metadata were both seen: YAML puts no column-0 line inside a block value, so
 * nothing of kind or metadata lies below the cut. A document whose keys come in another order,
 * or whose head does not parse on its own, is parsed whole. Validity is not checked below the
 * cut: a malformed `spec` of a document that names no image is not reported (nothing is read
 * from it).
 */
function headsOnly(file: string, text: string): unknown[] | undefined {
  if (!/\.ya?ml$/.test(file) || text.includes('sha256') || text.includes('ConfigMap') || text.includes('FeatureGate')) return undefined;
  const lines = text.split('\n');
  if (lines.some((line) => line.startsWith('%') || line.startsWith('...') || (line.startsWith('---') && !DOCUMENT_MARKER.test(line)))) return undefined;
  const docs: unknown[] = [];
  let start = 0;
  while (start <= lines.length) {
    let end = start;
    while (end < lines.length && !DOCUMENT_MARKER.test(lines[end]!)) end++;
    docs.push(parseHead(lines, start, end));
    start = end + 1;
  }
  return docs;
}

/** One document (lines [start, end)), parsed down to kind and metadata when it can be cut there. */
function parseHead(lines: readonly string[], start: number, end: number): unknown {
  const seen = new Set<string>();
  for (let i = start; i < end; i++) {
    const key = TOP_LEVEL_KEY.exec(lines[i]!)?.[1];
    if (key === undefined) continue;
    if (!HEAD_KEYS.has(key)) {
      if (!seen.has('kind') || !seen.has('metadata')) break;
      try {
        const head = yaml.load(lines.slice(start, i).join('\n'));
        if (isObject(head) && head.kind !== undefined) return head;
      } catch {
        // parsed whole below
      }
      break;
    }
    seen.add(key);
  }
  return yaml.load(lines.slice(start, end).join('\n'));
}
