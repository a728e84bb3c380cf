/**
 * Names a bundle's files give are data, never paths: every file name, repository, tag and
 * digest read from `parts.json`, `index.json` and `prestage-bundle.json` is checked here,
 * against the distribution grammar (registry/reference.ts) or as a plain file name, before
 * it is joined into a path or a request. Values are quoted with JSON.stringify in messages,
 * so a name with a newline still gives one line. No I/O.
 */
import { BadInputError } from '../errors.js';
import { isDigest, isRepositoryPath, isTag, parseReference, type ImageReference } from '../registry/reference.js';

/** A name that stays in its directory: no separator, not `.` or `..`, no control character, at most 255 bytes. */
export function isPlainFileName(name: unknown): name is string {
  return typeof name === 'string' && name !== '' && name !== '.' && name !== '..' && !/[/\\\x00-\x1f\x7f]/.test(name) && Buffer.byteLength(name) <= 255;
}

const quote = (value: unknown): string => JSON.stringify(value) ?? String(value);

/** What `parts.json` may name: its layout (a plain name) and its parts `<layout>.tar.NNN`, in order. */
export function checkArchiveNames(doc: { layout?: unknown; parts?: unknown; bytes?: unknown }, file: string): void {
  const fail = (why: string): never => {
    throw new BadInputError(`${file}: ${why}; the parts file was altered: copy it again from where the bundle was created`);
  };
  if (!isPlainFileName(doc.layout)) fail(`layout ${quote(doc.layout)} is not a plain directory name`);
  if (!Array.isArray(doc.parts) || doc.parts.length === 0) fail('it lists no parts');
  const parts = doc.parts as unknown[];
  let total = 0;
  parts.forEach((part, i) => {
    const p = (part ?? {}) as { name?: unknown; size?: unknown; sha256?: unknown };
    const expected = `${doc.layout as string}.tar.${String(i).padStart(3, '0')}`;
    if (p.name !== expected) fail(`part ${i} is named ${quote(p.name)}, not ${quote(expected)}`);
    if (typeof p.size !== 'number' || !Number.isSafeInteger(p.size) || p.size < 0) fail(`part ${expected} has size ${quote(p.size)}`);
    if (typeof p.sha256 !== 'string' || !isDigest(p.sha256)) fail(`part ${expected} has sha256 ${quote(p.sha256)}, not sha256:<64 lowercase hex>`);
    total += p.size as number;
  });
  if (doc.bytes !== total) fail(`bytes ${quote(doc.bytes)} is not the sum of its parts' sizes (${total})`);
}

/** An image an `index.json` names (`org.opencontainers.image.ref.name`): a reference by digest, or an attachment's tag. */
export function indexReference(name: unknown, where: string): ImageReference {
  const fail = (why: string): never => {
    throw new BadInputError(`${where}: index.json names image ${quote(name)}, ${why}; the bundle was altered: create it again`);
  };
  if (typeof name !== 'string') return fail('not a string');
  let ref: ImageReference;
  try {
    ref = parseReference(name);
  } catch {
    return fail('which is not a valid image reference (registry/repository[:tag][@sha256:<64 hex>])');
  }
  if (ref.digest === undefined && ref.tag === undefined) fail('with neither a digest nor a tag');
  return ref;
}

/** The names `prestage-bundle.json` gives: the release's pullspec and tags, and blob digests. */
export function checkMetadataNames(metadata: { release?: unknown; previous?: unknown; signatures?: unknown; operators?: unknown }, where: string): void {
  const fail = (why: string): never => {
    throw new BadInputError(`${where}: prestage-bundle.json ${why}; the bundle was altered: create it again`);
  };
  const release = (metadata.release ?? {}) as { pullSpec?: unknown; version?: unknown; tags?: unknown };
  if (typeof release.version !== 'string') fail(`has release version ${quote(release.version)}`);
  try {
    if (typeof release.pullSpec !== 'string') throw new Error();
    parseReference(release.pullSpec);
  } catch {
    fail(`names release ${quote(release.pullSpec)}, which is not a valid image reference`);
  }
  if (release.tags !== undefined) {
    if (!Array.isArray(release.tags)) fail('has release tags that are not a list');
    for (const tag of release.tags as unknown[]) {
      if (!isTag(tag)) fail(`names release tag ${quote(tag)}, which is not a tag ([A-Za-z0-9_][A-Za-z0-9._-]{0,127})`);
    }
  }
  const blobs = (list: unknown, what: string): void => {
    if (!Array.isArray(list)) fail(`has ${what} that are not a list`);
    for (const blob of list as unknown[]) checkBlobRef(blob, what, fail);
  };
  if (metadata.previous !== undefined) {
    const previous = metadata.previous as { source?: unknown; blobs?: unknown };
    // Printed in messages: one line stays one line.
    if (typeof previous.source !== 'string' || /[\x00-\x1f\x7f]/.test(previous.source)) fail(`names previous bundle ${quote(previous.source)}`);
    blobs(previous.blobs, 'previous blobs');
  }
  const catalogs = (metadata.operators as { catalogs?: unknown } | undefined)?.catalogs;
  if (metadata.operators !== undefined && !Array.isArray(catalogs)) fail('has operators.catalogs that are not a list');
  for (const catalog of (catalogs ?? []) as unknown[]) checkCatalogNames((catalog ?? {}) as Record<string, unknown>, fail);
  const gpg = (metadata.signatures as { release?: { digest?: unknown; signatures?: unknown; keys?: unknown } } | undefined)?.release;
  if (gpg !== undefined) {
    if (typeof gpg.digest !== 'string' || !isDigest(gpg.digest)) fail(`names signed digest ${quote(gpg.digest)}, not sha256:<64 lowercase hex>`);
    blobs(gpg.signatures, 'release signature blobs');
    if (gpg.keys !== undefined) checkBlobRef(gpg.keys, 'release keys blob', fail);
  }
}

/** An operator catalog's record: what push turns into requests (images, repository, tag) and verify into paths inside an image. */
function checkCatalogNames(c: Record<string, unknown>, fail: (why: string) => never): void {
  const reference = (value: unknown, byDigest: boolean): boolean => {
    if (typeof value !== 'string') return false;
    try {
      return !byDigest || parseReference(value).digest !== undefined;
    } catch {
      return false;
    }
  };
  if (!reference(c.reference, false)) fail(`names catalog ${quote(c.reference)}, which is not a valid image reference`);
  for (const field of ['source', 'image'] as const) if (!reference(c[field], true)) fail(`names catalog ${field} ${quote(c[field])}, not an image reference by digest`);
  if (c.targetCatalog !== undefined && !isRepositoryPath(c.targetCatalog)) fail(`names catalog targetCatalog ${quote(c.targetCatalog)}, which is not a repository path`);
  if (c.tag !== undefined && !isTag(c.tag)) fail(`names catalog tag ${quote(c.tag)}, which is not a tag`);
  for (const field of ['configsDir', 'cacheDir'] as const) {
    const path = c[field];
    if (path !== undefined && (typeof path !== 'string' || !path.startsWith('/') || path.split('/').includes('..') || /[\x00-\x1f\x7f]/.test(path))) fail(`names catalog ${field} ${quote(path)}, which is not a directory inside an image`);
  }
  for (const field of ['packages', 'bundles'] as const) {
    if (c[field] !== undefined && (!Array.isArray(c[field]) || (c[field] as unknown[]).some((n) => typeof n !== 'string' || /[\x00-\x1f\x7f]/.test(n)))) fail(`names catalog ${field} that are not a list of names`);
  }
}

function checkBlobRef(blob: unknown, what: string, fail: (why: string) => never): void {
  const b = (blob ?? {}) as { digest?: unknown; size?: unknown };
  if (typeof b.digest !== 'string' || !isDigest(b.digest)) fail(`names ${what} digest ${quote(b.digest)}, not sha256:<64 lowercase hex>`);
  if (typeof b.size !== 'number' || !Number.isSafeInteger(b.size) || b.size < 0) fail(`names ${what} ${b.digest as string} with size ${quote(b.size)}`);
}
