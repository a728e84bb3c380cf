/**
 * How plan reaches registries: Basic and Bearer auth, TLS with a test CA, and every fault
 * the proxy can inject (throttling, 5xx, resets, truncation, stalls, corruption, CDN
 * redirects that must not carry credentials). Real docker-registry instances throughout.
 */
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { startFaultProxy, startRegistry, type FaultProxy, type RegistryHandle } from './harness/index.js';
import { runCli } from './support/cli.js';
import type { Plan } from '../src/plan/types.js';
import { authFile, removeTempDirs } from './support/temp-files.js';

const truth = inject('fixtureTruth');
const storageDir = inject('fixtureStorageDir');
const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
const handles: Array<{ stop(): Promise<void> }> = [];

async function plan(host: string, ...args: string[]) {
  return runCli(['plan', RELEASE, '--mirror', `quay.io=${host}`, '-o', 'json', ...args]);
}

/** `retries`: the stderr lines expected (retry notices), none by default. */
function expectPlanned(r: { code: number; stdout: string; stderr: string }, retries: RegExp[] = []): Plan {
  const lines = r.stderr.split('\n').filter(Boolean);
  expect(lines).toHaveLength(retries.length);
  retries.forEach((re, i) => expect(lines[i]).toMatch(re));
  expect(r.code).toBe(0);
  const p = JSON.parse(r.stdout) as Plan;
  expect(p.release.digest).toBe(truth.release.image.digest);
  // Every component read: in a set, or skipped with a reason; plus the release image.
  expect(p.images.length + p.skipped.length).toBe(truth.components.length + 1);
  return p;
}

afterAll(async () => {
  removeTempDirs();
  for (const h of handles.reverse()) await h.stop();
});

describe('Basic auth (htpasswd)', () => {
  let registry: RegistryHandle;
  beforeAll(async () => {
    registry = await startRegistry({ storageDir, auth: 'basic' });
    handles.push(registry);
  });

  it('plans with credentials from --registry-config', async () => {
    expectPlanned(await plan(registry.host, '--insecure-registry', registry.host, '--registry-config', await authFile(registry.host, registry.username!, registry.password!)));
  });
  it('finds credentials through REGISTRY_AUTH_FILE', async () => {
    const saved = process.env.REGISTRY_AUTH_FILE;
    process.env.REGISTRY_AUTH_FILE = await authFile(registry.host, registry.username!, registry.password!);
    try {
      expectPlanned(await plan(registry.host, '--insecure-registry', registry.host));
    } finally {
      if (saved === undefined) delete process.env.REGISTRY_AUTH_FILE;
      else process.env.REGISTRY_AUTH_FILE = saved;
    }
  });
  it('exits 3 naming the fix when no credentials are found', async () => {
    const r = await plan(registry.host, '--insecure-registry', registry.host, '--registry-config', await authFile('other.example.com', 'u', 'p'));
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/access denied \(401\) to openshift-release-dev\/ocp-release .*no credentials found; pass --registry-config/);
  });
  it('exits 3 when the credentials are refused, without printing them', async () => {
    const r = await plan(registry.host, '--insecure-registry', registry.host, '--registry-config', await authFile(registry.host, registry.username!, 'wrong-password'));
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/the credentials found were refused/);
    expect(r.stderr).not.toContain('wrong-password');
  });
});

describe('Bearer token auth', () => {
  let registry: RegistryHandle;
  beforeAll(async () => {
    registry = await startRegistry({ storageDir, auth: 'token' });
    handles.push(registry);
  });
  afterEach(() => {
    registry.tokenIssuer!.quayMode = false;
    registry.tokenIssuer!.resetStats();
  });

  it('gets one token per repository scope and reuses it for hundreds of requests', async () => {
    const creds = await authFile(registry.host, registry.username!, registry.password!);
    registry.tokenIssuer!.resetStats();
    expectPlanned(await plan(registry.host, '--insecure-registry', registry.host, '--registry-config', creds));
    const scopes = registry.tokenIssuer!.log.map((l) => l.scopes.join(' ')).sort();
    expect(scopes).toEqual(['repository:openshift-release-dev/ocp-release:pull', 'repository:openshift-release-dev/ocp-v4.0-art-dev:pull']);
    expect(registry.tokenIssuer!.log.every((l) => l.authenticated)).toBe(true);
  });
  it('treats a token lifetime under 60 s as 60 s instead of refetching per request', async () => {
    registry.tokenIssuer!.expiresIn = 5;
    try {
      expectPlanned(await plan(registry.host, '--insecure-registry', registry.host, '--registry-config', await authFile(registry.host, registry.username!, registry.password!)));
      expect(registry.tokenIssuer!.requests).toBe(2);
    } finally {
      registry.tokenIssuer!.expiresIn = 300;
    }
  });
  it('exits 3 when the token service refuses the credentials', async () => {
    const r = await plan(registry.host, '--insecure-registry', registry.host, '--registry-config', await authFile(registry.host, registry.username!, 'nope'));
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/token service .* refused \(401\); check the credentials/);
  });
  it('reports Quay-style tokens without pull access as access denied, not as a crash', async () => {
    registry.tokenIssuer!.quayMode = true;
    const r = await plan(registry.host, '--insecure-registry', registry.host, '--registry-config', await authFile(registry.host, registry.username!, 'nope'));
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/access denied \(401\) to openshift-release-dev\/ocp-release/);
  });
});

describe('TLS with a test CA', () => {
  let registry: RegistryHandle;
  beforeAll(async () => {
    registry = await startRegistry({ storageDir, tls: true });
    handles.push(registry);
  });

  it('verifies the registry with --ca-file', async () => {
    expectPlanned(await plan(registry.host, '--ca-file', registry.caFile!));
  });
  it('exits 3 naming --ca-file when the CA is unknown', async () => {
    const r = await plan(registry.host);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/TLS certificate not trusted .*pass --ca-file with the registry's CA, or --insecure-registry 127\.0\.0\.1:\d+ to skip the check for this registry/);
  });
  it('accepts any certificate of a registry named with --insecure-registry, still over TLS', async () => {
    expectPlanned(await plan(registry.host, '--insecure-registry', registry.host));
  });
  it('reads the deprecated --tls-verify=false as --insecure-registry for the registries on the command line, with one warning', async () => {
    const r = await plan(registry.host, '--tls-verify=false');
    expectPlanned(r, [new RegExp(`^prestage: warning: --tls-verify=false is deprecated: it now names only the registries on the command line insecure \\(quay\\.io, ${registry.host.replace(/\./g, '\\.')}\\); pass --insecure-registry HOST for each instead$`)]);
  });
});

describe('faults between plan and the registry', () => {
  let registry: RegistryHandle;
  let proxy: FaultProxy;
  const manifestsLayer = () => truth.release.manifestsLayer.digest;
  beforeAll(async () => {
    registry = await startRegistry({ storageDir });
    proxy = await startFaultProxy({ upstream: registry.url });
    handles.push(registry, proxy);
  });
  afterEach(() => {
    proxy.clearFaults();
    proxy.resetStats();
  });

  it('waits out 429 Retry-After and retries', async () => {
    proxy.inject({ match: /\/manifests\/4\.16\.3-x86_64$/, times: 2, fault: { kind: 'status', status: 429, retryAfter: 1 } });
    const started = Date.now();
    expectPlanned(await plan(proxy.host, '--insecure-registry', proxy.host), [new RegExp(`^prestage: warning: ${proxy.host}: 2 retries \\(HTTP 429 x2\\)$`)]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
    expect(proxy.stats.log.filter((r) => r.status === 429)).toHaveLength(2);
  });
  it('retries 502, 503 and 504 on manifests and blobs', async () => {
    proxy.inject({ match: /\/blobs\//, times: 2, fault: { kind: 'status', status: 503 } });
    proxy.inject({ match: /\/manifests\/sha256:/, times: 2, fault: { kind: 'status', status: 502 } });
    proxy.inject({ match: /\/manifests\/sha256:/, times: 1, fault: { kind: 'status', status: 504 } });
    const r = await plan(proxy.host, '--insecure-registry', proxy.host);
    expectPlanned(r, [new RegExp(`^prestage: warning: ${proxy.host}: 5 retries \\(HTTP 502 x2, HTTP 503 x2, HTTP 504 x1\\)$`)]);
    expect(proxy.stats.log.filter((x) => x.fault === 'status')).toHaveLength(5);
  });
  it('exits 3 after its retries when the registry keeps failing', async () => {
    proxy.inject({ match: /\/manifests\//, times: Infinity, fault: { kind: 'status', status: 503 } });
    const r = await plan(proxy.host, '--insecure-registry', proxy.host, '--retries', '2');
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/HTTP 503 for openshift-release-dev\/ocp-release\/manifests\/4\.16\.3-x86_64 after 3 attempts/);
  });
  it('resumes a blob reset mid-transfer with a Range request', async () => {
    proxy.inject({ match: new RegExp(`/blobs/${manifestsLayer()}$`), fault: { kind: 'reset', afterBytes: 100_000 } });
    expectPlanned(await plan(proxy.host, '--insecure-registry', proxy.host), [new RegExp(`^prestage: warning: ${proxy.host}: 1 retry \\((ECONNRESET|UND_ERR_SOCKET) x1\\)$`)]);
    const layerReads = proxy.stats.log.filter((r) => r.target.endsWith(manifestsLayer()) && r.range !== 'bytes=-4');
    expect(layerReads).toHaveLength(2);
    expect(layerReads[0]!.range).toBeUndefined();
    // Bytes in flight when the connection died are lost; the client resumes from what it got.
    const resumedAt = Number(/^bytes=(\d+)-$/.exec(layerReads[1]!.range ?? '')?.[1]);
    expect(resumedAt).toBeGreaterThan(0);
    expect(resumedAt).toBeLessThanOrEqual(100_000);
  });
  it('resumes a stalled blob after --stall-timeout', async () => {
    proxy.inject({ match: new RegExp(`/blobs/${manifestsLayer()}$`), fault: { kind: 'stall', afterBytes: 50_000 } });
    expectPlanned(await plan(proxy.host, '--insecure-registry', proxy.host, '--stall-timeout', '1'), [new RegExp(`^prestage: warning: ${proxy.host}: \\d+ retr(y|ies) \\(.*stalled transfer x1`)]);
    expect(proxy.stats.log.filter((r) => r.target.endsWith(manifestsLayer())).map((r) => r.range)).toContain('bytes=50000-');
  });
  it('exits 3 when a blob stays truncated', async () => {
    proxy.inject({ match: new RegExp(`/blobs/${manifestsLayer()}$`), times: Infinity, fault: { kind: 'truncate', afterBytes: 0 } });
    const r = await plan(proxy.host, '--insecure-registry', proxy.host, '--retries', '2');
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/blob transfer kept failing .* at byte 0 of \d+ after 3 attempts/);
  });
  it('re-reads a release layer damaged once in transit', async () => {
    proxy.inject({ match: new RegExp(`/blobs/${manifestsLayer()}$`), fault: { kind: 'corrupt', atByte: 1000 } });
    expectPlanned(await plan(proxy.host, '--insecure-registry', proxy.host));
    expect(proxy.stats.log.filter((r) => r.target.endsWith(manifestsLayer()) && r.range === undefined)).toHaveLength(3);
  });
  it('exits 3 on a blob whose bytes do not match its digest', async () => {
    proxy.inject({ match: new RegExp(`/blobs/${manifestsLayer()}$`), times: Infinity, fault: { kind: 'corrupt' } });
    const r = await plan(proxy.host, '--insecure-registry', proxy.host);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(new RegExp(`@${manifestsLayer()}: content hashes to sha256:[a-f0-9]{64}; the registry or a proxy corrupted it`));
  });
  it('exits 3 on a manifest whose bytes do not match its digest', async () => {
    proxy.inject({ match: /\/manifests\/sha256:/, fault: { kind: 'corrupt' } });
    const r = await plan(proxy.host, '--insecure-registry', proxy.host);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/manifest content has digest sha256:[a-f0-9]{64}, not the requested one|is not JSON/);
  });
});

describe('blob redirects to a CDN (Quay and S3)', () => {
  let registry: RegistryHandle;
  let proxy: FaultProxy;
  beforeAll(async () => {
    registry = await startRegistry({ storageDir, auth: 'basic' });
    proxy = await startFaultProxy({ upstream: registry.url });
    proxy.redirectBlobsToCdn(true);
    handles.push(registry, proxy);
  });

  it('follows the redirect without forwarding Authorization to the other origin', async () => {
    const creds = await authFile(proxy.host, registry.username!, registry.password!);
    expectPlanned(await plan(proxy.host, '--insecure-registry', proxy.host, '--registry-config', creds));
    const cdn = proxy.stats.log.filter((r) => r.origin === 'cdn');
    expect(cdn.length).toBeGreaterThan(100);
    expect(cdn.filter((r) => r.status === 400)).toEqual([]);
    expect(new Set(cdn.map((r) => r.status))).toEqual(new Set([200, 206]));
  });
});
