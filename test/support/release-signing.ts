/**
 * Release signatures as Red Hat's signing service writes them, made with Debian's real `gpg`
 * and a key generated per test run: `gpg --sign` over the CVO's JSON payload. And a signature
 * store (`<store>/sha256=<hex>/signature-<N>`, 404 after the last) on a local HTTP server.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface GpgKey {
  readonly home: string;
  readonly fingerprint: string;
  /** `gpg --armor --export`: what `--verification-key` reads. */
  readonly publicArmored: string;
  readonly publicKeyFile: string;
}

/** A fresh signing key in its own GNUPGHOME (no agent prompts, no passphrase). */
export async function generateGpgKey(name: string): Promise<GpgKey> {
  const home = await mkdtemp(join(tmpdir(), 'prestage-gpg-'));
  const gpg = (...args: string[]) => run('gpg', ['--homedir', home, '--batch', '--pinentry-mode', 'loopback', '--passphrase', '', ...args]);
  await gpg('--quick-gen-key', `${name} <${name.toLowerCase().replace(/\W+/g, '-')}@example.com>`, 'rsa2048', 'sign', 'never');
  const { stdout } = await gpg('--with-colons', '--list-keys');
  const fingerprint = /^fpr:+([0-9A-F]{40}):/m.exec(stdout)![1]!;
  const publicArmored = (await gpg('--armor', '--export', fingerprint)).stdout;
  const publicKeyFile = join(home, 'public.asc');
  await writeFile(publicKeyFile, publicArmored);
  return { home, fingerprint, publicArmored, publicKeyFile };
}

/** Stops the gpg-agent that key generation started for `key` and removes its GNUPGHOME: neither outlives the test file. */
export async function removeGpgKey(key: GpgKey | undefined): Promise<void> {
  if (!key) return;
  await run('gpgconf', ['--kill', 'gpg-agent'], { env: { ...process.env, GNUPGHOME: key.home } }).catch(() => undefined);
  await rm(key.home, { recursive: true, force: true });
}

/** The CVO's payload for `digest`, signed as `gpg --sign` does (a compressed OpenPGP signed message). */
export async function signRelease(key: GpgKey, digest: string, identity: string, options: { type?: string } = {}): Promise<Buffer> {
  const payload = join(key.home, `payload-${digest.slice(7, 19)}-${Date.now()}.json`);
  await writeFile(payload, JSON.stringify({
    critical: { type: options.type ?? 'atomic container signature', image: { 'docker-manifest-digest': digest }, identity: { 'docker-reference': identity } },
    optional: { creator: 'prestage tests' },
  }));
  await run('gpg', ['--homedir', key.home, '--batch', '--pinentry-mode', 'loopback', '--passphrase', '', '--yes', '--sign', '--output', `${payload}.sig`, payload]);
  return readFile(`${payload}.sig`);
}

export interface SignatureStore {
  /** `http://127.0.0.1:PORT/<name>` for each store given. */
  url(name: string): string;
  /** Paths requested, in order. */
  readonly requests: string[];
  stop(): Promise<void>;
}

/**
 * Several stores on one server, by name: each maps a digest to its signatures, served as
 * `/<name>/sha256=<hex>/signature-<N>`; anything else is 404.
 */
export async function startSignatureStore(stores: Readonly<Record<string, Readonly<Record<string, readonly Buffer[]>>>>): Promise<SignatureStore> {
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(req.url ?? '');
    const match = /^\/([^/]+)\/sha256=([0-9a-f]{64})\/signature-(\d+)$/.exec(req.url ?? '');
    const body = match ? stores[match[1]!]?.[`sha256:${match[2]}`]?.[Number(match[3]) - 1] : undefined;
    if (!body) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: (name) => `http://127.0.0.1:${port}/${name}`,
    requests,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
