/**
 * What a failed CRI pull means, from CRI-O's error text: which errors retrying cannot fix, and
 * the ones a node's status should explain in prestage's words.
 */
import { sigstoreTag } from '../signatures/sigstore.js';

/** Errors retrying cannot fix; the image fails at once (MCO does the same for ENOSPC). */
const PERMANENT_PULL_ERROR = /no space left on device|manifest unknown|not found|unauthorized|denied/i;

/**
 * containers/image's policy refusal ("Source image rejected: A signature was required, but no
 * signature exists"; "... Signature for identity ... is not accepted"; "... invalid signature").
 * From 4.21 the ClusterImagePolicy makes CRI-O demand a sigstore signature on every pull of the
 * release's repositories, looked up as a tag on the registry the node pulls from: a mirror
 * without the tags refuses every image until they are pushed.
 */
const SIGNATURE_REFUSED = /Source image rejected|signature was required|no signature exists|signature.*not (accepted|valid)|invalid signature/i;

export function isPermanentPullError(message: string): boolean {
  return PERMANENT_PULL_ERROR.test(message) || SIGNATURE_REFUSED.test(message);
}

/** The one line a node's status carries for a failed pull: CRI-O's text, explained where it needs it. */
export function explainPullError(image: string, message: string): string {
  if (!SIGNATURE_REFUSED.test(message)) return message;
  const digest = /@(sha256:[0-9a-f]{64})$/.exec(image)?.[1];
  const tag = digest ? ` (${sigstoreTag(digest)})` : '';
  return `refused by the node's signature policy: the registry it pulls from lacks a valid sigstore signature for ${image}${tag}; push the bundle's signatures to the mirror (prestage bundle push, without --remove-signatures): ${message}`;
}
