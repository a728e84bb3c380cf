/**
 * Air-gapped upgrades the cluster accepts, on the real thing. The connected side: the fixture
 * release in a docker-registry that also holds a sigstore signature (`<repo>:sha256-<hex>.sig`,
 * made with a key this run generates) for every image, and a local GPG signature store whose
 * signatures Debian's gpg made. The site: a fresh docker-registry as the mirror, and the test
 * bed's API server with two nodes whose real CRI-O enforces `sigstoreSigned` for the release's
 * repositories (policy.json, and registries.d `use-sigstore-attachments` as MCO writes it).
 */
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Plan } from '../src/plan/types.js';
import { KubeClient } from '../src/kube/client.js';
import { CriClient } from '../src/cri/client.js';
import { LeaseCacheWarmer } from '../src/agent/cache-warm.js';
import { parseReference } from '../src/registry/reference.js';
import { readVerificationKeys, verifyReleaseSignature } from '../src/signatures/release-gpg.js';
import { readSigstoreKey, sigstoreTag, verifySigstoreSignature } from '../src/signatures/sigstore.js';
import { createLogger } from '../src/telemetry/log.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import type { Daemon } from './cluster/processes.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { pinState, startNodeAgent } from './support/agent-bed.js';
import { ProxyCache } from './support/cache-bed.js';
import { expectOneLineError } from './support/bundle-files.js';
import { runCli } from './support/cli.js';
import { generateGpgKey, removeGpgKey, signRelease, startSignatureStore, type GpgKey, type SignatureStore } from './support/release-signing.js';
import { generateSigstoreKeys, pushAttachments, signAttachment, type SigstoreKeys } from './support/sigstore-signing.js';

const truth = inject('fixtureTruth');
const RELEASE = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;
const RELEASE_DIGEST = truth.release.image.digest;
/** The ClusterImagePolicy scope the nodes enforce: both repositories of the release. */
const SCOPE = 'quay.io/openshift-release-dev';
const NAMESPACE = 'prestage';
/** The nodes' policy below, which cosign's repository-only identities (no tag) need. */
const IDENTITY_RULE = ['--sigstore-identity', 'matchRepository'];

let work: string;
let source: RegistryHandle;
let mirror: RegistryHandle;
let cluster: TestCluster;
let store: SignatureStore;
let trusted: GpgKey;
let stranger: GpgKey;
let cosign: SigstoreKeys;
let cosignPub: string;
let planFile: string;
let plan: Plan;
/** Every image the bundle carries, by digest pullspec: each is signed at the source. */
let signedImages: string[];
let from: string[];
let kube: string[];
const agents: Daemon[] = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'prestage-signatures-'));
  // The fixture's bytes, copied: the attachments pushed here must not reach other files' registries.
  await cp(inject('fixtureStorageDir'), join(work, 'source'), { recursive: true });
  source = await startRegistry({ storageDir: join(work, 'source') });
  mirror = await startRegistry();
  from = ['--mirror', `quay.io=${source.host}`, '--insecure-registry', source.host];

  const planned = await runCli(['plan', RELEASE, ...from, '-o', 'json']);
  expect(planned.code, planned.stderr).toBe(0);
  planFile = join(work, 'plan.json');
  await writeFile(planFile, planned.stdout);
  plan = JSON.parse(planned.stdout) as Plan;
  signedImages = [...plan.images, ...plan.skipped].map((image) => image.pullSpec);

  cosign = generateSigstoreKeys();
  cosignPub = join(work, 'cosign.pub');
  await writeFile(cosignPub, cosign.publicPem);
  const byRepository = new Map<string, Array<{ digest: string; attachment: ReturnType<typeof signAttachment> }>>();
  for (const pullSpec of signedImages) {
    const [name, digest] = pullSpec.split('@') as [string, string];
    const repository = name.slice('quay.io/'.length);
    byRepository.set(repository, [...(byRepository.get(repository) ?? []), { digest, attachment: signAttachment(cosign, digest, name) }]);
  }
  for (const [repository, signed] of byRepository) await pushAttachments(source.host, repository, signed);

  [trusted, stranger] = await Promise.all([generateGpgKey('Release Signer'), generateGpgKey('Somebody Else')]);
  const identity = `quay.io/${truth.releaseRepository}:${truth.release.tag}`;
  const good = await signRelease(trusted, RELEASE_DIGEST, identity);
  store = await startSignatureStore({
    good: { [RELEASE_DIGEST]: [good] },
    'wrong-digest': { [RELEASE_DIGEST]: [await signRelease(trusted, `sha256:${'ab'.repeat(32)}`, identity)] },
    'unknown-key': { [RELEASE_DIGEST]: [await signRelease(stranger, RELEASE_DIGEST, identity)] },
    truncated: { [RELEASE_DIGEST]: [good.subarray(0, Math.floor(good.length / 2))] },
    empty: {},
  });

  // Each node's CRI-O enforces what the `openshift` ClusterImagePolicy makes MCO write.
  const policy = {
    default: [{ type: 'insecureAcceptAnything' }],
    transports: { docker: { [SCOPE]: [{ type: 'sigstoreSigned', keyPath: cosignPub, signedIdentity: { type: 'matchRepository' } }] } },
  };
  // Attachments are looked up where the node pulls from: MCO writes the mirrors' entries too.
  const registriesD = { 'prestage-sigstore.yaml': yaml.dump({ docker: { [SCOPE]: { 'use-sigstore-attachments': true }, [mirror.host]: { 'use-sigstore-attachments': true } } }) };
  cluster = await startCluster({ workers: 1, registryMirrors: { 'quay.io': mirror.host }, insecureRegistries: [mirror.host], crioSignatures: { policy, registriesD } });
  kube = ['--kubeconfig', cluster.kubeconfigPath];
  // Where OpenShift keeps the CVO's inputs; the test bed's API server has no such namespace of its own.
  const client = new KubeClient(cluster.kubeConfig);
  await client.apply('/api/v1/namespaces/openshift-config-managed', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'openshift-config-managed' } } as never, { fieldManager: 'test' });
  // What the CVO applies from the release the cluster runs: its verifier ConfigMap (keys, stores).
  await client.apply('/api/v1/namespaces/openshift-config-managed/configmaps/release-verification', {
    apiVersion: 'v1', kind: 'ConfigMap',
    metadata: { name: 'release-verification', namespace: 'openshift-config-managed', annotations: { 'release.openshift.io/verification-config-map': '' } },
    data: { 'verifier-public-key-test': trusted.publicArmored, 'store-test': store.url('good') },
  } as never, { fieldManager: 'cluster-version-operator' });
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await Promise.all([trusted, stranger].map(removeGpgKey));
  await Promise.allSettled(agents.map((agent) => agent.stop(30_000)));
  await cluster?.stop();
  await Promise.allSettled([source?.stop(), mirror?.stop(), store?.stop()]);
  if (work && !process.env.PRESTAGE_TESTBED_KEEP) await rm(work, { recursive: true, force: true });
});

const bundleDir = () => join(work, 'bundle');
const create = (to: string, ...flags: string[]) => runCli(['bundle', 'create', planFile, '--output-dir', to, ...from, ...flags]);

describe('release GPG signatures: fetched, verified as the CVO does, refused with one line each', () => {
  const refused: Array<[string, string[], number, RegExp]> = [
    ['a signature of another digest', ['--signature-store', 'wrong-digest'], 2, /signature-1: it signs sha256:(ab){32}, not sha256:/],
    ['a signature by a key nobody trusts', ['--signature-store', 'unknown-key'], 2, /signature-1: .*not a verification key/],
    ['a truncated body', ['--signature-store', 'truncated'], 2, /signature-1: .*(not an OpenPGP signed message|truncated)/i],
    ['a store without the release (404)', ['--signature-store', 'empty'], 2, /\/empty has no signature for it/],
  ];
  for (const [what, [flag, name], code, message] of refused) {
    it(`${what}: exit ${code}, nothing transferred`, async () => {
      const to = join(work, `refused-${name}`);
      const r = await create(to, flag!, store.url(name!), '--verification-key', trusted.publicKeyFile);
      expectOneLineError(r, code, message);
      expect(r.stderr).toMatch(/--allow-unsigned/);
      await expect(readFile(join(to, 'index.json'))).rejects.toThrow();
    });
  }

  it('a store nobody answers on is a network failure: exit 3', async () => {
    const r = await create(join(work, 'refused-closed'), '--signature-store', 'http://127.0.0.1:9/signatures', '--verification-key', trusted.publicKeyFile, '--retries', '0');
    expect(r.code, r.stderr).toBe(3);
    expect(r.stderr).toMatch(/^prestage: error: release .* has no signature that --verification-key .* verifies: /m);
  });

  it('bad input: a key that is not a public key, a store that is not http(s), no key at all: exit 2 before any read', async () => {
    const notKey = join(work, 'not-a-key.asc');
    await writeFile(notKey, 'hello\n');
    expectOneLineError(await create(join(work, 'x1'), '--verification-key', notKey), 2, /--verification-key .*not-a-key\.asc is not an OpenPGP public key/);
    expectOneLineError(await create(join(work, 'x2'), '--signature-store', 'ftp://mirror.example.com/sigs', '--verification-key', trusted.publicKeyFile), 2, /ftp:\/\/mirror\.example\.com\/sigs/);
    expectOneLineError(await create(join(work, 'x3')), 2, /no key to verify the release signatures with: pass --verification-key FILE/);
    expect(store.requests.filter((path) => path.includes('x1') || path.includes('ftp'))).toEqual([]);
  });

  it('--allow-unsigned bundles it anyway, and says so in the bundle and in every command that reads it', async () => {
    const to = join(work, 'unsigned');
    const r = await create(to, '--signature-store', store.url('empty'), '--verification-key', trusted.publicKeyFile, '--allow-unsigned', '--remove-signatures');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/warning: release .* has no signature .*; bundling it unsigned \(--allow-unsigned\)/);
    expect(r.stdout).toMatch(/^release signatures: none \(.*\); the cluster will need `oc adm upgrade --force`$/m);
    expect(r.stdout).toMatch(/^sigstore signatures: not copied \(--remove-signatures\)$/m);
    const metadata = JSON.parse(await readFile(join(to, 'prestage-bundle.json'), 'utf8'));
    expect(metadata.signatures.release.unsigned).toMatch(/has no signature/);
    const verified = await runCli(['bundle', 'verify', to]);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stderr).toMatch(/^warning: bundle .* carries release 4\.16\.3 without a signature/m);
  });
});

describe('a bundle that carries both kinds', () => {
  it('create: the release signature verified with the key, every image\'s sigstore signature copied and verified', async () => {
    const r = await create(bundleDir(), '--signature-store', store.url('empty'), '--signature-store', store.url('good'), '--verification-key', trusted.publicKeyFile, '--sigstore-key', cosignPub, ...IDENTITY_RULE);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^release signatures: 1 verified with ${trusted.fingerprint} .*\\(from ${store.url('good').replace(/[/.]/g, '\\$&')}\\)$`, 'm'));
    expect(r.stdout).toContain(`sigstore signatures: ${signedImages.length} of ${signedImages.length} image manifests signed\n`);
    expect(r.stdout).toContain(`sigstore signatures: ${signedImages.length} in ${signedImages.length} attachments verified with ${cosignPub}\n`);
    const index = JSON.parse(await readFile(join(bundleDir(), 'index.json'), 'utf8')) as { manifests: Array<{ annotations: Record<string, string> }> };
    const names = index.manifests.map((m) => m.annotations['org.opencontainers.image.ref.name']!);
    for (const image of signedImages) expect(names).toContain(`${image.split('@')[0]}:${image.split('@')[1]!.replace(':', '-')}.sig`);
  });

  it('an incremental bundle (--since) carries the signatures again: attachment manifests always, their blobs left to the previous bundle', async () => {
    const next = join(work, 'incremental');
    const r = await create(next, '--since', bundleDir(), '--signature-store', store.url('good'), '--verification-key', trusted.publicKeyFile);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`sigstore signatures: ${signedImages.length} of ${signedImages.length} image manifests signed\n`);
    const metadata = JSON.parse(await readFile(join(next, 'prestage-bundle.json'), 'utf8'));
    expect(metadata.signatures.sigstore.found).toBe(signedImages.length);
    expect(metadata.signatures.release.signatures).toHaveLength(1);
    const verified = await runCli(['bundle', 'verify', next, '--sigstore-key', cosignPub, ...IDENTITY_RULE]);
    // The attachments' payloads came with the previous bundle: checked there, and said so.
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    expect(verified.stdout).toContain(`sigstore signatures: 0 in ${signedImages.length} attachments verified with ${cosignPub} (${signedImages.length} more with the previous bundle, ${bundleDir()})\n`);
  });

  it('verify checks them again; another sigstore key is refused image by image', async () => {
    const r = await runCli(['bundle', 'verify', bundleDir(), '--sigstore-key', cosignPub, ...IDENTITY_RULE]);
    expect(r.code, r.stderr).toBe(0);
    // Without a trusted key: integrity only, said on stderr; the keys in the bundle are no anchor.
    expect(r.stdout).toMatch(/^release signatures: 1 well-formed for sha256:[0-9a-f]{64}, claiming key [0-9A-F]{16} \(not verified\)$/m);
    expect(r.stderr).toMatch(/^warning: bundle .*: release signatures NOT verified against a trusted key \(integrity only\): give --verification-key or --kubeconfig$/m);
    expect(r.stdout).toMatch(/^sigstore signatures: \d+ in \d+ attachments verified/m);
    const other = join(work, 'other.pub');
    await writeFile(other, generateSigstoreKeys().publicPem);
    const refused = await runCli(['bundle', 'verify', bundleDir(), '--sigstore-key', other, ...IDENTITY_RULE]);
    expect(refused.code).toBe(2);
    expect(refused.stdout.trim().split('\n').filter((l) => l.includes('does not match the payload'))).toHaveLength(signedImages.length);
    expect(refused.stderr).toMatch(/sigstore signatures do not verify with --sigstore-key .*other\.pub .*CRI-O will refuse those images/);
  });

  it('tampered signatures: verify and push refuse with one line, exit 2, and nothing is pushed', async () => {
    const tampered = join(work, 'tampered');
    await cp(bundleDir(), tampered, { recursive: true });
    const metadataPath = join(tampered, 'prestage-bundle.json');
    const metadata = JSON.parse(await readFile(metadataPath, 'utf8'));
    // Swap the signature for one that signs another release, naming it properly: only GPG can tell.
    const forged = await signRelease(trusted, `sha256:${'cd'.repeat(32)}`, 'quay.io/x/y:1');
    const { createHash } = await import('node:crypto');
    const digest = `sha256:${createHash('sha256').update(forged).digest('hex')}`;
    await writeFile(join(tampered, 'blobs', 'sha256', digest.slice(7)), forged);
    metadata.signatures.release.signatures = [{ digest, size: forged.length }];
    await writeFile(metadataPath, JSON.stringify(metadata));
    expectOneLineError(await runCli(['bundle', 'verify', tampered]), 2, /release signature 1 .*: it signs sha256:(cd){32}, not sha256:.*the bundle's signatures were altered/);
    const empty = await startRegistry();
    try {
      expectOneLineError(await runCli(['bundle', 'push', tampered, empty.host, '--insecure-registry', empty.host, '--output-dir', work]), 2, /the bundle's signatures were altered/);
      const catalog = await fetch(`${empty.url}/v2/_catalog`).then((res) => res.json() as Promise<{ repositories: string[] }>);
      expect(catalog.repositories).toEqual([]);
    } finally {
      await empty.stop();
    }
  });
});

describe('the site: CRI-O enforces sigstore signatures on every pull from the mirror', () => {
  const component = () => plan.images.find((image) => image.source === 'component')!.pullSpec;

  it('a mirror pushed without signatures: CRI-O refuses the pull, and the agent\'s status says the mirror lacks the signature', async () => {
    const pushed = await runCli(['bundle', 'push', bundleDir(), mirror.host, '--insecure-registry', mirror.host, '--output-dir', work, '--remove-signatures']);
    expect(pushed.code, pushed.stderr).toBe(0);
    const node = cluster.nodes[1]!;
    const cri = await CriClient.connect(node.crio.socketPath);
    try {
      // CRI-O's own refusal, from containers/image's policy evaluation.
      await expect(cri.pullImage(component())).rejects.toThrow(/Source image rejected: A signature was required, but no signature exists/);
    } finally {
      cri.close();
    }
    const installed = await runCli(['install', '--image', 'ghcr.io/prestage/prestage:test', '--apply', ...kube]);
    expect(installed.code, installed.stderr).toBe(0);
    for (const each of cluster.nodes) {
      agents.push(await startNodeAgent(cluster, each, { dir: work, namespace: NAMESPACE, args: ['--concurrency', '4', '--control-plane-concurrency', '4', '--permanent-failure-backoff', '2s', '--resync', '3s'] }));
    }
    const staged = await runCli(['stage', RELEASE, '--mirror', `quay.io=${mirror.host}`, '--insecure-registry', mirror.host, '--fail-after', '5s', '--timeout', '120s', ...kube]);
    expect(staged.code, staged.stderr).toBe(1);
    expect(staged.stderr + staged.stdout).toMatch(/refused by the node's signature policy: the registry it pulls from lacks a valid sigstore signature for quay\.io\/openshift-release-dev\/[^ ]+@sha256:[0-9a-f]{64} \(sha256-[0-9a-f]{64}\.sig\); push the bundle's signatures/);
  }, 300_000);

  it('bundle push with the signatures and --apply: the agents stage the release from the mirror, CRI-O pins every image, the CVO\'s ConfigMap round-trips', async () => {
    const pushed = await runCli(['bundle', 'push', bundleDir(), mirror.host, '--insecure-registry', mirror.host, '--output-dir', work, '--apply', ...kube]);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stdout).toContain(`sigstore signatures: ${signedImages.length} tagged, 0 present\n`);
    expect(pushed.stdout).toMatch(/^wrote .*signature-configmap\.yaml \(ConfigMap openshift-config-managed\/sha256-[0-9a-f]{64}, 1 signature\)$/m);
    expect(pushed.stdout).toMatch(/^applied ConfigMap openshift-config-managed\/sha256-/m);
    // As the CVO lists it: by label, every binaryData key that starts with sha256-<hex>.
    const client = new KubeClient(cluster.kubeConfig);
    const listed = await client.get<{ items: Array<{ metadata: { name: string }; binaryData?: Record<string, string> }> }>('/api/v1/namespaces/openshift-config-managed/configmaps', { labelSelector: 'release.openshift.io/verification-signatures' });
    const hex = RELEASE_DIGEST.slice(7);
    const signatures = listed.items.flatMap((cm) => Object.entries(cm.binaryData ?? {}).filter(([key]) => key.startsWith(`sha256-${hex}`)).map(([, value]) => Buffer.from(value, 'base64')));
    expect(signatures).toHaveLength(1);
    const keys = await readVerificationKeys([{ text: trusted.publicArmored, where: 'trusted' }]);
    expect(await verifyReleaseSignature(signatures[0]!, RELEASE_DIGEST, keys)).toMatchObject({ ok: true });
    expect(yaml.load(await readFile(join(work, 'signature-configmap.yaml'), 'utf8'))).toMatchObject({ kind: 'ConfigMap', metadata: { labels: { 'release.openshift.io/verification-signatures': '' } } });

    // From the files push wrote, verified with the keys the cluster trusts now, applied again.
    const staged = await runCli(['stage', RELEASE, '--mirror', `quay.io=${mirror.host}`, '--insecure-registry', mirror.host, '--timeout', '10m', '--signatures-from', work, ...kube]);
    expect(staged.code, staged.stderr).toBe(0);
    expect(staged.stdout).toMatch(new RegExp(`^release signatures: 1 from ${work} verified with ${trusted.fingerprint} .*; applied ConfigMap openshift-config-managed/sha256-${RELEASE_DIGEST.slice(7)}$`, 'm'));
    for (const node of cluster.nodes) {
      const sets = plan.sets.filter((set) => (node.role === 'control-plane' ? set.role !== 'worker' : set.role === 'worker'));
      const images = [...new Set(sets.flatMap((set) => set.images))];
      expect(images.length).toBeGreaterThan(0);
      const pins = await pinState(node, images);
      expect(Object.entries(pins).filter(([, pinned]) => pinned !== true), node.name).toEqual([]);
    }
  }, 900_000);

  it('plan --signatures-from writes the ConfigMap with the sets for GitOps; a signature no key verifies is refused', async () => {
    const out = join(work, 'gitops');
    const planned = await runCli(['plan', RELEASE, '--mirror', `quay.io=${mirror.host}`, '--insecure-registry', mirror.host, '--signatures-from', work, '--verification-key', trusted.publicKeyFile, '--output-dir', out]);
    expect(planned.code, planned.stderr).toBe(0);
    expect(planned.stderr).toMatch(/^release signatures: 1 from .* verified with /m);
    const kustomization = yaml.load(await readFile(join(out, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
    expect(kustomization.resources).toContain('signature-configmap.yaml');
    expect(await readFile(join(out, 'signature-configmap.yaml'), 'utf8')).toBe(await readFile(join(work, 'signature-configmap.yaml'), 'utf8'));
    expectOneLineError(await runCli(['plan', RELEASE, '--mirror', `quay.io=${mirror.host}`, '--insecure-registry', mirror.host, '--signatures-from', work, '--verification-key', stranger.publicKeyFile, '-o', 'yaml']), 2, /has no signature that --verification-key .* verifies: .*signature-configmap\.yaml.*not a verification key/);
  });

  it('with cluster access, the keys (and stores) come from the verifier ConfigMap of the release the cluster runs', async () => {
    const before = store.requests.length;
    const r = await create(join(work, 'from-cluster'), '--remove-signatures', ...kube);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^release signatures: 1 verified with ${trusted.fingerprint}`, 'm'));
    expect(store.requests.slice(before).some((path) => path.startsWith('/good/'))).toBe(true);
  });
});

describe('the in-cluster cache', () => {
  it('a warm fills it with the images\' sigstore attachments too, which it then serves with the link down', async () => {
    const upstream = await startRegistry({ storageDir: join(work, 'source') });
    const cache = await ProxyCache.start({ dir: join(work, 'cache'), remoteUrl: upstream.url });
    const warmer = new LeaseCacheWarmer(new KubeClient(cluster.kubeConfig), { namespace: NAMESPACE, holder: 'master-0', mirrors: [{ source: 'quay.io', location: cache.host }], log: createLogger('silent') });
    const images = signedImages.slice(0, 6);
    try {
      const warmed = await warmer.fill(images.map(parseReference), 'amd64');
      expect(warmed.failures).toEqual([]);
      // Each image's two blobs at least, and each attachment's config and payload.
      expect(warmed.blobs).toBeGreaterThanOrEqual(images.length * 4);
      await upstream.stop();
      for (const image of images) {
        const [name, digest] = image.split('@') as [string, string];
        const repository = name.slice('quay.io/'.length);
        const manifest = await fetch(`http://${cache.host}/v2/${repository}/manifests/${sigstoreTag(digest)}`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } });
        expect(manifest.status, image).toBe(200);
        const layer = ((await manifest.json()) as { layers: Array<{ digest: string; annotations: Record<string, string> }> }).layers[0]!;
        const payload = Buffer.from(await (await fetch(`http://${cache.host}/v2/${repository}/blobs/${layer.digest}`)).arrayBuffer());
        expect(verifySigstoreSignature(payload, layer.annotations, digest, readSigstoreKey(cosign.publicPem, 'cosign.pub'), { repository: name, rule: 'matchRepository' })).toEqual({ ok: true, identity: name });
      }
    } finally {
      await warmer.close();
      await cache.stop();
      await upstream.stop();
    }
  });
});
