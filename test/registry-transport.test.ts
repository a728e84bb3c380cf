/**
 * The transport's layers on real registries: the scheme decided once (a reset while probing an
 * HTTPS registry never means plain HTTP; credentials never go over plain HTTP to a registry not
 * named insecure), one retry budget per operation (no retries of retries; `--retries 0` means
 * no retry at all), and every `WWW-Authenticate` challenge read.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Plan } from '../src/plan/types.js';
import { RegistryClient } from '../src/registry/client.js';
import { parseReference } from '../src/registry/reference.js';
import { startRegistry, startTcpFaults, type RegistryHandle } from './harness/index.js';
import { runCli } from './support/cli.js';
import { authFile, removeTempDirs, tempDir } from './support/temp-files.js';

const truth = inject('fixtureTruth');
const storageDir = inject('fixtureStorageDir');
const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
const handles: Array<{ stop(): Promise<void> }> = [];
afterAll(async () => {
  removeTempDirs();
  for (const h of handles.reverse()) await h.stop();
});

function plan(host: string, ...args: string[]) {
  return runCli(['plan', RELEASE, '--mirror', `quay.io=${host}`, '-o', 'json', ...args]);
}

/** `stderr`: the lines expected (a retry summary), none by default. */
function planned(r: { code: number; stdout: string; stderr: string }, stderr: RegExp[] = []): Plan {
  expect(r.stderr.split('\n').filter(Boolean)).toEqual(stderr.map((line) => expect.stringMatching(line)));
  expect(r.code).toBe(0);
  const p = JSON.parse(r.stdout) as Plan;
  expect(p.release.digest).toBe(truth.release.image.digest);
  return p;
}

/** The release's payload layer: the one blob every plan reads in full. */
function manifestsLayer(): string {
  return truth.release.image.layers.at(-1)!.digest;
}

describe('scheme, decided once', () => {
  let tls: RegistryHandle;
  beforeAll(async () => {
    tls = await startRegistry({ storageDir, tls: true });
    handles.push(tls);
  });

  it('stays on HTTPS when the probe of an insecure HTTPS registry is reset twice', async () => {
    const relay = await startTcpFaults(tls.host, (_chunk, index) => index < 2);
    handles.push(relay);
    planned(await plan(relay.host, '--insecure-registry', relay.host), [new RegExp(`^prestage: warning: ${relay.host}: 2 retries \\(ECONNRESET x2\\)$`)]);
    expect(relay.connections.slice(0, 2).map((c) => c.reset)).toEqual([true, true]);
    expect(relay.connections.length).toBeGreaterThan(2);
    expect(relay.connections.filter((c) => !c.tls)).toEqual([]);
  });

  it('does not probe a registry that is not named insecure, and sends it only TLS', async () => {
    const relay = await startTcpFaults(tls.host, () => false);
    handles.push(relay);
    planned(await plan(relay.host, '--ca-file', tls.caFile!));
    expect(relay.connections.every((c) => c.tls)).toBe(true);
  });

  it('never sends credentials in plain HTTP to a plain-HTTP registry not named insecure', async () => {
    const basic = await startRegistry({ storageDir, auth: 'basic' });
    handles.push(basic);
    const relay = await startTcpFaults(basic.host, () => false);
    handles.push(relay);
    const r = await plan(relay.host, '--registry-config', await authFile(relay.host, basic.username!, basic.password!));
    expect(r.code).toBe(3);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/answers plain HTTP, not HTTPS.*pass --insecure-registry 127\.0\.0\.1:\d+/)]);
    expect(relay.connections.length).toBeGreaterThan(0);
    expect(relay.connections.every((c) => c.tls)).toBe(true);
  });
});

describe('one retry budget per operation', () => {
  let registry: RegistryHandle;
  beforeAll(async () => {
    registry = await startRegistry({ storageDir });
    handles.push(registry);
  });

  it('spends --retries once on a blob whose every request is reset: 3 requests for --retries 2, not 3 x 3', async () => {
    const relay = await startTcpFaults(registry.host, (chunk) => chunk.includes(`/blobs/${manifestsLayer()}`));
    handles.push(relay);
    const r = await plan(relay.host, '--insecure-registry', relay.host, '--retries', '2');
    expect(r.code).toBe(3);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`${manifestsLayer()}: blob transfer kept failing \\(connection error \\w+\\) at byte 0 of \\d+ after 3 attempts`))]);
    const layerRequests = [...relay.resets, ...relay.connections.map((c) => c.firstLine)].filter((line) => line.includes(`/blobs/${manifestsLayer()}`) && line.startsWith('GET'));
    expect(layerRequests).toHaveLength(3);
  });

  it('with --retries 0 makes one attempt and announces no retry', async () => {
    const relay = await startTcpFaults(registry.host, (chunk) => chunk.includes(`/blobs/${manifestsLayer()}`));
    handles.push(relay);
    const dir = await tempDir('prestage-bundle-');
    const r = await runCli(['bundle', 'create', RELEASE, '--output-dir', dir, '--mirror', `quay.io=${relay.host}`, '--insecure-registry', relay.host, '--retries', '0', '--allow-unsigned']);
    expect(r.code).toBe(3);
    expect(r.stderr).not.toMatch(/retry/);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/blob transfer kept failing .* after 1 attempt\b/)]);
    const layerRequests = [...relay.resets, ...relay.connections.map((c) => c.firstLine)].filter((line) => line.includes(`/blobs/${manifestsLayer()}`) && line.startsWith('GET'));
    expect(layerRequests).toHaveLength(1);
  });
});

describe('challenges', () => {
  let server: Server;
  let host: string;
  const tokenRequests: IncomingHttpHeaders[] = [];
  const manifestAuth: Array<string | undefined> = [];
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${'a'.repeat(64)}`, size: 2 }, layers: [] }));
  beforeAll(async () => {
    // A registry offering Negotiate first, then Bearer in a second header, with a token that claims 1 s.
    server = createServer((req, res) => {
      if (req.url?.startsWith('/token')) {
        tokenRequests.push(req.headers);
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ token: 'tok', expires_in: 1 }));
        return;
      }
      if (req.headers.authorization !== 'Bearer tok') {
        res.statusCode = 401;
        res.setHeader('www-authenticate', ['Negotiate', `Bearer realm="http://${host}/token",service="test"`]);
        res.end();
        return;
      }
      manifestAuth.push(req.headers.authorization);
      res.setHeader('content-type', 'application/vnd.oci.image.manifest.v1+json');
      res.end(manifest);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    host = `127.0.0.1:${(server.address() as { port: number }).port}`;
    handles.push({ stop: () => new Promise<void>((resolve) => server.close(() => resolve())) });
  });

  it('answers Bearer when Negotiate comes first, and keeps a 1 s token for a minute', async () => {
    const client = new RegistryClient({ pullSecrets: [], insecureRegistries: [host], mirrors: [], retry: { attempts: 1, baseDelayMs: 1, maxDelayMs: 1 }, concurrency: 4, stallTimeoutMs: 5_000 });
    try {
      const ref = parseReference(`${host}/a/b:1`);
      await client.fetchManifest(ref);
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      await client.fetchManifest(ref);
    } finally {
      await client.close();
    }
    expect(manifestAuth).toEqual(['Bearer tok', 'Bearer tok']);
    expect(tokenRequests).toHaveLength(1);
  });
});
