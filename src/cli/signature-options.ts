/**
 * Signature flags of `bundle create|verify|push`: where the release's GPG signatures come from,
 * which keys judge them, and the sigstore key that judges the attachments.
 */
import { readFile, stat } from 'node:fs/promises';
import type { KeyObject } from 'node:crypto';
import type { Argv } from 'yargs';
import { clusterVerification } from '../cluster/verification-keys.js';
import { connectCluster, type ClusterClient } from '../cluster/connect.js';
import { BadInputError } from '../errors.js';
import { registryDispatcher } from '../registry/transport.js';
import type { PlanRelease } from '../plan/types.js';
// gather.js and release-gpg.js load openpgp (a sixth of a plan's CPU in its start): imported
// where a signature is judged, so plan and stage without --signatures-from never load them.
import type { GatheredSignatures, TrustedKeys } from '../signatures/gather.js';
import { dispatcherFetch, parseSignatureStore, RED_HAT_SIGNATURE_STORES } from '../signatures/release-stores.js';
import { readSigstoreKey, SIGNED_IDENTITY_RULES, type SignedIdentityRule } from '../signatures/sigstore.js';
import { transportOptionsFrom, type RegistryFlags } from './registry-options.js';

export interface SignatureFlags {
  'verification-key': string[];
  'sigstore-key'?: string;
  'sigstore-identity': SignedIdentityRule;
}

/** `bundle verify|push`: where trust comes from (never from the bundle). */
export interface TrustFlags {
  'verification-key': string[];
  kubeconfig?: string;
  context?: string;
}

export interface CreateSignatureFlags extends SignatureFlags, RegistryFlags {
  'signature-store': string[];
  'signatures-from'?: string;
  'allow-unsigned': boolean;
  'remove-signatures': boolean;
  kubeconfig?: string;
  context?: string;
}

/** `--verification-key` and `--sigstore-key`: every command that judges signatures. */
export function withSignatureKeyOptions<T>(y: Argv<T>): Argv<T & SignatureFlags> {
  return y
    .option('verification-key', { type: 'string', array: true, default: [] as string[], describe: 'ASCII-armored OpenPGP public key that release signatures must be made with (repeatable), e.g. Red Hat\'s release key' })
    .option('sigstore-key', { type: 'string', describe: 'PEM public key the images\' sigstore signatures (<repo>:sha256-<hex>.sig) must verify with: the key of the cluster\'s ClusterImagePolicy' })
    .option('sigstore-identity', { choices: SIGNED_IDENTITY_RULES, default: 'matchRepoDigestOrExact' as SignedIdentityRule, describe: 'With --sigstore-key: the signedIdentity the ClusterImagePolicy requires (its matchPolicy); each signature must name the repository the image is pulled as (the source, not the mirror)' }) as unknown as Argv<T & SignatureFlags>;
}

/** `--verification-key` and `--kubeconfig`/`--context` of `bundle verify`: the trust anchors. */
export function withTrustOptions<T>(y: Argv<T>): Argv<T & TrustFlags> {
  return y
    .option('kubeconfig', { type: 'string', describe: 'Verify the release signatures with the keys the cluster trusts now (its verifier ConfigMaps in openshift-config-managed)' })
    .option('context', { type: 'string', describe: 'Kubeconfig context (the cluster whose keys verify the release signatures)' }) as unknown as Argv<T & TrustFlags>;
}

export function withCreateSignatureOptions<T>(y: Argv<T>): Argv<T & Omit<CreateSignatureFlags, keyof RegistryFlags>> {
  return withSignatureKeyOptions(y)
    .option('signature-store', { type: 'string', array: true, default: [] as string[], describe: `Release signature store URL (repeatable, tried in order; default: the cluster's stores with --kubeconfig, else ${RED_HAT_SIGNATURE_STORES.join(' and ')})` })
    .option('signatures-from', { type: 'string', describe: 'Directory of release signatures already downloaded (store layout sha256=<hex>/signature-N, files sha256-<hex>-N, or the ConfigMaps oc adm release mirror / oc-mirror write) instead of the stores' })
    .option('allow-unsigned', { type: 'boolean', default: false, describe: 'Bundle a release whose signature cannot be found or verified (the cluster will then need oc adm upgrade --force); said in the bundle and by every command that reads it' })
    .option('remove-signatures', { type: 'boolean', default: false, describe: 'Do not copy sigstore signatures (<repo>:sha256-<hex>.sig); a cluster that enforces them (4.21+) then cannot pull from the mirror' })
    .option('kubeconfig', { type: 'string', describe: 'Verify the release signatures with the keys (and stores) the cluster trusts now: its current release\'s verifier ConfigMap' })
    .option('context', { type: 'string', describe: 'Kubeconfig context (with --kubeconfig)' }) as unknown as Argv<T & Omit<CreateSignatureFlags, keyof RegistryFlags>>;
}

/** The keys `--verification-key` names, read (armored or binary) and checked (undefined when none is named). */
export async function keysFromFiles(files: readonly string[]): Promise<TrustedKeys | undefined> {
  if (files.length === 0) return undefined;
  const inputs = await Promise.all(files.map(async (file) => ({ text: await readBytes(file, '--verification-key'), where: `--verification-key ${file}` })));
  const { readVerificationKeys } = await import('../signatures/release-gpg.js');
  const keys = await readVerificationKeys(inputs);
  return { keys, text: keys.armored, where: `--verification-key ${files.join(', ')}` };
}

/** The keys (and stores) of the verifier ConfigMap the cluster's current release carries. */
export async function keysFromCluster(client: ClusterClient): Promise<{ trusted: TrustedKeys; stores: readonly string[] }> {
  const cluster = await clusterVerification(client);
  const { readVerificationKeys } = await import('../signatures/release-gpg.js');
  const keys = await readVerificationKeys(cluster.keys);
  const trusted = { keys, text: keys.armored, where: `the cluster's ${cluster.configMaps.join(', ')}` };
  return { trusted, stores: cluster.stores.map((store) => parseSignatureStore(store.url, store.where)) };
}

/**
 * The trust anchors of `bundle verify|push`: `--verification-key` files, else with
 * `--kubeconfig`/`--context` (or `cluster`, a command that reaches the cluster anyway) the
 * keys the cluster trusts now; else none, and the signatures are checked for integrity only.
 */
export async function trustAnchors(flags: TrustFlags, cluster = false): Promise<TrustedKeys | undefined> {
  const fromFiles = await keysFromFiles(flags['verification-key']);
  if (fromFiles) return fromFiles;
  if (!cluster && flags.kubeconfig === undefined && flags.context === undefined) return undefined;
  return (await keysFromCluster(await connectCluster(flags))).trusted;
}

export async function sigstoreKeyFrom(flags: SignatureFlags): Promise<KeyObject | undefined> {
  const file = flags['sigstore-key'];
  return file === undefined ? undefined : readSigstoreKey((await readBytes(file, '--sigstore-key')).toString('utf8'), `--sigstore-key ${file}`);
}

/**
 * Checked before anything is fetched, so a bundle never transfers gigabytes to fail at the end
 * for want of a key: the stores parse, and there is a key to verify with (or `--allow-unsigned`).
 */
export async function signatureInputs(flags: CreateSignatureFlags): Promise<{ trusted?: TrustedKeys; stores: string[] }> {
  const stores = flags['signature-store'].map((store) => parseSignatureStore(store));
  const fromFiles = await keysFromFiles(flags['verification-key']);
  if (fromFiles) return { trusted: fromFiles, stores: stores.length > 0 ? stores : [...RED_HAT_SIGNATURE_STORES] };
  if (flags.kubeconfig !== undefined) {
    const cluster = await keysFromCluster(await connectCluster(flags));
    return { trusted: cluster.trusted, stores: stores.length > 0 ? stores : cluster.stores.length > 0 ? [...cluster.stores] : [...RED_HAT_SIGNATURE_STORES] };
  }
  if (!flags['allow-unsigned']) {
    throw new BadInputError('no key to verify the release signatures with: pass --verification-key FILE (Red Hat\'s release key), or --kubeconfig to use the keys the cluster trusts now, or --allow-unsigned');
  }
  return { stores: stores.length > 0 ? stores : [...RED_HAT_SIGNATURE_STORES] };
}

/** The release's signatures for the bundle, through the same proxy and CA settings as the registries. */
export async function releaseSignaturesFor(release: PlanRelease, flags: CreateSignatureFlags, inputs: { trusted?: TrustedKeys; stores: string[] }, warn: (line: string) => void): Promise<GatheredSignatures> {
  const { gatherReleaseSignatures } = await import('../signatures/gather.js');
  const dispatcher = registryDispatcher(transportOptionsFrom(flags, undefined, () => undefined));
  try {
    return await gatherReleaseSignatures({
      digest: release.digest,
      release: `${release.version} (${release.digest})`,
      ...(inputs.trusted ? { trusted: inputs.trusted } : {}),
      stores: inputs.stores,
      ...(flags['signatures-from'] !== undefined ? { dir: flags['signatures-from'] } : {}),
      get: dispatcherFetch(dispatcher),
      allowUnsigned: flags['allow-unsigned'],
      warn,
    });
  } finally {
    await dispatcher.destroy();
  }
}

/** Key files are small; a bigger one is no key. */
const MAX_KEY_FILE_BYTES = 1024 * 1024;

async function readBytes(file: string, flag: string): Promise<Buffer> {
  try {
    if ((await stat(file)).size > MAX_KEY_FILE_BYTES) throw new BadInputError(`${flag} ${file} is larger than 1 MiB, so it is not a key file; pass the public key file`);
    return await readFile(file);
  } catch (err) {
    if (err instanceof BadInputError) throw err;
    throw new BadInputError(`cannot read ${flag} ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}
