/**
 * Where an update graph comes from: an update service (the URL ClusterVersion spec.upstream names,
 * Red Hat's by default, an OpenShift Update Service in a disconnected cluster), asked as the CVO
 * asks it (`channel`, `arch`, `version` in the query, `Accept: application/json`), or a file (the
 * same JSON saved). Either way bounded (GRAPH_BOUNDS.bytes) before it is parsed.
 */
import { readFile, stat } from 'node:fs/promises';
import { BadInputError, RegistryError, systemErrorText } from '../errors.js';
import { dispatchRequest, dumpBody, type Dispatcher } from '../net/dispatcher.js';
import { readBody, readPrefix, ResponseTooLarge } from '../net/read-bounded.js';
import { hasUserinfo, redactUrl } from '../net/redact.js';
import { refuseOffTheWeb } from '../registry/redirect.js';
import { GRAPH_BOUNDS, parseGraph, type UpdateGraph } from './cincinnati.js';

/** The CVO's upstream when ClusterVersion spec.upstream is empty. */
export const RED_HAT_UPDATE_SERVICE = 'https://api.openshift.com/api/upgrades_info/v1/graph';

export interface GraphQuery {
  readonly channel: string;
  /** The graph's architecture names: amd64, arm64, ppc64le, s390x, multi. */
  readonly arch: string;
  /** The version the cluster runs, as the CVO sends it. */
  readonly version?: string;
}

const TIMEOUT_MS = 60_000;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** `where`: an http(s) URL of an update service, or a file holding its answer. */
export async function readGraph(where: string, query: GraphQuery, dispatcher: Dispatcher): Promise<UpdateGraph> {
  if (!/^https?:\/\//i.test(where)) return parseGraph(await readGraphFile(where), where, query.channel);
  let url: URL;
  try {
    url = new URL(where);
  } catch {
    throw new BadInputError(`--graph ${redactUrl(where)}: not a URL; name the update service's graph URL (…/api/upgrades_info/v1/graph) or a file`);
  }
  if (hasUserinfo(where)) throw new BadInputError(`--graph ${redactUrl(where)}: credentials in the URL would be sent to every redirect and printed; an update service takes none`);
  url.searchParams.set('channel', query.channel);
  url.searchParams.set('arch', query.arch);
  if (query.version) url.searchParams.set('version', query.version);
  const shown = redactUrl(url.href);
  const signal = AbortSignal.timeout(TIMEOUT_MS);
  let at = url.href;
  for (let hops = 0; ; hops++) {
    let res;
    try {
      res = await dispatchRequest(dispatcher, at, { headers: { accept: 'application/json', 'user-agent': 'prestage' }, signal });
    } catch (error) {
      throw new RegistryError(`update graph ${shown}: ${(error as Error).name === 'TimeoutError' ? `no answer in ${TIMEOUT_MS / 1000} s` : (error as Error).message}; check the URL, the proxy settings and the network`);
    }
    const location = res.headers.location;
    if (REDIRECTS.has(res.statusCode) && typeof location === 'string') {
      await dumpBody(res.body);
      const next = new URL(location, at);
      refuseOffTheWeb(next, `update graph ${shown}: redirected to`);
      if (hops >= 5) throw new RegistryError(`update graph ${shown}: more than 5 redirects`);
      if (new URL(at).protocol === 'https:' && next.protocol !== 'https:') throw new RegistryError(`update graph ${shown}: redirected from HTTPS to ${next.protocol.replace(':', '')}; refusing a downgrade`);
      at = next.href;
      continue;
    }
    if (res.statusCode !== 200) {
      const said = serviceError((await readPrefix(res.body, 4096)).toString('utf8'));
      const fault = `update graph ${shown}: HTTP ${res.statusCode}${said ? ` (${said})` : ''}`;
      // The service refusing the question (an unknown channel) is the user's to fix; its failing is the network's.
      throw res.statusCode >= 400 && res.statusCode < 500 ? new BadInputError(`${fault}; check --channel and --graph`) : new RegistryError(`${fault}; try again later`);
    }
    try {
      return parseGraph((await readBody(res.body, GRAPH_BOUNDS.bytes, `update graph ${shown}`)).toString('utf8'), shown, query.channel);
    } catch (error) {
      if (error instanceof ResponseTooLarge) throw new BadInputError(`${error.message}; not an update graph (check --graph)`);
      throw error;
    }
  }
}

async function readGraphFile(file: string): Promise<string> {
  try {
    const info = await stat(file);
    if (!info.isFile()) throw new BadInputError(`--graph ${file}: not a file; name a file holding an update service's graph JSON, or its URL`);
    if (info.size > GRAPH_BOUNDS.bytes) throw new BadInputError(`--graph ${file}: ${info.size} bytes, over the ${GRAPH_BOUNDS.bytes}-byte bound for an update graph`);
    return await readFile(file, 'utf8');
  } catch (error) {
    if (error instanceof BadInputError) throw error;
    throw new BadInputError(`--graph ${file}: ${systemErrorText(error as NodeJS.ErrnoException)}; name a file holding an update service's graph JSON, or its URL`);
  }
}

/** Cincinnati's error body `{kind, value}`, printable and short; else nothing. */
function serviceError(body: string): string | undefined {
  try {
    const doc = JSON.parse(body) as { kind?: unknown; value?: unknown };
    if (typeof doc.kind === 'string' && typeof doc.value === 'string') return `${doc.kind}: ${doc.value}`.replace(/[^\x20-\x7e]/g, '?').slice(0, 200);
  } catch {
    // not JSON: said by status alone
  }
  return undefined;
}

/** The graph architecture for prestage's --arch (Go's names; a multi-arch cluster asks `multi`). */
export function graphArch(arch: string): string {
  return arch === 'x86_64' ? 'amd64' : arch === 'aarch64' ? 'arm64' : arch;
}
