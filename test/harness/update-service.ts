/**
 * An OpenShift update service (Cincinnati / OSUS) for tests: GET /api/upgrades_info/v1/graph
 * on 127.0.0.1 answering as the real policy engine does (200 application/json; errors as
 * `{kind, value}` with its kinds and statuses), recording every request, and misbehaving on
 * demand for the hostile-input tests: huge, non-JSON, inconsistent or enormous graphs, a
 * redirect to another origin, a trickle.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CincinnatiGraph } from '../../fixtures/update-graph.js';

export const GRAPH_PATH = '/api/upgrades_info/v1/graph';
/** The policy engine's channel-filter check. */
const CHANNEL_PATTERN = /^[0-9a-z\-.]+$/;

export type UpdateServiceFault =
  /** A JSON-looking body of this many MiB, streamed in chunks (never held in memory). */
  | { readonly kind: 'huge-body'; readonly mebibytes: number }
  /** 200 application/json with an HTML error page, as a captive proxy answers. */
  | { readonly kind: 'not-json' }
  /** The channel's graph plus an edge naming a node index past the end. */
  | { readonly kind: 'edge-out-of-range' }
  /** The channel's graph with its newest node's version replaced (default `4.18.x`). */
  | { readonly kind: 'bad-version'; readonly version?: string }
  /** A generated graph of `count` (default 100 000) nodes in a chain, streamed. */
  | { readonly kind: 'many-nodes'; readonly count?: number }
  /** A redirect to another origin (default the same path on 127.0.0.2, where nothing listens). */
  | { readonly kind: 'redirect'; readonly to?: string; readonly status?: 301 | 302 | 307 | 308 }
  /** The channel's graph, one byte at a time (default 1 byte/s), with its full Content-Length. */
  | { readonly kind: 'slow-body'; readonly bytesPerSecond?: number };

export interface UpdateServiceOptions {
  /** The graph for a channel and architecture; undefined = a channel the service does not know. */
  readonly graphs: (channel: string, arch: string) => CincinnatiGraph | undefined;
  /** Faults by channel. */
  readonly faults?: Readonly<Record<string, UpdateServiceFault>>;
  /**
   * An unknown (well-formed) channel: 400 invalid_params (default), or 200 with an empty graph,
   * which is what the real service's channel filter leaves.
   */
  readonly unknownChannel?: 'error' | 'empty';
}

export interface UpdateServiceRequest {
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  readonly headers: { readonly accept: string | undefined };
}

export interface UpdateServiceHandle {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** The graph URL for a channel, as a cluster's `spec.upstream` plus the query the CVO adds. */
  graphUrl(channel: string, arch?: string): string;
  /** Every request, in order. */
  readonly requests: readonly UpdateServiceRequest[];
  /** Set (or clear, with undefined) the fault of one channel, or of every channel without its own. */
  setFault(fault: UpdateServiceFault | undefined, channel?: string): void;
  close(): Promise<void>;
}

export async function startUpdateService(options: UpdateServiceOptions): Promise<UpdateServiceHandle> {
  const requests: UpdateServiceRequest[] = [];
  const faults = new Map(Object.entries(options.faults ?? {}));
  let everyChannel: UpdateServiceFault | undefined;
  const timers = new Set<NodeJS.Timeout>();

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const query = Object.fromEntries(url.searchParams);
    requests.push({ method: req.method ?? 'GET', path: url.pathname, query, headers: { accept: req.headers.accept } });
    if (url.pathname !== GRAPH_PATH) return void res.writeHead(404).end();
    if (req.method !== 'GET' && req.method !== 'HEAD') return void res.writeHead(405, { allow: 'GET, HEAD' }).end();
    if (!acceptsJson(req.headers.accept)) return error(res, 406, 'invalid_content_type', 'invalid Content-Type requested');
    const channel = url.searchParams.get('channel');
    if (channel === null) return error(res, 400, 'missing_params', 'mandatory client parameters missing: channel');
    if (!CHANNEL_PATTERN.test(channel)) {
      return error(res, 400, 'invalid_params', `invalid client parameters: channel '${channel}' does not match regex '${CHANNEL_PATTERN.source}'`);
    }
    const arch = url.searchParams.get('arch') ?? 'amd64';
    const fault = faults.get(channel) ?? everyChannel;
    const graph = options.graphs(channel, arch);
    if (fault && !needsGraph(fault)) return serveFault(req, res, fault, undefined, timers);
    if (!graph) {
      if (options.unknownChannel === 'empty') return json(res, { nodes: [], edges: [], conditionalEdges: [] });
      return error(res, 400, 'invalid_params', `invalid client parameters: no graph for channel '${channel}' and arch '${arch}'`);
    }
    if (fault) return serveFault(req, res, fault, graph, timers);
    json(res, graph);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Port 0: the kernel picks a free port, with no window for another process to take it.
    server.listen(0, '127.0.0.1', resolve);
  });
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url: base,
    graphUrl: (channel, arch = 'amd64') => `${base}${GRAPH_PATH}?${new URLSearchParams({ channel, arch })}`,
    requests,
    setFault(fault, channel) {
      if (channel === undefined) everyChannel = fault;
      else if (fault) faults.set(channel, fault);
      else faults.delete(channel);
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** No Accept header, or one naming application/json, application/* or *\/* with q > 0. */
function acceptsJson(accept: string | undefined): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  return accept.split(',').some((range) => {
    const [type = '', ...params] = range.split(';').map((p) => p.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    return ['application/json', 'application/*', '*/*'].includes(type) && (q === undefined || Number(q.slice(2)) > 0);
  });
}

function needsGraph(fault: UpdateServiceFault): boolean {
  return fault.kind === 'edge-out-of-range' || fault.kind === 'bad-version' || fault.kind === 'slow-body';
}

function json(res: ServerResponse, body: unknown, status = 200): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': bytes.length });
  res.end(bytes);
}

function error(res: ServerResponse, status: number, kind: string, value: string): void {
  json(res, { kind, value }, status);
}

function serveFault(req: IncomingMessage, res: ServerResponse, fault: UpdateServiceFault, graph: CincinnatiGraph | undefined, timers: Set<NodeJS.Timeout>): void {
  switch (fault.kind) {
    case 'not-json':
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end('<html><body><h1>503 Service Unavailable</h1>No server is available to handle this request.</body></html>\n');
    case 'redirect': {
      const to = fault.to ?? `http://127.0.0.2:${(req.socket.localPort ?? 80).toString()}${req.url ?? GRAPH_PATH}`;
      return void res.writeHead(fault.status ?? 302, { location: to, 'content-length': 0 }).end();
    }
    case 'edge-out-of-range':
      return json(res, { ...graph!, edges: [...graph!.edges, [0, graph!.nodes.length + 7]] });
    case 'bad-version': {
      const nodes = graph!.nodes.map((n, i) => (i === graph!.nodes.length - 1 ? { ...n, version: fault.version ?? '4.18.x' } : n));
      return json(res, { ...graph!, nodes });
    }
    case 'huge-body': {
      const total = Math.floor(fault.mebibytes * 1024 * 1024);
      const head = '{"nodes":[],"edges":[],"conditionalEdges":[],"padding":"';
      const filler = Buffer.alloc(64 * 1024, 'x');
      let left = Math.max(0, total - head.length - 2);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': head.length + left + 2 });
      res.write(head);
      return stream(res, () => {
        if (left === 0) return undefined;
        const n = Math.min(left, filler.length);
        left -= n;
        return left === 0 ? Buffer.concat([filler.subarray(0, n), Buffer.from('"}')]) : filler.subarray(0, n);
      });
    }
    case 'many-nodes': {
      const count = fault.count ?? 100_000;
      let i = 0;
      let phase: 'nodes' | 'edges' | 'done' = 'nodes';
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"nodes":[');
      return stream(res, () => {
        if (phase === 'done') return undefined;
        const parts: string[] = [];
        for (let k = 0; k < 1000 && i < count; k++, i++) {
          const sep = i === 0 ? '' : ',';
          parts.push(phase === 'nodes'
            ? `${sep}{"version":"5.${Math.floor(i / 1000)}.${i % 1000}","payload":"quay.io/openshift-release-dev/ocp-release@sha256:${i.toString(16).padStart(64, '0')}","metadata":{}}`
            : i + 1 < count ? `${sep}[${i},${i + 1}]` : '');
        }
        if (i >= count) {
          parts.push(phase === 'nodes' ? '],"edges":[' : '],"conditionalEdges":[]}');
          phase = phase === 'nodes' ? 'edges' : 'done';
          i = 0;
        }
        return Buffer.from(parts.join(''));
      });
    }
    case 'slow-body': {
      const bytes = Buffer.from(JSON.stringify(graph));
      const interval = 1000 / (fault.bytesPerSecond ?? 1);
      let sent = 0;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': bytes.length });
      const tick = (): void => {
        if (res.destroyed) return;
        res.write(bytes.subarray(sent, sent + 1));
        if (++sent === bytes.length) return void res.end();
        const t = setTimeout(() => (timers.delete(t), tick()), interval);
        timers.add(t);
      };
      return tick();
    }
  }
}

/** Write what `next` returns until undefined, waiting for drain; stop when the client goes. */
function stream(res: ServerResponse, next: () => Buffer | undefined): void {
  const pump = (): void => {
    for (;;) {
      if (res.destroyed) return;
      const chunk = next();
      if (chunk === undefined) return void res.end();
      if (!res.write(chunk)) return void res.once('drain', pump);
    }
  };
  pump();
}
