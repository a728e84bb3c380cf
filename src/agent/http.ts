/** One small HTTP server for the agent: Prometheus `/metrics` and `/healthz`. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface AgentHttpServer {
  readonly port: number;
  close(): Promise<void>;
}

/** `healthy()` false answers 503 so the kubelet restarts an agent whose loop makes no progress. */
export async function serveAgentHttp(registry: Registry, healthy: () => boolean, port: number, host = '0.0.0.0'): Promise<AgentHttpServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET') {
      response.writeHead(405).end();
    } else if (path === '/metrics') {
      registry.metrics().then(
        (text) => response.writeHead(200, { 'content-type': registry.contentType }).end(text),
        (error: Error) => response.writeHead(500).end(error.message),
      );
    } else if (path === '/healthz') {
      const ok = healthy();
      response.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok\n' : 'no progress: the reconcile loop is stuck\n');
    } else {
      response.writeHead(404).end();
    }
  });
  const bound = await listen(server, port, host);
  return {
    port: bound,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Listens on `host:port` (0: any port); resolves with the port bound, rejects if it cannot. */
export async function listen(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}
