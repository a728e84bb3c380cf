/**
 * How prestage reaches registries and the Kubernetes API through a corporate network: a real
 * forward proxy (Debian's tinyproxy) named by HTTPS_PROXY/HTTP_PROXY/NO_PROXY, a CA only the
 * OS trust store holds (SSL_CERT_FILE), and what the user sees when things go wrong: one line,
 * retries summed per registry, one warning per cause, progress only when asked or on a terminal.
 * Runs the built CLI as a real process so the environment is the user's.
 */
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubeClient } from '../src/kube/client.js';
import { loadKubeconfig } from '../src/kube/kubeconfig.js';
import { startFaultProxy, startForwardProxy, startRegistry, type FaultProxy, type ForwardProxyHandle, type RegistryHandle } from './harness/index.js';
import { createServerCertificate } from './harness/certificates.js';
import { BIN_DIR, runBin } from './support/cli.js';
import type { Plan } from '../src/plan/types.js';
import { removeTempDirs, tempDir } from './support/temp-files.js';

const truth = inject('fixtureTruth');
const storageDir = inject('fixtureStorageDir');
const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
const PROXY_VARS = ['http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY', 'all_proxy', 'ALL_PROXY', 'no_proxy', 'NO_PROXY', 'SSL_CERT_FILE'];
const handles: Array<{ stop(): Promise<void> }> = [];

/** The test process's environment without any proxy or trust setting, plus `extra`. */
function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const base = { ...process.env };
  for (const name of PROXY_VARS) delete base[name];
  return { ...base, ...extra };
}

function plan(host: string, environment: NodeJS.ProcessEnv, ...args: string[]) {
  return runBin('prestage', ['plan', RELEASE, '--mirror', `quay.io=${host}`, '-o', 'json', ...args], environment);
}

function expectPlanned(r: { code: number; stdout: string; stderr: string }): Plan {
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  const p = JSON.parse(r.stdout) as Plan;
  expect(p.release.digest).toBe(truth.release.image.digest);
  expect(p.images.length).toBeGreaterThan(100);
  expect(p.images.every((i) => i.diskBytes > 0)).toBe(true);
  return p;
}

const lines = (text: string) => text.split('\n').filter(Boolean);

afterAll(async () => {
  removeTempDirs();
  for (const h of handles.reverse()) await h.stop();
});

describe('registries through a forward proxy (tinyproxy)', () => {
  let tls: RegistryHandle;
  let plain: RegistryHandle;
  let proxy: ForwardProxyHandle;
  let guarded: ForwardProxyHandle;
  beforeAll(async () => {
    [tls, plain, proxy, guarded] = await Promise.all([
      startRegistry({ storageDir, tls: true }),
      startRegistry({ storageDir }),
      startForwardProxy(),
      startForwardProxy({ credentials: { username: 'proxyuser', password: 'proxy-secret' } }),
    ]);
    handles.push(tls, plain, proxy, guarded);
  });

  it('sends every HTTPS registry request through HTTPS_PROXY', async () => {
    expectPlanned(await plan(tls.host, env({ HTTPS_PROXY: proxy.url }), '--ca-file', tls.caFile!));
    const targets = await proxy.targets();
    expect(targets.length).toBeGreaterThan(0);
    expect(new Set(targets)).toEqual(new Set([tls.host]));
  });
  it('reads the lower-case https_proxy first, as curl does', async () => {
    const before = (await proxy.targets()).length;
    expectPlanned(await plan(tls.host, env({ https_proxy: proxy.url, HTTPS_PROXY: 'http://127.0.0.1:1' }), '--ca-file', tls.caFile!));
    expect((await proxy.targets()).length).toBeGreaterThan(before);
  });
  it('sends a plain-HTTP registry through HTTP_PROXY', async () => {
    const before = (await proxy.targets()).length;
    const r = await plan(plain.host, env({ HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url }), '--insecure-registry', plain.host);
    // Forwarded requests take a connection each (proxy-agents.ts), 32 at once; tinyproxy closes a
    // few of them unread (the kernel's TCPAbortOnClose counts them) and the client sees a reset
    // before any answer: retried, and summed into at most that one line.
    expect(lines(r.stderr).filter((l) => !new RegExp(`^prestage: warning: ${plain.host}: \\d+ retr(y|ies) \\(ECONNRESET x\\d+\\)$`).test(l))).toEqual([]);
    expectPlanned({ ...r, stderr: '' });
    const targets = (await proxy.targets()).slice(before);
    expect(targets.length).toBeGreaterThan(0);
    expect(new Set(targets)).toEqual(new Set([plain.host]));
  });
  it('goes direct to hosts NO_PROXY names, and NO_PROXY with another port does not match', async () => {
    const before = (await proxy.targets()).length;
    expectPlanned(await plan(tls.host, env({ HTTPS_PROXY: proxy.url, NO_PROXY: 'example.com,127.0.0.1' }), '--ca-file', tls.caFile!));
    expectPlanned(await plan(tls.host, env({ HTTPS_PROXY: proxy.url, no_proxy: '127.0.0.0/8' }), '--ca-file', tls.caFile!));
    expectPlanned(await plan(tls.host, env({ HTTPS_PROXY: proxy.url, NO_PROXY: '*' }), '--ca-file', tls.caFile!));
    expect((await proxy.targets()).length).toBe(before);
    expectPlanned(await plan(tls.host, env({ HTTPS_PROXY: proxy.url, NO_PROXY: '127.0.0.1:1' }), '--ca-file', tls.caFile!));
    expect((await proxy.targets()).length).toBeGreaterThan(before);
  });
  it('authenticates to the proxy with the credentials in its URL and never prints them', async () => {
    const withCredentials = guarded.url.replace('://', '://proxyuser:proxy-secret@');
    expectPlanned(await plan(tls.host, env({ HTTPS_PROXY: withCredentials }), '--ca-file', tls.caFile!));
    const refused = await plan(tls.host, env({ HTTPS_PROXY: guarded.url.replace('://', '://proxyuser:wrong-secret@') }), '--ca-file', tls.caFile!);
    expect(refused.code).toBe(3);
    expect(lines(refused.stderr)).toHaveLength(1);
    expect(refused.stderr).toMatch(new RegExp(`proxy http://\\*\\*\\*@127\\.0\\.0\\.1:\\d+/ refused to connect to the registry \\(HTTP 40[17]\\).*add ${tls.host} to NO_PROXY`));
    expect(refused.stderr).not.toContain('secret');
  });
  it('exits 3 with one line naming the proxy when the proxy is down', async () => {
    const r = await plan(tls.host, env({ HTTPS_PROXY: 'http://127.0.0.1:1' }), '--ca-file', tls.caFile!, '--retries', '1');
    expect(r.code).toBe(3);
    expect(lines(r.stderr)).toEqual([expect.stringMatching(/ECONNREFUSED .*after 2 attempts; the registry, the network or the proxy http:\/\/127\.0\.0\.1:1\/ is failing/)]);
  });
  it('exits 2 naming the variable when the proxy setting is not a URL', async () => {
    const r = await plan(tls.host, env({ HTTPS_PROXY: 'http://[bad' }), '--ca-file', tls.caFile!);
    expect(r.code).toBe(2);
    expect(lines(r.stderr)).toEqual([expect.stringMatching(/https_proxy is not a URL/)]);
  });
});

describe('trust from the OS store', () => {
  let tls: RegistryHandle;
  let other: RegistryHandle;
  beforeAll(async () => {
    [tls, other] = await Promise.all([startRegistry({ storageDir, tls: true }), startRegistry({ storageDir, tls: true })]);
    handles.push(tls, other);
  });

  it('trusts a CA that only the store named by SSL_CERT_FILE holds, without --ca-file', async () => {
    const bundle = join(await tempDir('prestage-os-store-'), 'ca-certificates.crt');
    await writeFile(bundle, `${await readFile('/etc/ssl/certs/ca-certificates.crt', 'utf8').catch(() => '')}\n${await readFile(tls.caFile!, 'utf8')}`);
    expectPlanned(await plan(tls.host, env({ SSL_CERT_FILE: bundle })));
  });
  it('refuses the registry with one line when neither the store nor --ca-file holds its CA', async () => {
    // The other registry's CA is a different test CA.
    const r = await plan(tls.host, env({ SSL_CERT_FILE: other.caFile! }));
    expect(r.code).toBe(3);
    expect(lines(r.stderr)).toEqual([expect.stringMatching(new RegExp(`TLS certificate not trusted .*trusted are the OS store \\(SSL_CERT_FILE ${other.caFile!}\\) and --ca-file`))]);
  });
  it('adds --ca-file to the store', async () => {
    expectPlanned(await plan(tls.host, env({ SSL_CERT_FILE: other.caFile! }), '--ca-file', tls.caFile!));
  });
  it('exits 2 naming SSL_CERT_FILE when it cannot be read', async () => {
    const r = await plan(tls.host, env({ SSL_CERT_FILE: '/nonexistent/ca.pem' }));
    expect(r.code).toBe(2);
    expect(lines(r.stderr)).toEqual([expect.stringMatching(/cannot read SSL_CERT_FILE \/nonexistent\/ca\.pem: ENOENT/)]);
  });
  it('names --insecure-registry in one line when an HTTPS request meets a plain-HTTP registry', async () => {
    const plain = await startRegistry({ storageDir });
    handles.push(plain);
    const r = await plan(plain.host, env());
    expect(r.code).toBe(3);
    expect(lines(r.stderr)).toEqual([expect.stringMatching(/: answers plain HTTP, not HTTPS, for .*; if that registry has no TLS, pass --insecure-registry 127\.0\.0\.1:\d+ \(plain HTTP for that registry only\)$/)]);
  });
});

describe('the Kubernetes API through the proxy', () => {
  let proxy: ForwardProxyHandle;
  let api: Server;
  let caFile: string;
  let port: number;
  const seen: Array<{ path: string; authorization: string | undefined }> = [];
  beforeAll(async () => {
    proxy = await startForwardProxy();
    handles.push(proxy);
    // An HTTPS server with a test CA stands in for kube-apiserver: what is tested is the route.
    const certificate = await createServerCertificate(await tempDir('prestage-api-'));
    caFile = certificate.caFile;
    api = createServer({ cert: await readFile(certificate.certFile), key: await readFile(certificate.keyFile) }, (req, res) => {
      seen.push({ path: req.url ?? '', authorization: req.headers.authorization });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'prestage' } }));
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    port = (api.address() as { port: number }).port;
    handles.push({ stop: () => new Promise<void>((resolve) => api.close(() => resolve())) });
  });
  afterEach(() => {
    for (const name of PROXY_VARS) delete process.env[name];
  });

  async function kubeconfig(withCa: boolean): Promise<string> {
    const file = join(await tempDir('prestage-kubeconfig-'), 'config');
    const cluster = { server: `https://127.0.0.1:${port}`, ...(withCa ? { 'certificate-authority': caFile } : {}) };
    await writeFile(file, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
      clusters: [{ name: 'k', cluster }], users: [{ name: 'u', user: { token: 'kube-token' } }], contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }],
    }));
    return file;
  }

  it('tunnels API requests through HTTPS_PROXY with the kubeconfig CA and token', async () => {
    process.env.HTTPS_PROXY = proxy.url;
    const client = new KubeClient(await loadKubeconfig({ kubeconfig: await kubeconfig(true) }));
    expect(await client.get('/api/v1/namespaces/prestage')).toMatchObject({ metadata: { name: 'prestage' } });
    expect(await proxy.targets()).toEqual([`127.0.0.1:${port}`]);
    expect(seen.at(-1)).toEqual({ path: '/api/v1/namespaces/prestage', authorization: 'Bearer kube-token' });
  });
  it('goes direct when NO_PROXY names the API server', async () => {
    process.env.HTTPS_PROXY = proxy.url;
    process.env.NO_PROXY = '127.0.0.1';
    const before = (await proxy.targets()).length;
    const client = new KubeClient(await loadKubeconfig({ kubeconfig: await kubeconfig(true) }));
    await client.get('/api/v1/namespaces/prestage');
    expect((await proxy.targets()).length).toBe(before);
  });
  it('trusts the OS store when the kubeconfig names no CA', async () => {
    process.env.SSL_CERT_FILE = caFile;
    const client = new KubeClient(await loadKubeconfig({ kubeconfig: await kubeconfig(false) }));
    expect(await client.get('/api/v1/namespaces/prestage')).toMatchObject({ kind: 'Namespace' });
  });
});

describe('what plan prints', () => {
  let registry: RegistryHandle;
  let faults: FaultProxy;
  beforeAll(async () => {
    registry = await startRegistry({ storageDir });
    faults = await startFaultProxy({ upstream: registry.url });
    handles.push(registry, faults);
  });
  afterEach(() => {
    faults.clearFaults();
    faults.resetStats();
  });

  it('sums retries into one line per registry once the plan is done', async () => {
    faults.inject({ match: /\/manifests\/sha256:/, times: 3, fault: { kind: 'status', status: 429 } });
    faults.inject({ match: /\/blobs\//, times: 2, fault: { kind: 'status', status: 503 } });
    const r = await plan(faults.host, env(), '--insecure-registry', faults.host);
    expect(r.code).toBe(0);
    expect(lines(r.stderr)).toEqual([`prestage: warning: ${faults.host}: 5 retries (HTTP 429 x3, HTTP 503 x2)`]);
  });
  it('prints only the fatal error when the retries run out', async () => {
    faults.inject({ match: /\/manifests\/sha256:/, times: 2, fault: { kind: 'status', status: 429 } });
    faults.inject({ match: new RegExp(`/blobs/${truth.release.manifestsLayer.digest}$`), times: Infinity, fault: { kind: 'status', status: 503 } });
    const r = await plan(faults.host, env(), '--insecure-registry', faults.host, '--retries', '2');
    expect(r.code).toBe(3);
    expect(lines(r.stderr)).toEqual([expect.stringMatching(/^prestage: error: .*HTTP 503.* after 3 attempts/)]);
  });
  it('exits at once after a fatal error, without waiting out the backoffs of other reads', async () => {
    const coreos = truth.components.find((c) => c.name === 'rhel-coreos')!;
    faults.inject({ match: new RegExp(`/manifests/${coreos.digest}$`), times: Infinity, fault: { kind: 'status', status: 404 } });
    faults.inject({ match: /\/manifests\/sha256:/, times: 20, fault: { kind: 'status', status: 429, retryAfter: 30 } });
    const r = await plan(faults.host, env(), '--insecure-registry', faults.host);
    expect(r.code).toBe(3);
    expect(lines(r.stderr)).toEqual([expect.stringMatching(/^prestage: error: .*@sha256:[a-f0-9]{64}: manifest not found \(404\)/)]);
    const { log } = faults.stats;
    const throttled = log.filter((x) => x.status === 429);
    expect(throttled.length).toBeGreaterThan(0);
    // The run ended inside the backoffs: no read answered 429 (Retry-After: 30) was asked again.
    const retried = throttled.filter((x) => log.slice(log.indexOf(x) + 1).some((later) => later.method === x.method && later.target === x.target));
    expect(retried).toEqual([]);
  });
  it('warns once, not once per layer, when the registry ignores Range', async () => {
    faults.inject({ match: (req) => req.headers.range === 'bytes=-4', times: Infinity, fault: { kind: 'ignore-range' } });
    const r = await plan(faults.host, env(), '--insecure-registry', faults.host);
    expect(r.code).toBe(0);
    const p = JSON.parse(r.stdout) as Plan;
    const estimated = new Set(p.images.flatMap((i) => i.layers).filter((l) => l.method === 'estimate-2x').map((l) => l.digest));
    expect(estimated.size).toBeGreaterThan(100);
    expect(p.warnings.filter((w) => /Range/.test(w))).toEqual([`${estimated.size} layers: the registry did not honour a Range request; disk sizes estimated as 2x compressed (-o json lists them)`]);
  });
  it('shows progress off a terminal only with --progress', async () => {
    const r = await plan(faults.host, env(), '--insecure-registry', faults.host, '--progress');
    expect(r.code).toBe(0);
    const shown = lines(r.stderr);
    expect(shown[0]).toMatch(new RegExp(`^reading release ${RELEASE.replace(/[.]/g, '\\.')} \\.\\.\\. \\d+\\.\\d MiB, \\d+ s$`));
    expect(shown.at(-1)).toMatch(/^sizing \d+\/\d+ images, \d+ requests, \d+ s$/);
  });
  it('draws one line in place on a terminal and clears it before the output', async () => {
    // script(1) gives the CLI a real terminal for stdout and stderr.
    const command = [process.execPath, `${BIN_DIR}prestage.js`, 'plan', RELEASE, '--mirror', `quay.io=${faults.host}`, '--insecure-registry', faults.host, '-o', 'json'].join(' ');
    const typescript = await new Promise<string>((resolve, reject) => {
      execFile('script', ['-qec', command, '/dev/null'], { env: env(), maxBuffer: 64 * 1024 * 1024 }, (error, stdout) => (error ? reject(error) : resolve(stdout)));
    });
    const drawn = typescript.split('{')[0]!;
    expect(drawn).toMatch(/^\r\x1b\[Kreading release /);
    expect(drawn).toMatch(/\r\x1b\[Ksizing \d+\/\d+ images, \d+ requests, \d+ s/);
    expect(drawn.endsWith('\r\x1b[K')).toBe(true);
    expect(drawn).not.toContain('\n');
  });
});
