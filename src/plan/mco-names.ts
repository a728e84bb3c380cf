/**
 * The names MCO's PinnedImageSet accepts: the CEL rules of `spec.pinnedImages[].name` in
 * openshift/api (FACTS §3). A name the API server would reject fails the whole set at apply
 * time, or worse in GitOps, long after the plan; so it is refused before anything is written.
 * The prestage agent's PinnedImageSet has no such rule.
 */
import { BadInputError } from '../errors.js';

const DIGEST = /^sha256:[a-f0-9]{64}$/;
/** A dotted host with an optional port, then at most one namespace segment before the repository. */
const NAME = /^([a-zA-Z0-9-]+\.)+[a-zA-Z0-9-]+(:[0-9]{2,5})?\/([a-zA-Z0-9-_]{0,61}\/)?[a-zA-Z0-9-_.]*?$/;

/** Why MCO would reject `pullSpec`, or undefined when it accepts it. */
export function mcoNameRejection(pullSpec: string): string | undefined {
  const parts = pullSpec.split('@');
  if (parts.length !== 2) return 'it is not NAME@sha256:DIGEST';
  const [name, digest] = parts as [string, string];
  if (!DIGEST.test(digest)) return 'its digest is not sha256:<64 hex>';
  if (NAME.test(name)) return undefined;
  const host = name.split('/')[0]!;
  if (!name.includes('/') || !/^([a-zA-Z0-9-]+\.)+[a-zA-Z0-9-]+(:[0-9]{2,5})?$/.test(host)) return `its registry host ${host} is not a dotted name or IP address`;
  return 'its repository path has more than one namespace segment';
}

/** Throws one line naming the first pullspec MCO would reject. */
export function checkMcoNames(pullSpecs: Iterable<string>): void {
  for (const pullSpec of pullSpecs) {
    const why = mcoNameRejection(pullSpec);
    if (why === undefined) continue;
    throw new BadInputError(
      `MCO's PinnedImageSet would reject ${pullSpec}: ${why}; plan the release by its source name (quay.io/...) with --mirror SOURCE=MIRROR, which keeps the source names, or use --api prestage (the prestage agent)`,
    );
  }
}
