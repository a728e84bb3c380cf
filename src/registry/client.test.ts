import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegistryClient } from './client.js';
import { MediaType } from './manifest.js';
import { parseReference } from './reference.js';

const manifest = Buffer.from(JSON.stringify({
  schemaVersion: 2,
  mediaType: MediaType.dockerManifest,
  config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: `sha256:${'1'.repeat(64)}`, size: 2 },
  layers: [],
}));
const digest = `sha256:${createHash('sha256').update(manifest).digest('hex')}`;
const config = Buffer.from('{"config":{"Labels":{"io.openshift.os.streamclass":"rhel-9"}}}');
const configDescriptor = { mediaType: 'application/vnd.docker.container.image.v1+json', digest: `sha256:${createHash('sha256').update(config).digest('hex')}`, size: config.length };

describe('RegistryClient.rememberManifests', () => {
  let server: Server;
  let host: string;
  const requests: string[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      requests.push(req.url!);
      if (req.url === '/v2/') return void res.writeHead(200).end('{}');
      if (req.url === `/v2/ns/app/blobs/${configDescriptor.digest}`) return void res.writeHead(200).end(config);
      if (req.url === '/v2/ns/app/manifests/v1' || req.url === `/v2/ns/app/manifests/${digest}`) {
        return void res.writeHead(200, { 'content-type': MediaType.dockerManifest, 'docker-content-digest': digest }).end(manifest);
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const client = () => new RegistryClient({ mirrors: [], pullSecrets: [], insecureRegistries: [host], retry: { attempts: 1, baseDelayMs: 1, maxDelayMs: 1 }, concurrency: 2, stallTimeoutMs: 5_000 });
  const manifestReads = () => requests.filter((r) => r.includes('/manifests/'));

  it('answers a read by digest from memory once the manifest was read (by tag or digest)', async () => {
    const c = client();
    c.rememberManifests();
    try {
      const byTag = await c.fetchManifest(parseReference(`${host}/ns/app:v1`));
      expect(byTag.digest).toBe(digest);
      const before = manifestReads().length;
      const byDigest = await c.fetchManifest(parseReference(`${host}/ns/app@${digest}`));
      expect(byDigest).toBe(byTag);
      expect(manifestReads().length).toBe(before);
      // A tag may move: it is always read again.
      await c.fetchManifest(parseReference(`${host}/ns/app:v1`));
      expect(manifestReads().length).toBe(before + 1);
    } finally {
      await c.close();
    }
  });

  it('reads every time without it', async () => {
    const c = client();
    try {
      const before = manifestReads().length;
      await c.fetchManifest(parseReference(`${host}/ns/app@${digest}`));
      await c.fetchManifest(parseReference(`${host}/ns/app@${digest}`));
      expect(manifestReads().length).toBe(before + 2);
    } finally {
      await c.close();
    }
  });

  it('keeps a small blob read with keep (a config the plan read), and only those', async () => {
    const blobReads = () => requests.filter((r) => r.includes('/blobs/')).length;
    const c = client();
    c.rememberManifests();
    try {
      const ref = parseReference(`${host}/ns/app@${digest}`);
      const before = blobReads();
      await c.readBlob(ref, configDescriptor, 1024);
      await c.readBlob(ref, configDescriptor, 1024, true);
      expect(blobReads()).toBe(before + 2);
      expect((await c.readBlob(ref, configDescriptor, 1024)).equals(config)).toBe(true);
      expect(blobReads()).toBe(before + 2);
    } finally {
      await c.close();
    }
  });
});
