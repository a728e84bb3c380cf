/**
 * Where release signatures come from: HTTP(S) signature stores in the layout the CVO reads
 * (library-go pkg/verify/store/sigstore: `<store>/sha256=<hex>/signature-<N>` from 1 until a
 * 404), or a directory of signatures downloaded before (the store layout, flat files, or the
 * ConfigMaps that `oc adm release mirror` and oc-mirror write).
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { BadInputError, PrestageError, RegistryError, systemErrorText } from '../errors.js';
import { dispatchRequest, dumpBody, type Dispatcher } from '../net/dispatcher.js';
import { readBody, ResponseTooLarge } from '../net/read-bounded.js';
import { hasUserinfo, redactUrl, redactUrls } from '../net/redact.js';
import { followRedirect } from '../registry/redirect.js';

/** Red Hat's stores, as cluster-update-keys configures the CVO (store-openshift-official-release*). */
export const RED_HAT_SIGNATURE_STORES: readonly string[] = [
  'https://mirror.openshift.com/pub/openshift-v4/signatures/openshift/release',
  'https://storage.googleapis.com/openshift-release/official/signatures/openshift/release',
];

/** library-go reads signature-1 to signature-9 (maxSignatureSearch = 10, exclusive): a store cannot make it read forever. */
export const MAX_STORE_SIGNATURES = 9;
/** library-go reads at most 50 KiB of a signature; a bigger body is not one. */
export const MAX_SIGNATURE_BYTES = 50 * 1024;
/** Whole request, redirects included. */
const DEFAULT_TIMEOUT_MS = 30_000;
/** A file in a signatures directory bigger than this is no ConfigMap of signatures. */
const MAX_CONFIGMAP_FILE_BYTES = 16 * 1024 * 1024;

/**
 * Validates a signature store URL (`where`: the flag or ConfigMap key naming it); returns it
 * without a trailing slash. Userinfo is refused, not used: a password in a URL ends up in shell
 * history, logs and the bundle that travels to the site, and the CVO's stores need none.
 */
export function parseSignatureStore(value: string, where = '--signature-store'): string {
  const shown = redactUrl(value.trim());
  const fix = `pass the store's base URL, under which signatures are <store>/sha256=<hex>/signature-<N>, e.g. ${RED_HAT_SIGNATURE_STORES[0]}`;
  if (hasUserinfo(value)) {
    throw new BadInputError(`${where} ${shown} carries credentials (user:password@), which prestage neither sends nor stores; pass the store's URL without them, or download the signatures and pass --signatures-from DIR`);
  }
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw new BadInputError(`${where} ${shown} is not a URL; ${fix}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new BadInputError(`${where} ${shown} is not an http:// or https:// URL; ${fix}`);
  if (url.username || url.password) throw new BadInputError(`${where} ${shown} carries credentials (user:password@), which prestage neither sends nor stores; pass the store's URL without them`);
  if (url.search || url.hash) throw new BadInputError(`${where} ${shown} has a query or fragment, which signature paths cannot follow; ${fix}`);
  return value.trim().replace(/\/+$/, '');
}

export interface StoreFetch {
  /** GET url → status and body bytes capped at maxBytes (throws StoreBodyTooLarge when over) */
  (url: string, maxBytes: number): Promise<{ status: number; body: Buffer }>;
}

export class StoreBodyTooLarge extends Error {}

export type StoreResult = { readonly store: string; readonly signatures: readonly Buffer[] };

/** `sha256=<hex>` and `sha256-<hex>`: how stores and ConfigMap keys spell a digest. */
function digestParts(digest: string): { readonly algorithm: string; readonly hex: string } {
  const m = /^([a-z0-9]+):([a-zA-Z0-9=_-]+)$/.exec(digest);
  if (!m) throw new BadInputError(`${digest} is not a digest (algorithm:hex) to find release signatures for`);
  return { algorithm: m[1]!, hex: m[2]! };
}

/**
 * signature-1, -2, ... until a 404. A status other than 2xx or 404, or a network failure, is a
 * RegistryError (exit 3); an empty body is skipped, as the CVO skips it.
 */
export async function fetchStoreSignatures(store: string, digest: string, get: StoreFetch): Promise<StoreResult> {
  const { algorithm, hex } = digestParts(digest);
  const signatures: Buffer[] = [];
  for (let n = 1; n <= MAX_STORE_SIGNATURES; n++) {
    const url = `${store}/${algorithm}=${hex}/signature-${n}`;
    // Messages name the store without any user:password it was given with.
    const shown = redactUrl(url);
    let answer: { status: number; body: Buffer };
    try {
      answer = await get(url, MAX_SIGNATURE_BYTES);
    } catch (err) {
      if (err instanceof StoreBodyTooLarge) throw new BadInputError(`${shown} is larger than ${MAX_SIGNATURE_BYTES / 1024} KiB, so it is not a release signature (the CVO reads no more); check --signature-store`);
      if (err instanceof PrestageError) throw err;
      throw new RegistryError(`cannot read signature ${shown}: ${redactUrls(networkReason(err))}; check the network and proxy, or choose another --signature-store`, { cause: err });
    }
    if (answer.status === 404) break;
    if (answer.status < 200 || answer.status > 299) {
      throw new RegistryError(`signature store answered HTTP ${answer.status} for ${shown}; retry later, or choose another --signature-store`);
    }
    if (answer.body.length > 0) signatures.push(answer.body);
  }
  return { store, signatures };
}

const TLS_TRUST_CODES = /^(UNABLE_TO_|SELF_SIGNED_CERT|DEPTH_ZERO_SELF_SIGNED|CERT_|ERR_TLS_CERT_ALTNAME_INVALID)/;

/** What failed, in a few words: the codes of Node and the dispatcher's timers (named as undici names them). */
function networkReason(err: unknown): string {
  const chain: Error[] = [];
  for (let e: unknown = err; e instanceof Error && chain.length < 8; e = e.cause) chain.push(e);
  const code = (e: Error): string => (e as NodeJS.ErrnoException).code ?? '';
  if (chain.some((e) => e.name === 'TimeoutError' || /^UND_ERR_.*TIMEOUT$/.test(code(e)))) return 'timed out';
  const tls = chain.find((e) => TLS_TRUST_CODES.test(code(e)));
  if (tls) return `TLS certificate not trusted (${code(tls)}); pass --ca-file with the store's CA`;
  if (chain.some((e) => code(e) === 'ENOTFOUND')) return 'host not found';
  const first = chain[0];
  if (!first) return String(err);
  return code(first) && !first.message.includes(code(first)) ? `${first.message} (${code(first)})` : first.message;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * A StoreFetch over the registries' dispatcher, so proxies, --ca-file and insecure origins apply
 * alike. Redirects are followed as Go's http.Client does for the CVO (never down to plain HTTP).
 */
export function dispatcherFetch(dispatcher: Dispatcher, timeoutMs = DEFAULT_TIMEOUT_MS): StoreFetch {
  return async (url, maxBytes) => {
    const signal = AbortSignal.timeout(timeoutMs);
    let at = url;
    for (let hops = 1; ; hops++) {
      const res = await dispatchRequest(dispatcher, at, { signal });
      const location = res.headers.location;
      if (REDIRECTS.has(res.statusCode) && typeof location === 'string') {
        await dumpBody(res.body);
        at = followRedirect(at, location, hops, `signature ${redactUrl(url)}`).url;
        // Credentials in a Location would be sent, and printed in any later message.
        if (hasUserinfo(at)) throw new RegistryError(`signature ${redactUrl(url)} redirects to ${redactUrl(at)}, a URL with credentials; choose another --signature-store`);
        continue;
      }
      if (res.statusCode < 200 || res.statusCode > 299) {
        await dumpBody(res.body);
        return { status: res.statusCode, body: Buffer.alloc(0) };
      }
      try {
        return { status: res.statusCode, body: await readBody(res.body, maxBytes, redactUrl(at)) };
      } catch (err) {
        throw err instanceof ResponseTooLarge ? new StoreBodyTooLarge(err.message) : err;
      }
    }
  };
}

/** One signature read from a directory, and where: its file, and the ConfigMap key in it. */
interface Found {
  readonly bytes: Buffer;
  readonly where: string;
}

/**
 * Signatures for `digest` downloaded before, from any of: the store layout
 * `DIR/sha256=<hex>/signature-<N>`; flat files `DIR/sha256-<hex>-<N>`; ConfigMap YAML or JSON
 * files whose binaryData keys start with `sha256-<hex>` (`oc adm release mirror
 * --release-image-signature-to-dir` writes one per release, .yaml before oc 4.11 and .json
 * since; oc-mirror v2 writes signature-configmap.yaml and .json). In order of N (or key),
 * the same bytes once; `files[i]` says where `signatures[i]` was read.
 */
export async function readSignaturesDir(dir: string, digest: string): Promise<{ readonly signatures: readonly Buffer[]; readonly files: readonly string[] }> {
  const { algorithm, hex } = digestParts(digest);
  let entries: string[];
  try {
    if (!(await stat(dir)).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
    entries = (await readdir(dir)).sort();
  } catch (err) {
    throw new BadInputError(`cannot read the signatures directory ${dir}: ${systemErrorText(err as NodeJS.ErrnoException)}; pass the directory the signatures were downloaded into`);
  }
  const found: Found[] = [];
  const storeDir = join(dir, `${algorithm}=${hex}`);
  if (entries.includes(`${algorithm}=${hex}`)) {
    let names: string[];
    try {
      names = await readdir(storeDir);
    } catch (err) {
      throw new BadInputError(`cannot read the signatures directory ${storeDir}: ${systemErrorText(err as NodeJS.ErrnoException)}`);
    }
    for (const name of byNumber(names, /^signature-(\d+)$/)) found.push(await readFound(join(storeDir, name)));
  }
  const prefix = `${algorithm}-${hex}`;
  const flat = new RegExp(`^${prefix}-(\\d+)$`);
  for (const name of byNumber(entries, flat)) found.push(await readFound(join(dir, name)));
  for (const name of entries.filter((e) => /\.(ya?ml|json)$/i.test(e))) found.push(...(await configMapSignatures(join(dir, name), prefix)));
  const seen = new Set<string>();
  const unique: Found[] = [];
  for (const f of found) {
    const bytes = f.bytes.toString('base64');
    if (f.bytes.length === 0 || seen.has(bytes)) continue;
    seen.add(bytes);
    unique.push(f);
  }
  return { signatures: unique.map((f) => f.bytes), files: unique.map((f) => f.where) };
}

/** Names matching `pattern` (its group: N), in order of N. */
function byNumber(names: readonly string[], pattern: RegExp): string[] {
  const number = (name: string): number => Number(pattern.exec(name)?.[1] ?? NaN);
  return names.filter((n) => pattern.test(n)).sort((a, b) => number(a) - number(b));
}

async function readFound(path: string): Promise<Found> {
  try {
    return { bytes: await readFile(path), where: path };
  } catch (err) {
    throw new BadInputError(`cannot read release signature ${path}: ${systemErrorText(err as NodeJS.ErrnoException)}`);
  }
}

/**
 * binaryData entries whose key starts with `prefix`, as the CVO's ConfigMap store picks them.
 * Files that are no ConfigMap (other YAML beside them) are passed over.
 */
async function configMapSignatures(path: string, prefix: string): Promise<Found[]> {
  let documents: unknown[];
  try {
    if ((await stat(path)).size > MAX_CONFIGMAP_FILE_BYTES) return [];
    // json: a repeated key keeps the last value instead of failing, as kubectl reads it.
    documents = yaml.loadAll(await readFile(path, 'utf8'), null, { json: true });
  } catch {
    return [];
  }
  const configMaps = documents.flatMap((d) => (isRecord(d) && d.kind === 'List' && Array.isArray(d.items) ? d.items : [d])).filter(isRecord);
  const out: Found[] = [];
  for (const cm of configMaps) {
    if (!isRecord(cm.binaryData)) continue;
    const keys = Object.keys(cm.binaryData).filter((k) => k.startsWith(prefix));
    keys.sort((a, b) => keyNumber(a) - keyNumber(b) || a.localeCompare(b));
    for (const key of keys) {
      const value = cm.binaryData[key];
      if (typeof value === 'string') out.push({ bytes: Buffer.from(value, 'base64'), where: `${path} (${key})` });
    }
  }
  return out;
}

function keyNumber(key: string): number {
  return Number(/-(\d+)$/.exec(key)?.[1] ?? Number.MAX_SAFE_INTEGER);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
