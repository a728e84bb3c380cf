/**
 * Where to fetch a repository from: `--mirror SOURCE=MIRROR` rules, as an
 * ImageDigestMirrorSet would set them on a cluster. Pullspecs in plans keep the source
 * names; only the fetching goes to the mirror. The longest matching source prefix wins,
 * matched on whole path components.
 */
import { BadInputError } from '../errors.js';
import { parseReference, type ImageReference } from './reference.js';

export interface MirrorRule {
  /** `registry[/path]` as in the source pullspecs. */
  readonly source: string;
  /** `registry[/path]` to fetch from instead. */
  readonly mirror: string;
}

export function parseMirrorRule(text: string): MirrorRule {
  const eq = text.indexOf('=');
  const source = text.slice(0, eq).trim().replace(/\/+$/, '');
  const mirror = text.slice(eq + 1).trim().replace(/\/+$/, '');
  if (eq <= 0 || !source || !mirror) {
    throw new BadInputError(`invalid --mirror "${text}": expected SOURCE=MIRROR, e.g. quay.io/openshift-release-dev=mirror.example.com:5000/ocp`);
  }
  return { source, mirror };
}

export function applyMirrors(ref: ImageReference, rules: readonly MirrorRule[]): ImageReference {
  const full = `${ref.registry}/${ref.repository}`;
  let best: MirrorRule | undefined;
  for (const rule of rules) {
    if ((full === rule.source || full.startsWith(`${rule.source}/`)) && (!best || rule.source.length > best.source.length)) best = rule;
  }
  if (!best) return ref;
  const rest = full.slice(best.source.length);
  // Re-parse so the mirror location is validated and normalised like any reference.
  const moved = parseReference(`${best.mirror}${rest}`);
  return { ...moved, ...(ref.tag ? { tag: ref.tag } : {}), ...(ref.digest ? { digest: ref.digest } : {}) };
}
