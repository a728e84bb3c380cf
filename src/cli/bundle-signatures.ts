/**
 * What `bundle create|verify|push` say and check of a bundle's signatures: the release's GPG
 * signatures (re-verified before anything is pushed) and the sigstore attachments.
 */
import type { KeyObject } from 'node:crypto';
import type { Bundle, BundleSignatures } from '../bundle/layout.js';
import { readVerifiedBlob } from '../bundle/blob-files.js';
import { checkReleaseSignatures, checkSigstoreAttachments } from '../bundle/signatures.js';
import { BadInputError } from '../errors.js';
import type { PlanRelease } from '../plan/types.js';
import type { CommandContext } from './context.js';
import type { TrustedKeys } from '../signatures/gather.js';
import type { SignedIdentityRule } from '../signatures/sigstore.js';
import { count } from '../plural.js';

/** Blobs of a bundle directory, each checked against its name. */
export function verifiedReader(dir: string): (digest: string) => Promise<Buffer> {
  return (digest) => readVerifiedBlob(dir, digest);
}

/** `bundle create`'s report of what it carries. */
export function signatureLines(release: Pick<PlanRelease, 'version'>, signatures: BundleSignatures): string[] {
  const lines: string[] = [];
  const gpg = signatures.release;
  if (gpg) {
    const from = gpg.from.join(', ');
    // Signatures are carried only once verified: none at all, or each verified with a key.
    if (gpg.signatures.length === 0) lines.push(`release signatures: none (${gpg.unsigned ?? 'none found'}); the cluster will need \`oc adm upgrade --force\``);
    else lines.push(`release signatures: ${gpg.signatures.length} verified with ${gpg.verifiedWith.join(', ')} (from ${from})`);
  }
  const { sigstore } = signatures;
  if (!sigstore.copied) lines.push('sigstore signatures: not copied (--remove-signatures)');
  else lines.push(`sigstore signatures: ${sigstore.found} of ${sigstore.looked} image manifests signed${sigstore.found === 0 ? ` (none: ${release.version} may predate its ClusterImagePolicy scopes)` : ''}`);
  return lines;
}

/** One line per later command that reads a bundle made with `--allow-unsigned`. */
export function unsignedWarning(bundle: Pick<Bundle, 'metadata'>, where: string): string | undefined {
  const gpg = bundle.metadata.signatures?.release;
  if (!gpg || gpg.signatures.length > 0) return undefined;
  return `warning: bundle ${where} carries release ${bundle.metadata.release.version} without a signature (${gpg.unsigned ?? '--allow-unsigned'})`;
}

export interface ReleaseSignatureReport {
  /** The stdout line, e.g. `release signatures: 1 verified with --verification-key redhat.asc`. */
  readonly line: string;
  /** Without an anchor, the stderr line saying so (written once the command succeeded, so a failure stays one line). */
  readonly warning?: string;
  /** Verified against a trust anchor: only then may they reach the CVO without an explicit flag. */
  readonly anchored: boolean;
}

/** The one line every command says when it checked release signatures without an anchor. */
export const UNANCHORED_WARNING = 'release signatures NOT verified against a trusted key (integrity only): give --verification-key or --kubeconfig';

/**
 * The release's signatures checked again: against `anchors` (`--verification-key`, or the
 * cluster's keys) when there are some, else for integrity only (well-formed, signing the
 * release's digest), which the report's warning says. Never against the keys stored in the
 * bundle. One line, exit 2, on any that fails.
 */
export async function checkReleaseSignaturesOrFail(bundle: Pick<Bundle, 'metadata'>, read: (digest: string) => Promise<Buffer>, anchors: TrustedKeys | undefined, where: string): Promise<ReleaseSignatureReport | undefined> {
  const record = bundle.metadata.signatures?.release;
  if (!record || record.signatures.length === 0) return undefined;
  const check = await checkReleaseSignatures(record, read, anchors?.keys);
  if (check.problems.length > 0) {
    const more = check.problems.length > 1 ? ` (and ${check.problems.length - 1} more)` : '';
    const why = anchors
      ? `the bundle's release signatures do not verify with ${anchors.where}: do not push them; create the bundle again from the release's signature stores`
      : "the bundle's signatures were altered: create it again";
    throw new BadInputError(`bundle ${where}: ${check.problems[0]}${more}; ${why}`);
  }
  if (anchors) return { line: `release signatures: ${check.passed} verified with ${anchors.where}`, anchored: true };
  return {
    line: `release signatures: ${check.passed} well-formed for ${record.digest}, claiming key ${check.claimed.join(', ')} (not verified)`,
    warning: `warning: bundle ${where}: ${UNANCHORED_WARNING}`,
    anchored: false,
  };
}

/** `--sigstore-key`: every attachment's signatures and identities, one line per failure on stdout, then exit 2. */
export async function checkAttachmentsOrFail(bundle: Pick<Bundle, 'index' | 'metadata'>, read: (digest: string) => Promise<Buffer>, key: KeyObject, flags: { 'sigstore-key'?: string; 'sigstore-identity': SignedIdentityRule }, where: string, ctx: CommandContext): Promise<string> {
  const keyFile = flags['sigstore-key'];
  const check = await checkSigstoreAttachments(bundle, read, key, flags['sigstore-identity']);
  for (const problem of check.problems) ctx.stdout.write(`${problem}\n`);
  if (check.problems.length > 0) {
    throw new BadInputError(`bundle ${where}: ${check.problems.length} sigstore signatures do not verify with --sigstore-key ${keyFile} and signedIdentity ${flags['sigstore-identity']} (listed on stdout); CRI-O will refuse those images`);
  }
  const previous = check.previous > 0 ? ` (${check.previous} more with the previous bundle, ${bundle.metadata.previous?.source})` : '';
  return `sigstore signatures: ${check.signatures} in ${count(check.attachments, 'attachment')} verified with ${keyFile}${previous}`;
}
