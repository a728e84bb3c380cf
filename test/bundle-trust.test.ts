/**
 * Verification never trusts the attacker, on the real thing: real bundles of the fixture release
 * (from a docker-registry), release signatures made by Debian's gpg and served by a local store,
 * and the test bed's real API server holding the CVO's verifier ConfigMap. The attacker holds
 * the bundle (or the source registry's attachments), never the user's key or the cluster.
 */
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubeClient } from '../src/kube/client.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { expectOneLineError } from './support/bundle-files.js';
import { runCli, type CliResult } from './support/cli.js';
import { generateGpgKey, removeGpgKey, signRelease, startSignatureStore, type GpgKey, type SignatureStore } from './support/release-signing.js';
import { generateSigstoreKeys, pushAttachments, signAttachment } from './support/sigstore-signing.js';

const run = promisify(execFile);
const truth = inject('fixtureTruth');
const RELEASE = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;
const RELEASE_DIGEST = truth.release.image.digest;
const VERIFIERS = '/api/v1/namespaces/openshift-config-managed/configmaps';
const PASSWORD = 'pw-Never-Print-Me';

let work: string;
let source: RegistryHandle;
let mirror: RegistryHandle;
let cluster: TestCluster;
let store: SignatureStore;
let trusted: GpgKey;
let attacker: GpgKey;
let planFile: string;
let from: string[];
let kube: string[];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'prestage-trust-'));
  // The fixture's bytes, copied: the attachment pushed here must not reach other files' registries.
  await cp(inject('fixtureStorageDir'), join(work, 'source'), { recursive: true });
  [source, mirror] = await Promise.all([startRegistry({ storageDir: join(work, 'source') }), startRegistry()]);
  from = ['--mirror', `quay.io=${source.host}`, '--insecure-registry', source.host];
  const planned = await runCli(['plan', RELEASE, ...from, '-o', 'json']);
  expect(planned.code, planned.stderr).toBe(0);
  planFile = join(work, 'plan.json');
  await writeFile(planFile, planned.stdout);

  // The attacker's key carries the name of Red Hat's real release key.
  [trusted, attacker] = await Promise.all([generateGpgKey('Release Signer'), generateGpgKey('Red Hat, Inc. (release key 2)')]);
  store = await startSignatureStore({ good: { [RELEASE_DIGEST]: [await signRelease(trusted, RELEASE_DIGEST, RELEASE)] } });

  cluster = await startCluster({ workers: 0 });
  kube = ['--kubeconfig', cluster.kubeconfigPath];
  const client = new KubeClient(cluster.kubeConfig);
  await client.apply('/api/v1/namespaces/openshift-config-managed', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'openshift-config-managed' } } as never, { fieldManager: 'test' });
  // What the CVO applies from the release the cluster runs: the key it trusts.
  await client.apply(`${VERIFIERS}/release-verification`, {
    apiVersion: 'v1', kind: 'ConfigMap',
    metadata: { name: 'release-verification', namespace: 'openshift-config-managed', annotations: { 'release.openshift.io/verification-config-map': '' } },
    data: { 'verifier-public-key-test': trusted.publicArmored, 'store-test': store.url('good') },
  } as never, { fieldManager: 'cluster-version-operator' });

  const made = await create(good(), '--remove-signatures');
  expect(made.code, made.stderr).toBe(0);
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.all([trusted, attacker].map(removeGpgKey));
  await cluster?.stop();
  await Promise.allSettled([source?.stop(), mirror?.stop(), store?.stop()]);
  if (work && !process.env.PRESTAGE_TESTBED_KEEP) await rm(work, { recursive: true, force: true });
});

const good = () => join(work, 'good');
const create = (to: string, ...flags: string[]) => runCli(['bundle', 'create', planFile, '--output-dir', to, ...from, '--signature-store', store.url('good'), '--verification-key', trusted.publicKeyFile, ...flags]);
const push = (bundle: string, out: string, ...flags: string[]) => runCli(['bundle', 'push', bundle, mirror.host, '--insecure-registry', mirror.host, '--output-dir', out, ...flags]);
const sha256 = (bytes: Buffer) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/** stderr without progress lines: what the command said. */
function said(r: CliResult): string[] {
  return r.stderr.trim().split('\n').filter((l) => l && !/^(bundled|pushed) \d+\/\d+ |^checking the \d+ blobs/.test(l));
}

const UNANCHORED = /^warning: bundle .*: release signatures NOT verified against a trusted key \(integrity only\): give --verification-key or --kubeconfig$/;

/** The good bundle with its release signature AND its stored key swapped for the attacker's. */
async function swappedBundle(): Promise<string> {
  const dir = join(work, 'swapped');
  if (existsSync(dir)) return dir;
  await cp(good(), dir, { recursive: true });
  const forged = await signRelease(attacker, RELEASE_DIGEST, RELEASE);
  const key = Buffer.from(attacker.publicArmored);
  for (const blob of [forged, key]) await writeFile(join(dir, 'blobs', 'sha256', sha256(blob).slice(7)), blob);
  const path = join(dir, 'prestage-bundle.json');
  const metadata = JSON.parse(await readFile(path, 'utf8'));
  metadata.signatures.release.signatures = [{ digest: sha256(forged), size: forged.length }];
  metadata.signatures.release.keys = { digest: sha256(key), size: key.length };
  metadata.signatures.release.verifiedWith = [`${attacker.fingerprint} Red Hat, Inc. (release key 2) <red-hat-inc-release-key-2-@example.com>`];
  await writeFile(path, JSON.stringify(metadata));
  return dir;
}

describe('release signatures: trust comes from the user or the cluster, never from the bundle', () => {
  it('a swapped signature and key, without a key given: verify says integrity only in one line, and says no signer', async () => {
    const r = await runCli(['bundle', 'verify', await swappedBundle()]);
    expect(r.code, r.stderr).toBe(0);
    expect(said(r)).toHaveLength(1);
    expect(said(r)[0]).toMatch(UNANCHORED);
    expect(r.stdout).toMatch(new RegExp(`^release signatures: 1 well-formed for ${RELEASE_DIGEST}, claiming key ${attacker.fingerprint.slice(-16)} \\(not verified\\)$`, 'm'));
    expect(r.stdout).not.toMatch(/verified with|Red Hat/);
  });

  it('push of the swapped bundle without a key: the images go, the CVO\'s ConfigMap does not', async () => {
    const out = join(work, 'push-swapped');
    const r = await push(await swappedBundle(), out);
    expect(r.code, r.stderr).toBe(0);
    expect(said(r)).toHaveLength(1);
    expect(said(r)[0]).toMatch(UNANCHORED);
    expect(r.stdout).toMatch(/^signature-configmap\.yaml not written: no trusted key verified the release signatures \(give --verification-key or --kubeconfig, or --allow-unverified-signatures\)$/m);
    expect(existsSync(join(out, 'signature-configmap.yaml'))).toBe(false);
    expect(existsSync(join(out, 'image-digest-mirror-set.yaml'))).toBe(true);
  });

  it('the explicit flag writes it anyway, and the line says it is unverified', async () => {
    const out = join(work, 'push-unverified');
    const r = await push(await swappedBundle(), out, '--allow-unverified-signatures');
    expect(r.code, r.stderr).toBe(0);
    expect(said(r)).toHaveLength(1);
    expect(r.stdout).toMatch(/^wrote .*signature-configmap\.yaml \(ConfigMap openshift-config-managed\/sha256-[0-9a-f]{64}, 1 signature, NOT verified against a trusted key: --allow-unverified-signatures\)$/m);
    expect(existsSync(join(out, 'signature-configmap.yaml'))).toBe(true);
  });

  it('with the real key given, verify and push refuse the swapped bundle: exit 2, one line, nothing written', async () => {
    const swapped = await swappedBundle();
    const refusal = new RegExp(`release signature 1 .*signed by key ${attacker.fingerprint.slice(-16)}, which is not a verification key.*do not verify with --verification-key .*public\\.asc: do not push them`);
    expectOneLineError(await runCli(['bundle', 'verify', swapped, '--verification-key', trusted.publicKeyFile]), 2, refusal);
    const empty = await startRegistry();
    const out = join(work, 'push-refused');
    try {
      const r = await runCli(['bundle', 'push', swapped, empty.host, '--insecure-registry', empty.host, '--output-dir', out, '--verification-key', trusted.publicKeyFile]);
      expectOneLineError(r, 2, refusal);
      const catalog = await fetch(`${empty.url}/v2/_catalog`).then((res) => res.json() as Promise<{ repositories: string[] }>);
      expect(catalog.repositories).toEqual([]);
      expect(existsSync(join(out, 'signature-configmap.yaml'))).toBe(false);
    } finally {
      await empty.stop();
    }
  });

  it('with --kubeconfig, the keys the cluster trusts judge: the good bundle verifies and push writes its ConfigMap, the swapped one is refused', async () => {
    const verified = await runCli(['bundle', 'verify', good(), ...kube]);
    expect(verified.code, verified.stderr).toBe(0);
    expect(said(verified)).toEqual([]);
    expect(verified.stdout).toMatch(/^release signatures: 1 verified with the cluster's release-verification$/m);
    const out = join(work, 'push-cluster');
    const pushed = await push(good(), out, ...kube);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(said(pushed)).toEqual([]);
    expect(pushed.stdout).toMatch(/^wrote .*signature-configmap\.yaml \(ConfigMap openshift-config-managed\/sha256-[0-9a-f]{64}, 1 signature\)$/m);
    expectOneLineError(await runCli(['bundle', 'verify', await swappedBundle(), ...kube]), 2, /not a verification key.*do not verify with the cluster's release-verification/);
  });
});

describe('key files are parsed, not grepped', () => {
  const exported = async (...args: string[]) => (await run('gpg', ['--homedir', trusted.home, '--batch', '--pinentry-mode', 'loopback', '--passphrase', '', ...args], { encoding: 'buffer' })).stdout;

  it('a secret key armored as PUBLIC, and a binary secret key: exit 2, one line naming the file, nothing stored', async () => {
    const armored = (await exported('--armor', '--export-secret-keys', trusted.fingerprint)).toString().replace(/PRIVATE KEY BLOCK/g, 'PUBLIC KEY BLOCK');
    const files: Array<[string, string | Buffer]> = [['disguised.asc', armored], ['secret.gpg', await exported('--export-secret-keys', trusted.fingerprint)]];
    for (const [name, bytes] of files) {
      const file = join(work, name);
      await writeFile(file, bytes);
      const to = join(work, `bundle-${name}`);
      const r = await runCli(['bundle', 'create', planFile, '--output-dir', to, ...from, '--signature-store', store.url('good'), '--verification-key', file]);
      expectOneLineError(r, 2, new RegExp(`--verification-key ${file.replace(/[.]/g, '\\.')} holds an OpenPGP secret key \\(packet tag 5\\), which is never a verification key`));
      expect(existsSync(join(to, 'prestage-bundle.json'))).toBe(false);
      expect(existsSync(join(to, 'blobs')) ? await readdir(join(to, 'blobs', 'sha256')).catch(() => []) : []).toEqual([]);
      expectOneLineError(await runCli(['bundle', 'verify', good(), '--verification-key', file]), 2, /holds an OpenPGP secret key/);
    }
  });

  it('the bundle stores the public key re-armored from its packets, not the file as given', async () => {
    const metadata = JSON.parse(await readFile(join(good(), 'prestage-bundle.json'), 'utf8'));
    const stored = await readFile(join(good(), 'blobs', 'sha256', metadata.signatures.release.keys.digest.slice(7)), 'utf8');
    expect(stored).toMatch(/^-----BEGIN PGP PUBLIC KEY BLOCK-----/);
    const packets = execFileSync('gpg', ['--homedir', trusted.home, '--batch', '--list-packets'], { input: stored }).toString();
    expect(packets).toMatch(/:public key packet:/);
    expect(packets).not.toMatch(/:secret (sub)?key packet:/);
  });
});

describe('signature store URLs with credentials', () => {
  it('--signature-store user:password@: exit 2, one line, the password in no output and no bundle file', async () => {
    const to = join(work, 'with-credentials');
    const url = store.url('good').replace('http://', `http://alice:${PASSWORD}@`);
    const r = await runCli(['bundle', 'create', planFile, '--output-dir', to, ...from, '--signature-store', url, '--verification-key', trusted.publicKeyFile]);
    expectOneLineError(r, 2, /--signature-store http:\/\/\*\*\*@127\.0\.0\.1:\d+\/good carries credentials \(user:password@\)/);
    expect(r.stdout + r.stderr).not.toContain(PASSWORD);
    expect(existsSync(join(to, 'prestage-bundle.json'))).toBe(false);
    expect(store.requests.some((path) => path.includes(PASSWORD))).toBe(false);
  });

  it('a cluster verifier ConfigMap naming such a store: refused naming the ConfigMap key, the password never shown', async () => {
    const client = new KubeClient(cluster.kubeConfig);
    const path = `${VERIFIERS}/release-verification-extra`;
    await client.apply(path, {
      apiVersion: 'v1', kind: 'ConfigMap',
      metadata: { name: 'release-verification-extra', namespace: 'openshift-config-managed', annotations: { 'release.openshift.io/verification-config-map': '' } },
      data: { 'verifier-public-key-test': trusted.publicArmored, 'store-private': store.url('good').replace('http://', `http://bob:${PASSWORD}@`) },
    } as never, { fieldManager: 'test' });
    try {
      const to = join(work, 'cluster-credentials');
      const r = await runCli(['bundle', 'create', planFile, '--output-dir', to, ...from, ...kube]);
      expectOneLineError(r, 2, /ConfigMap openshift-config-managed\/release-verification-extra store-private http:\/\/\*\*\*@127\.0\.0\.1:\d+\/good carries credentials/);
      expect(r.stdout + r.stderr).not.toContain(PASSWORD);
      expect(existsSync(join(to, 'prestage-bundle.json'))).toBe(false);
    } finally {
      await client.request('DELETE', path);
    }
  });
});

describe('sigstore signatures: the identity CRI-O checks', () => {
  it('an attachment naming another repository: create refuses and leaves the bundle resumable, not complete; verify refuses it too', async () => {
    const cosign = generateSigstoreKeys();
    const cosignPub = join(work, 'cosign.pub');
    await writeFile(cosignPub, cosign.publicPem);
    // Properly signed with the trusted sigstore key, for the right digest, but for another image.
    await pushAttachments(source.host, truth.releaseRepository, [{ digest: RELEASE_DIGEST, attachment: signAttachment(cosign, RELEASE_DIGEST, 'quay.io/attacker/ocp-release:4.16.3') }]);
    const to = join(work, 'other-identity');
    const r = await create(to, '--sigstore-key', cosignPub);
    expectOneLineError(r, 2, /1 sigstore signatures do not verify with --sigstore-key .*cosign\.pub and signedIdentity matchRepoDigestOrExact .*CRI-O will refuse those images/);
    expect(r.stdout).toMatch(new RegExp(`^quay\\.io/${truth.releaseRepository.replace(/[.]/g, '\\.')}:sha256-[0-9a-f]{64}\\.sig: signature sha256:[0-9a-f]{64}: it names quay\\.io/attacker/ocp-release:4\\.16\\.3, not the repository quay\\.io/${truth.releaseRepository.replace(/[.]/g, '\\.')} `, 'm'));
    expect(existsSync(join(to, 'index.json'))).toBe(false);
    expect(existsSync(join(to, 'prestage-bundle.json'))).toBe(true);
    expectOneLineError(await runCli(['bundle', 'verify', to]), 2, /is not a complete bundle: index\.json is missing/);

    // Resumed without the sigstore check it completes; verify with the key then refuses it.
    const resumed = await create(to);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(/^sigstore signatures: 1 of \d+ image manifests signed$/m);
    expectOneLineError(await runCli(['bundle', 'verify', to, '--sigstore-key', cosignPub, '--verification-key', trusted.publicKeyFile]), 2, /1 sigstore signatures do not verify with --sigstore-key .*signedIdentity matchRepoDigestOrExact/);
  });
});
