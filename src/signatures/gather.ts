/**
 * The release's GPG signatures for a bundle, found and judged as the CVO would: stores in
 * order (or a directory of files already downloaded), each signature verified against keys the
 * user trusts, stopping at the first store that gives one that verifies. The keys never come
 * from the release being bundled: a release's own keys do not vouch for itself.
 */
import { BadInputError, RegistryError } from '../errors.js';
import { verifyReleaseSignature, type VerificationKeys } from './release-gpg.js';
import { fetchStoreSignatures, readSignaturesDir, type StoreFetch } from './release-stores.js';

export interface TrustedKeys {
  readonly keys: VerificationKeys;
  /** The armored text, carried in the bundle so later commands verify again. */
  readonly text: string;
  /** Where they came from, for messages: `--verification-key redhat.asc`. */
  readonly where: string;
}

export interface GatherOptions {
  readonly digest: string;
  /** `4.16.3 (sha256:…)`, for messages. */
  readonly release: string;
  /** Undefined only with `allowUnsigned`: then none is fetched. */
  readonly trusted?: TrustedKeys;
  readonly stores: readonly string[];
  /** `--signatures-from`: read here instead of the stores. */
  readonly dir?: string;
  readonly get: StoreFetch;
  readonly allowUnsigned: boolean;
  readonly warn: (line: string) => void;
}

export interface GatheredSignatures {
  readonly digest: string;
  readonly signatures: readonly Buffer[];
  readonly keysText?: string;
  /** Names of the keys that signed the ones kept. */
  readonly verifiedWith: readonly string[];
  readonly from: readonly string[];
  /** Why none is verified, when `allowUnsigned` let the command go on. */
  readonly unsigned?: string;
}

export async function gatherReleaseSignatures(opts: GatherOptions): Promise<GatheredSignatures> {
  // Unsigned by choice: nothing to verify with, so nothing is fetched (an offline host stays offline).
  if (!opts.trusted) return { digest: opts.digest, signatures: [], verifiedWith: [], from: [], unsigned: 'no verification key was given (--allow-unsigned)' };
  const sources = opts.dir !== undefined ? [opts.dir] : opts.stores;
  const problems: string[] = [];
  const unreachable: string[] = [];
  for (const source of sources) {
    let found: Array<{ bytes: Buffer; name: string }>;
    if (opts.dir !== undefined) {
      const read = await readSignaturesDir(source, opts.digest);
      found = read.signatures.map((bytes, i) => ({ bytes, name: read.files[i] ?? `${source} #${i + 1}` }));
    } else {
      try {
        const fetched = await fetchStoreSignatures(source, opts.digest, opts.get);
        found = fetched.signatures.map((bytes, i) => ({ bytes, name: `${source}/${opts.digest.replace(':', '=')}/signature-${i + 1}` }));
      } catch (err) {
        if (!(err instanceof RegistryError)) throw err;
        unreachable.push(err.message);
        continue;
      }
    }
    if (found.length === 0) {
      problems.push(`${source} has no signature for it`);
      continue;
    }
    const kept: Buffer[] = [];
    const signers = new Set<string>();
    for (const { bytes, name } of found) {
      const verdict = await verifyReleaseSignature(bytes, opts.digest, opts.trusted.keys);
      if (verdict.ok) {
        kept.push(bytes);
        signers.add(verdict.signedBy);
      } else {
        problems.push(`${name}: ${verdict.detail}`);
      }
    }
    if (kept.length > 0) return { digest: opts.digest, signatures: kept, keysText: opts.trusted.text, verifiedWith: [...signers], from: [source] };
  }
  const why = [...problems, ...unreachable];
  const against = ` that ${opts.trusted.where} verifies`;
  const line = `release ${opts.release} has no signature${against}: ${why[0] ?? 'no signature store was given'}${why.length > 1 ? ` (and ${why.length - 1} more: ${why.slice(1).join('; ')})` : ''}`;
  if (opts.allowUnsigned) {
    opts.warn(`warning: ${line}; bundling it unsigned (--allow-unsigned): the cluster will need \`oc adm upgrade --force\``);
    return { digest: opts.digest, signatures: [], verifiedWith: [], from: sources, unsigned: line };
  }
  const fix = opts.dir !== undefined ? 'download them into it, or' : 'name a store that has them with --signature-store, or';
  // Nothing answered at all: the network, not the release.
  if (problems.length === 0 && unreachable.length > 0) throw new RegistryError(`${line}; ${fix} pass --allow-unsigned to bundle it without`);
  throw new BadInputError(`${line}; ${fix} pass --allow-unsigned to bundle it without`);
}
