/**
 * A hostile registry (harness/hostile-registry.ts, in front of the real test registry) against
 * the real CLI process: each case ends in exit 3 with one line on stderr naming the problem,
 * sends nothing to a host it should not reach (a sink on another address records every request,
 * as a token realm or as the child's forward proxy), and stays within the node agent's 256 MiB
 * memory limit, measured as the child's peak RSS (GNU time) under a 128 MiB V8 heap.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { createDispatcher, dispatchRequest } from '../src/net/dispatcher.js';
import { hugeBody, redirect, startHostileRegistry, startSink, trickle, type HostileRegistry, type Sink } from './harness/hostile-registry.js';
import { startForwardProxy, startRegistry } from './harness/index.js';
import { BIN_DIR } from './support/cli.js';
import { zeroGzip } from './support/zero-gzip.js';
import { authFile, removeTempDirs, tempDir } from './support/temp-files.js';

const storageDir = inject('fixtureStorageDir');
const RELEASE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';
const RELEASE_MANIFEST = /^\/v2\/openshift-release-dev\/ocp-release\/manifests\/4\.16\.3-x86_64$/;
/** The node agent's memory limit: what the same client must live within. */
const MEMORY_BOUND_KIB = 256 * 1024;
const PASSWORD = 'hostile-test-s3cret';

const handles: Array<{ stop(): Promise<void> }> = [];
let hostile: HostileRegistry;
let sink: Sink;
let workDir: string;

beforeAll(async () => {
  const registry = await startRegistry({ storageDir });
  handles.push(registry);
  hostile = await startHostileRegistry(registry.host);
  handles.push(hostile);
  sink = await startSink();
  handles.push(sink);
  workDir = await tempDir('prestage-hostile-');
});
afterEach(() => {
  hostile.reset();
  hostile.seen.length = 0;
  sink.seen.length = 0;
});
afterAll(async () => {
  removeTempDirs();
  for (const h of handles.reverse()) await h.stop();
});

interface Run {
  readonly code: number;
  readonly stderr: string;
  readonly peakRssKiB: number;
}

/** `prestage plan` of the fixture release through the hostile registry, as a real process. */
async function plan(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const rssFile = join(workDir, `rss-${Math.random().toString(36).slice(2)}`);
  const argv = ['-f', '%M', '-o', rssFile, process.execPath, `${BIN_DIR}prestage.js`, 'plan', RELEASE, '--mirror', `quay.io=${hostile.host}`, '--insecure-registry', hostile.host, '-o', 'json', ...args];
  const { code, stderr } = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile('/usr/bin/time', argv, { env: { PATH: process.env.PATH, HOME: workDir, NODE_OPTIONS: '--max-old-space-size=128', ...env }, maxBuffer: 64 * 1024 * 1024 }, (error, _stdout, err) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stderr: err });
    });
  });
  // GNU time reports a killed child on stderr; its last line in the file is the peak RSS in KiB.
  const peakRssKiB = Number((await readFile(rssFile, 'utf8')).trim().split('\n').at(-1));
  return { code, stderr, peakRssKiB };
}

/** Exit 3, exactly one line naming the problem, no password, memory within the bound. */
function refused(r: Run, line: RegExp): void {
  expect(r.stderr.split('\n').filter(Boolean)).toEqual([expect.stringMatching(line)]);
  expect(r.stderr).not.toContain(PASSWORD);
  expect(r.code).toBe(3);
  expect(r.peakRssKiB).toBeGreaterThan(0);
  expect(r.peakRssKiB).toBeLessThan(MEMORY_BOUND_KIB);
}

describe('answers of gigabytes', () => {
  it('reads a prefix of a 1.5 GB error body for its message, not the body', async () => {
    hostile.on(RELEASE_MANIFEST, hugeBody(400, 1_500_000_000, '{"errors":[{"code":"DENIED","message":"'));
    refused(await plan([]), /^prestage: error: 127\.0\.0\.1:\d+: 400 for openshift-release-dev\/ocp-release\/manifests\/4\.16\.3-x86_64$/);
  });

  it('refuses a 400 MB token answer at its 1 MiB bound', async () => {
    hostile.challenge = `Bearer realm="http://${hostile.host}/token",service="hostile"`;
    hostile.on(/^\/token$/, hugeBody(200, 400_000_000, '{"token":"'));
    refused(await plan(['--registry-config', await authFile(hostile.host, 'prestage', PASSWORD)]), /^prestage: error: 127\.0\.0\.1:\d+: token service 127\.0\.0\.1:\d+: answer larger than the 1048576-byte bound for it; refusing it/);
    expect(hostile.seen.filter((s) => s.target.startsWith('/token')).length).toBeGreaterThan(0);
  });
});

describe('credentials only where they belong', () => {
  it('sends no credentials to a plain-HTTP realm on another host, naming the host and the flag', async () => {
    hostile.challenge = `Bearer realm="http://${sink.host}/token",service="hostile"`;
    const r = await plan(['--registry-config', await authFile(hostile.host, 'prestage', PASSWORD)]);
    refused(r, new RegExp(`^prestage: error: 127\\.0\\.0\\.1:\\d+: its token service ${sink.host.replace(/\./g, '\\.')} is plain HTTP; refusing to send the pull secret's credentials there: pass --insecure-registry 127\\.0\\.0\\.2 if you trust that host$`));
    expect(sink.seen).toEqual([]);
  });

  it('refuses a file: realm', async () => {
    hostile.challenge = 'Bearer realm="file:///etc/passwd",service="hostile"';
    refused(await plan(['--registry-config', await authFile(hostile.host, 'prestage', PASSWORD)]), /^prestage: error: 127\.0\.0\.1:\d+: its token realm is a file URL, not http\(s\); refusing it/);
  });
});

describe('redirects', () => {
  it('refuses a redirect to file://', async () => {
    hostile.on(RELEASE_MANIFEST, redirect('file:///etc/passwd'));
    refused(await plan([]), /^prestage: error: 127\.0\.0\.1:\d+: openshift-release-dev\/ocp-release\/manifests\/4\.16\.3-x86_64: redirected to a file URL, not http\(s\); refusing it/);
  });

  it('refuses a redirect to 169.254.169.254 before connecting (the sink, as the proxy for every other host, sees nothing)', async () => {
    hostile.on(RELEASE_MANIFEST, redirect('http://169.254.169.254/latest/meta-data/iam/security-credentials/'));
    const r = await plan(['--registry-config', await authFile(hostile.host, 'prestage', PASSWORD)], { http_proxy: `http://${sink.host}`, https_proxy: `http://${sink.host}`, no_proxy: '127.0.0.1' });
    refused(r, /^prestage: error: 127\.0\.0\.1:\d+: openshift-release-dev\/ocp-release\/manifests\/4\.16\.3-x86_64: redirected to the link-local address 169\.254\.169\.254 .*refusing it/);
    expect(sink.seen).toEqual([]);
  });
});

describe('bodies that break the rules', () => {
  it('ends a gzip bomb layer with a bad CRC as one registry error, memory flat while it inflates 4.5 GiB', async () => {
    const bomb = zeroGzip(4.5 * 1024 ** 3);
    const bytes = Buffer.from(bomb.bytes);
    bytes.writeUInt32LE((bytes.readUInt32LE(bytes.length - 8) ^ 0xffffffff) >>> 0, bytes.length - 8);
    hostile.serveImage('hostile/bomb', 'latest', { config: Buffer.from('{"architecture":"amd64","os":"linux"}'), layers: [{ bytes, mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip' }] });
    refused(await plan(['--image', 'quay.io/hostile/bomb:latest']), /^prestage: error: quay\.io\/hostile\/bomb:latest: layer sha256:[0-9a-f]{64} is not a valid gzip stream \(incorrect data check\) after \d+ inflated bytes/);
  });

  it('gives up on a trickle (one byte every 1.5 s, --stall-timeout 2) when the retries are spent', async () => {
    hostile.on(RELEASE_MANIFEST, trickle(Buffer.alloc(4096, ' '), 1500));
    refused(await plan(['--stall-timeout', '2', '--retries', '1']), /^prestage: error: 127\.0\.0\.1:\d+: stalled transfer for openshift-release-dev\/ocp-release\/manifests\/4\.16\.3-x86_64 after 2 attempts/);
    expect(hostile.seen.filter((s) => RELEASE_MANIFEST.test(s.target))).toHaveLength(2);
  });

  it('gives up on the same trickle forwarded through a proxy (the request goes to the proxy, the stall comes through it)', async () => {
    const proxy = await startForwardProxy();
    handles.push(proxy);
    hostile.on(RELEASE_MANIFEST, trickle(Buffer.alloc(4096, ' '), 1500));
    const r = await plan(['--stall-timeout', '2', '--retries', '1'], { http_proxy: proxy.url, https_proxy: proxy.url });
    refused(r, /^prestage: error: 127\.0\.0\.1:\d+: stalled transfer for openshift-release-dev\/ocp-release\/manifests\/4\.16\.3-x86_64 after 2 attempts/);
    expect(hostile.seen.filter((s) => RELEASE_MANIFEST.test(s.target))).toHaveLength(2);
    expect(await proxy.targets()).toContain(hostile.host);
  });

  it('refuses a manifest whose bytes are not the digest asked for', async () => {
    const wrong = `sha256:${'0'.repeat(64)}`;
    hostile.on(new RegExp(`^/v2/hostile/wrong/manifests/${wrong}$`), (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/vnd.oci.image.manifest.v1+json' });
      res.end('{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{},"layers":[]}');
    });
    refused(await plan(['--image', `quay.io/hostile/wrong@${wrong}`]), /^prestage: error: quay\.io\/hostile\/wrong@sha256:0{64}: manifest content has digest sha256:[0-9a-f]{64}, not the requested one/);
  });
});

describe('the rate floor and a reader that holds the body back', () => {
  it('is no stall while the reader takes 256 bytes a window (as the link-rate cap paces): the server is not the one that is slow', async () => {
    const body = Buffer.alloc(4 * 1024 * 1024, 'x');
    hostile.on(/^\/slow-reader$/, (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-length': body.length });
      res.end(body);
    });
    const dispatcher = createDispatcher({ stallTimeoutMs: 1_000 });
    try {
      const res = await dispatchRequest(dispatcher, `http://${hostile.host}/slow-reader`);
      const errors: Error[] = [];
      res.body.on('error', (err) => errors.push(err));
      let read = 0;
      // Four windows of the stall time, each far below the floor's 1 KiB/s: the buffer stays full.
      for (let window = 0; window < 4; window++) {
        await sleep(1_100);
        read += (res.body.read(256) as Buffer | null)?.length ?? 0;
      }
      expect(errors).toEqual([]);
      expect(res.body.destroyed).toBe(false);
      expect(read).toBe(4 * 256);
      res.body.destroy();
    } finally {
      await dispatcher.destroy();
    }
  });
});
