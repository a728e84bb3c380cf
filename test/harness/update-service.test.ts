/**
 * The test update service: graphs as the real service answers them, its error replies, the
 * request log, and a few of its faults.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CincinnatiGraph } from '../../fixtures/update-graph.js';
import { GRAPH_PATH, startUpdateService, type UpdateServiceHandle } from './update-service.js';

const digest = (n: number): string => `sha256:${n.toString(16).padStart(64, '0')}`;
const node = (version: string, n: number) => ({
  version,
  payload: `quay.io/openshift-release-dev/ocp-release@${digest(n)}`,
  metadata: { 'io.openshift.upgrades.graph.release.manifestref': digest(n), 'io.openshift.upgrades.graph.release.channels': 'stable-4.17', url: 'https://access.redhat.com/errata/RHBA-2024:0001' },
});
const GRAPH: CincinnatiGraph = {
  nodes: [node('4.16.3', 1), node('4.16.8', 2), node('4.17.5', 3)],
  edges: [[0, 1], [1, 2]],
  conditionalEdges: [{ edges: [{ from: '4.16.3', to: '4.17.5' }], risks: [{ url: 'https://issues.redhat.com/browse/OCPBUGS-1', name: 'Risk', message: 'm', matchingRules: [{ type: 'Always' }] }] }],
};

let service: UpdateServiceHandle;

beforeAll(async () => {
  service = await startUpdateService({ graphs: (channel, arch) => (channel === 'stable-4.17' && arch === 'amd64' ? GRAPH : undefined), faults: { 'fast-4.17': { kind: 'redirect' } } });
});
afterAll(async () => {
  await service.close();
});

const get = (query: string, accept = 'application/json'): Promise<Response> => fetch(`${service.url}${GRAPH_PATH}?${query}`, { headers: { accept }, redirect: 'manual' });

describe('startUpdateService', () => {
  it('answers a channel graph as JSON and records the request', async () => {
    const res = await fetch(service.graphUrl('stable-4.17'), { headers: { accept: 'application/json' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toEqual(GRAPH);
    expect(service.requests.at(-1)).toEqual({ method: 'GET', path: GRAPH_PATH, query: { channel: 'stable-4.17', arch: 'amd64' }, headers: { accept: 'application/json' } });
  });

  it('answers errors as {kind, value} with the real statuses', async () => {
    const cases: Array<[string, string, number, string]> = [
      ['arch=amd64', 'application/json', 400, 'missing_params'],
      ['channel=Stable_4.17', 'application/json', 400, 'invalid_params'],
      ['channel=stable-4.99&arch=amd64', 'application/json', 400, 'invalid_params'],
      ['channel=stable-4.17&arch=s390x', 'application/json', 400, 'invalid_params'],
      ['channel=stable-4.17', 'text/html', 406, 'invalid_content_type'],
    ];
    for (const [query, accept, status, kind] of cases) {
      const res = await get(query, accept);
      expect(res.status, query).toBe(status);
      const body = (await res.json()) as { kind: string; value: string };
      expect(body.kind, query).toBe(kind);
      expect(body.value.length).toBeGreaterThan(0);
    }
    expect((await get('channel=stable-4.17', 'text/plain, */*;q=0.1')).status).toBe(200);
  });

  it('redirects a faulty channel to another origin', async () => {
    const res = await get('channel=fast-4.17&arch=amd64');
    expect(res.status).toBe(302);
    expect(new URL(res.headers.get('location')!).origin).not.toBe(service.url);
  });

  it('serves faults set at run time', async () => {
    service.setFault({ kind: 'edge-out-of-range' }, 'stable-4.17');
    const bad = (await (await get('channel=stable-4.17')).json()) as CincinnatiGraph;
    expect(bad.edges.some(([a, b]) => a >= bad.nodes.length || b >= bad.nodes.length)).toBe(true);

    service.setFault({ kind: 'huge-body', mebibytes: 3 }, 'stable-4.17');
    const huge = await get('channel=stable-4.17');
    expect(Number(huge.headers.get('content-length'))).toBe(3 * 1024 * 1024);
    expect((await huge.arrayBuffer()).byteLength).toBe(3 * 1024 * 1024);

    // A channel's own fault wins over the one for every channel.
    service.setFault({ kind: 'many-nodes', count: 2500 });
    expect(((await (await get('channel=stable-4.17')).json()) as { padding?: string }).padding).toBeDefined();
    service.setFault(undefined, 'stable-4.17');
    const generated = (await (await get('channel=stable-4.17')).json()) as CincinnatiGraph;
    expect(generated.nodes).toHaveLength(2500);
    expect(generated.edges).toHaveLength(2499);
    service.setFault(undefined);
    expect((await (await get('channel=stable-4.17')).json())).toEqual(GRAPH);
  });

  it('trickles a slow body and still closes', async () => {
    const slow = await startUpdateService({ graphs: () => GRAPH, faults: { 'stable-4.17': { kind: 'slow-body', bytesPerSecond: 20 } } });
    const res = await fetch(slow.graphUrl('stable-4.17'));
    const reader = res.body!.getReader();
    const started = Date.now();
    let received = 0;
    while (received < 3) received += (await reader.read()).value?.length ?? 0;
    expect(Date.now() - started).toBeGreaterThanOrEqual(80);
    await reader.cancel();
    await slow.close();
  });
});
