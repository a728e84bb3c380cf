import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BadInputError, RegistryError } from '../errors.js';
import { createDispatcher } from '../net/dispatcher.js';
import { dispatcherFetch, fetchStoreSignatures, MAX_STORE_SIGNATURES, parseSignatureStore, readSignaturesDir, RED_HAT_SIGNATURE_STORES } from './release-stores.js';

const HEX = 'c0ffee'.padEnd(64, '0');
const DIGEST = `sha256:${HEX}`;
const OTHER_HEX = 'b'.repeat(64);

/** A store on 127.0.0.1: each path answers what `routes` says, else 404; every path asked is logged. */
const routes = new Map<string, { status: number; body?: Buffer; location?: string }>();
const asked: string[] = [];
let server: Server;
let base: string;
const dispatcher = createDispatcher({ stallTimeoutMs: 10_000 });
const get = dispatcherFetch(dispatcher, 10_000);

beforeAll(async () => {
  server = createServer((req, res) => {
    asked.push(req.url ?? '');
    const route = routes.get(req.url ?? '') ?? { status: 404 };
    res.writeHead(route.status, route.location ? { location: route.location } : {});
    res.end(route.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

const dirs: string[] = [];
/** A fresh directory, removed after the tests. */
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'prestage-sigdir-'));
  dirs.push(dir);
  return dir;
}

afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  await dispatcher.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Serves `sigs` as signature-1.. of DIGEST under /<name>, fresh routes and log. */
function store(name: string, ...sigs: Array<{ status: number; body?: Buffer; location?: string }>): string {
  routes.clear();
  asked.length = 0;
  sigs.forEach((s, i) => routes.set(`/${name}/sha256=${HEX}/signature-${i + 1}`, s));
  return `${base}/${name}`;
}

describe('fetchStoreSignatures over HTTP', () => {
  it('reads signature-1, signature-2 and stops at the first 404', async () => {
    const at = store('sigs', { status: 200, body: Buffer.from('one') }, { status: 200, body: Buffer.from('two') });
    const result = await fetchStoreSignatures(at, DIGEST, get);
    expect(result).toEqual({ store: at, signatures: [Buffer.from('one'), Buffer.from('two')] });
    expect(asked).toEqual([1, 2, 3].map((n) => `/sigs/sha256=${HEX}/signature-${n}`));
  });

  it('gives no signature when signature-1 is 404', async () => {
    const at = store('none');
    expect(await fetchStoreSignatures(at, DIGEST, get)).toEqual({ store: at, signatures: [] });
    expect(asked).toHaveLength(1);
  });

  it('fails with a RegistryError naming the URL and the status on a 500', async () => {
    const at = store('broken', { status: 200, body: Buffer.from('one') }, { status: 500 });
    const read = fetchStoreSignatures(at, DIGEST, get);
    await expect(read).rejects.toThrow(RegistryError);
    await expect(read).rejects.toThrow(`signature store answered HTTP 500 for ${at}/sha256=${HEX}/signature-2`);
  });

  it('refuses a body over 50 KiB as bad input naming the URL', async () => {
    const at = store('huge', { status: 200, body: Buffer.alloc(50 * 1024 + 1, 1) });
    const read = fetchStoreSignatures(at, DIGEST, get);
    await expect(read).rejects.toThrow(BadInputError);
    await expect(read).rejects.toThrow(`${at}/sha256=${HEX}/signature-1 is larger than 50 KiB`);
    store('limit', { status: 200, body: Buffer.alloc(50 * 1024, 1) });
    expect((await fetchStoreSignatures(`${base}/limit`, DIGEST, get)).signatures).toHaveLength(1);
  });

  it('follows a redirect, skips an empty body, and reads no more than the CVO does', async () => {
    const at = store('moved', { status: 302, location: '/elsewhere/one' }, { status: 200, body: Buffer.alloc(0) });
    routes.set('/elsewhere/one', { status: 200, body: Buffer.from('one') });
    expect((await fetchStoreSignatures(at, DIGEST, get)).signatures).toEqual([Buffer.from('one')]);
    const endless = store('endless', ...Array.from({ length: 20 }, (_, i) => ({ status: 200, body: Buffer.from(`sig ${i + 1}`) })));
    expect((await fetchStoreSignatures(endless, DIGEST, get)).signatures).toHaveLength(MAX_STORE_SIGNATURES);
    expect(asked).toHaveLength(MAX_STORE_SIGNATURES);
  });

  it('fails with a RegistryError naming the URL when nothing listens', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const read = fetchStoreSignatures(`http://127.0.0.1:${port}/sigs`, DIGEST, get);
    await expect(read).rejects.toThrow(RegistryError);
    await expect(read).rejects.toThrow(new RegExp(`^cannot read signature http://127\\.0\\.0\\.1:${port}/sigs/sha256=${HEX}/signature-1: .*ECONNREFUSED`));
  });
});

describe('parseSignatureStore', () => {
  it('takes http and https URLs, without a trailing slash', () => {
    expect(parseSignatureStore(`${RED_HAT_SIGNATURE_STORES[0]}/`)).toBe(RED_HAT_SIGNATURE_STORES[0]);
    expect(parseSignatureStore('http://mirror.example.com:8080/sigs')).toBe('http://mirror.example.com:8080/sigs');
    expect(RED_HAT_SIGNATURE_STORES[0]).toMatch(/^https:\/\/mirror\.openshift\.com\//);
  });

  it('refuses other schemes and bare host paths, naming the value and the fix', () => {
    expect(() => parseSignatureStore('ftp://x')).toThrow(BadInputError);
    expect(() => parseSignatureStore('ftp://x')).toThrow(/^--signature-store ftp:\/\/x is not an http:\/\/ or https:\/\/ URL; pass the store's base URL/);
    expect(() => parseSignatureStore('mirror.example.com/sigs')).toThrow(/^--signature-store mirror\.example\.com\/sigs is not a URL; pass the store's base URL, .* e\.g\. https:\/\//);
  });

  it('refuses credentials in the URL without ever repeating them, naming where the URL came from', () => {
    for (const value of ['https://alice:s3cret@store.example.com/sigs', 'http://s3cret@store.example.com/sigs']) {
      let message = '';
      try {
        parseSignatureStore(value, 'ConfigMap openshift-config-managed/release-verification store-x');
      } catch (err) {
        expect(err).toBeInstanceOf(BadInputError);
        message = (err as Error).message;
      }
      expect(message).toMatch(/^ConfigMap openshift-config-managed\/release-verification store-x http[s]?:\/\/\*\*\*@store\.example\.com\/sigs carries credentials \(user:password@\)/);
      expect(message).not.toContain('s3cret');
    }
  });
});

describe('readSignaturesDir', () => {
  const configMap = (hex: string, values: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: `sha256-${hex}`, namespace: 'openshift-config-managed', labels: { 'release.openshift.io/verification-signatures': '' } },
    binaryData: Object.fromEntries(Object.entries(values).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  });

  it('reads the store layout in order of N', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, `sha256=${HEX}`));
    for (const n of [10, 2, 1]) writeFileSync(join(dir, `sha256=${HEX}`, `signature-${n}`), `store ${n}`);
    const read = await readSignaturesDir(dir, DIGEST);
    expect(read.signatures.map(String)).toEqual(['store 1', 'store 2', 'store 10']);
    expect(read.files).toEqual([1, 2, 10].map((n) => join(dir, `sha256=${HEX}`, `signature-${n}`)));
  });

  it('reads flat sha256-<hex>-<N> files, not another digest\'s', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, `sha256-${HEX}-2`), 'flat 2');
    writeFileSync(join(dir, `sha256-${HEX}-1`), 'flat 1');
    writeFileSync(join(dir, `sha256-${OTHER_HEX}-1`), 'other');
    expect((await readSignaturesDir(dir, DIGEST)).signatures.map(String)).toEqual(['flat 1', 'flat 2']);
  });

  it('reads the ConfigMaps oc adm release mirror (YAML) and oc-mirror (JSON) write, once each', async () => {
    const dir = tempDir();
    // What oc writes with --release-image-signature-to-dir, with a repeated key kubectl tolerates.
    writeFileSync(join(dir, `sha256-${HEX}.yaml`), `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sha256-${HEX}\n  namespace: openshift-config-managed\n  namespace: openshift-config-managed\nbinaryData:\n  sha256-${HEX}-1: ${Buffer.from('cm 1').toString('base64')}\n`);
    writeFileSync(join(dir, 'signature-configmap.json'), JSON.stringify(configMap(HEX, { [`sha256-${HEX}-1`]: 'cm 1', [`sha256-${HEX}-10`]: 'cm 10', [`sha256-${HEX}-2`]: 'cm 2', [`sha256-${OTHER_HEX}-1`]: 'other' })));
    writeFileSync(join(dir, 'imageset-config.yaml'), 'kind: ImageSetConfiguration\nmirror: {platform: {channels: [{name: stable-4.16}]}}\n');
    writeFileSync(join(dir, 'broken.yaml'), ': : not yaml [');
    const read = await readSignaturesDir(dir, DIGEST);
    expect(read.signatures.map(String)).toEqual(['cm 1', 'cm 2', 'cm 10']);
    const json = join(dir, 'signature-configmap.json');
    expect(read.files).toEqual([`${join(dir, `sha256-${HEX}.yaml`)} (sha256-${HEX}-1)`, `${json} (sha256-${HEX}-2)`, `${json} (sha256-${HEX}-10)`]);
  });

  it('reads all layouts side by side, the same bytes once', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, `sha256=${HEX}`));
    writeFileSync(join(dir, `sha256=${HEX}`, 'signature-1'), 'same');
    writeFileSync(join(dir, `sha256-${HEX}-1`), 'same');
    writeFileSync(join(dir, 'signature-configmap.yaml'), `kind: ConfigMap\nbinaryData:\n  sha256-${HEX}-1: ${Buffer.from('same').toString('base64')}\n  sha256-${HEX}-2: ${Buffer.from('new').toString('base64')}\n`);
    const read = await readSignaturesDir(dir, DIGEST);
    expect(read.signatures.map(String)).toEqual(['same', 'new']);
    expect(read.files[0]).toBe(join(dir, `sha256=${HEX}`, 'signature-1'));
  });

  it('finds nothing in an empty directory, and refuses a missing one naming it', async () => {
    const dir = tempDir();
    expect(await readSignaturesDir(dir, DIGEST)).toEqual({ signatures: [], files: [] });
    const missing = join(dir, 'nope');
    await expect(readSignaturesDir(missing, DIGEST)).rejects.toThrow(BadInputError);
    await expect(readSignaturesDir(missing, DIGEST)).rejects.toThrow(`cannot read the signatures directory ${missing}: `);
  });
});
