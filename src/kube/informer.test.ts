import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { Informer, withoutFieldManagers } from './informer.js';
import { KubeClient } from './client.js';

let server: Server | undefined;
afterEach(() => server?.close());

const node = (name: string, resourceVersion: string) => ({ metadata: { name, resourceVersion } });

it('re-watches from the last bookmark, and re-lists when the server answers 410 Gone', async () => {
  const lists: string[] = [];
  const watches: Array<Record<string, string>> = [];
  server = createServer((req, res) => {
    const url = new URL(req.url!, 'http://x');
    res.setHeader('content-type', 'application/json');
    if (url.searchParams.get('watch') !== 'true') {
      lists.push(url.pathname);
      const items = lists.length === 1 ? [node('a', '10')] : [node('a', '10'), node('b', '20')];
      res.end(JSON.stringify({ metadata: { resourceVersion: lists.length === 1 ? '10' : '20' }, items }));
      return;
    }
    watches.push(Object.fromEntries(url.searchParams));
    const send = (event: object) => res.write(`${JSON.stringify(event)}\n`);
    if (watches.length === 1) {
      // The server ends a watch after its timeout; the bookmark says how far it got.
      send({ type: 'BOOKMARK', object: node('', '15') });
      res.end();
    } else if (watches.length === 2) {
      send({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 15 (18)' } });
      res.end();
    } else {
      send({ type: 'ADDED', object: node('c', '21') });
    }
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'fake', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'anonymous' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'anonymous' }],
    currentContext: 'fake',
  });
  const abort = new AbortController();
  let changed!: () => void;
  const sawC = new Promise<void>((resolve) => (changed = resolve));
  const informer: Informer = new Informer(new KubeClient(config), '/api/v1/nodes', { onChange: () => informer.items.has('c') && changed() });
  await informer.start(abort.signal);
  await sawC;
  abort.abort();

  expect([...informer.items.keys()].sort()).toEqual(['a', 'b', 'c']);
  expect(lists).toHaveLength(2);
  expect(watches.map((w) => w['resourceVersion'])).toEqual(['10', '15', '20']);
  expect(watches.every((w) => w['allowWatchBookmarks'] === 'true')).toBe(true);
});

it('withoutFieldManagers keeps everything of an object but its field managers', () => {
  const set = { apiVersion: 'prestage.dev/v1', kind: 'PinnedImageSet', metadata: { name: 'a', uid: 'u', resourceVersion: '7', managedFields: [{ manager: 'prestage', fieldsV1: { 'f:spec': {} } }] }, spec: { pinnedImages: [{ name: 'x' }] }, status: { nodes: 1 } };
  const slim = withoutFieldManagers(set);
  expect(slim).toEqual({ apiVersion: 'prestage.dev/v1', kind: 'PinnedImageSet', metadata: { name: 'a', uid: 'u', resourceVersion: '7' }, spec: { pinnedImages: [{ name: 'x' }] }, status: { nodes: 1 } });
  expect('managedFields' in slim.metadata).toBe(false);
});
