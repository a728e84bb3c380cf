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
  return collectDocuments(new Map([...files].map(([file, text]) => [file, parseFile(file, text)])), warnings);
}

/** One file's documents, or why it was skipped. */
export interface ParsedFile {
  readonly documents: readonly ManifestDocument[];
  readonly warning?: string;
}

/**
 * One file of the payload parsed on its own, so that a reader can parse each file as it comes
 * out of the layer (while the rest of it is still on the wire); a file that is not YAML or JSON
 * has no documents.
 */
export function parseFile(file: string, text: string): ParsedFile {
  if (!/\.(ya?ml|json)$/.test(file)) return { documents: [] };
  try {
    const docs = headsOnly(file, text) ?? yaml.loadAll(text);
    return { documents: docs.filter(isObject).map((doc) => ({ file, doc: mayNameImages(doc) ? doc : slim(doc) })) };
  } catch (err) {
    return { documents: [], warning: `skipped unparsable manifest ${file}: ${(err as Error).message.split('\n')[0]}` };
  }
}

/** The files' documents (and warnings) in the order of their names, however they were parsed. */
export function collectDocuments(parsed: ReadonlyMap<string, ParsedFile>, warnings: string[]): ManifestDocument[] {
  const documents: ManifestDocument[] = [];
  for (const file of [...parsed.keys()].sort()) {
    const { documents: docs, warning } = parsed.get(file)!;
    documents.push(...docs);
    if (warning !== undefined) warnings.push(warning);
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

/** Syntax a line split would get wrong: a directive, an end marker, content on a `---` line. */
const BEYOND_BARE_MARKERS = /(?:^|\n)(?:%|\.\.\.|---(?![ \t]*(?:\n|$)))/;
/**
 * The lines planning looks at, found in one pass over the text (a file is mostly CRD schema, so
 * a regex scan costs a fraction of splitting it into lines): a bare `---` document marker, or
 * a top-level key (a line at column 0 that is not a comment, a sequence entry or a flow/scalar
 * continuation). `$` without the `m` flag is the end of the text, so a line ends only at `\n`.
 */
const MARKER_OR_KEY = /(?:^|\n)(?:---[ \t]*(?=\n|$)|([A-Za-z_][\w.-]*)[ \t]*:(?=[ \t]|\n|$))/g;
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
  if (!/\.ya?ml$/.test(file) || text.includes('sha256') || text.includes('ConfigMap') || text.includes('FeatureGate') || BEYOND_BARE_MARKERS.test(text)) return undefined;
  const docs: unknown[] = [];
  // The document being read: where its text starts, the head keys seen, and once a key past
  // the head came, its head (cut there) or 'whole'.
  let start = 0;
  let seen = new Set<string>();
  let head: { doc: unknown } | 'whole' | undefined;
  // A document's text runs to the `\n` before its marker (none when the marker follows at once).
  const close = (end: number) => docs.push(typeof head === 'object' ? head.doc : yaml.load(end > start ? text.slice(start, end) : ''));
  for (const m of text.matchAll(MARKER_OR_KEY)) {
    const lineStart = text[m.index] === '\n' ? m.index + 1 : m.index;
    const key = m[1];
    if (key === undefined) {
      close(lineStart - 1);
      const next = text.indexOf('\n', lineStart);
      start = next === -1 ? text.length + 1 : next + 1;
      seen = new Set();
      head = undefined;
    } else if (head === undefined) {
      if (HEAD_KEYS.has(key)) seen.add(key);
      else head = seen.has('kind') && seen.has('metadata') ? cutAt(text.slice(start, lineStart - 1)) : 'whole';
    }
  }
  close(text.length);
  return docs;
}

/** A document's head parsed on its own, when it is an object with a kind; else the document is parsed whole. */
function cutAt(text: string): { doc: unknown } | 'whole' {
  try {
    const doc = yaml.load(text);
    return isObject(doc) && doc.kind !== undefined ? { doc } : 'whole';
  } catch {
    return 'whole';
  }
}
