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
import { keysFromFiles } from './signature-options.js';

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

/**
 * The release's signatures verified again (against `--verification-key` when given, else the
 * keys recorded at create): one line, exit 2, on any that fails. Returns the report line.
 */
export async function checkReleaseSignaturesOrFail(bundle: Pick<Bundle, 'metadata'>, read: (digest: string) => Promise<Buffer>, keyFiles: readonly string[], where: string): Promise<string | undefined> {
  const record = bundle.metadata.signatures?.release;
  if (!record || record.signatures.length === 0) return undefined;
  const given = await keysFromFiles(keyFiles);
  const check = await checkReleaseSignatures(record, read, given?.keys);
  if (check.problems.length > 0) {
    throw new BadInputError(`bundle ${where}: ${check.problems[0]}${check.problems.length > 1 ? ` (and ${check.problems.length - 1} more)` : ''}; the bundle's signatures were altered: create it again`);
  }
  return `release signatures: ${check.verified} verified with ${given ? given.where : `the keys recorded at create (${record.verifiedWith.join(', ')})`}`;
}

/** `--sigstore-key`: every attachment's signatures, one line per failure on stdout, then exit 2. */
export async function checkAttachmentsOrFail(bundle: Pick<Bundle, 'index' | 'metadata'>, read: (digest: string) => Promise<Buffer>, key: KeyObject, keyFile: string, where: string, ctx: CommandContext): Promise<string> {
  const check = await checkSigstoreAttachments(bundle, read, key);
  for (const problem of check.problems) ctx.stdout.write(`${problem}\n`);
  if (check.problems.length > 0) {
    throw new BadInputError(`bundle ${where}: ${check.problems.length} sigstore signatures do not verify with --sigstore-key ${keyFile} (listed on stdout); CRI-O will refuse those images`);
  }
  const previous = check.previous > 0 ? ` (${check.previous} more with the previous bundle, ${bundle.metadata.previous?.source})` : '';
  return `sigstore signatures: ${check.signatures} in ${check.attachments} attachments verified with ${keyFile}${previous}`;
}
