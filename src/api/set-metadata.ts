/**
 * The labels and annotations prestage writes on every set it renders, of either API (MCO's or
 * its own): the release it belongs to, its role and sizes. `prestage.dev/` names, read back by
 * the lifecycle commands, the agent's disk check and MCO's pace.
 */

/** Label of every set prestage renders: selectable with `-l prestage.dev/release-version=4.16.3`. */
export const RELEASE_VERSION_LABEL = 'prestage.dev/release-version';
/** The exact version (a label value cannot hold every version string), the pullspec and digest. */
export const RELEASE_VERSION_ANNOTATION = 'prestage.dev/release-version';
export const RELEASE_ANNOTATION = 'prestage.dev/release';
export const RELEASE_DIGEST_ANNOTATION = 'prestage.dev/release-digest';

/** `version` as a label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends. */
export function releaseVersionLabel(version: string): string {
  return version.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 63).replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
}

/** Set annotation (rendered by `prestage plan`): bytes the set's images take on a node's disk. */
export const DISK_BYTES_ANNOTATION = 'prestage.dev/disk-bytes';
/** Set annotation (rendered by `prestage plan`): the set's compressed bytes, what a node downloads for it. */
export const COMPRESSED_BYTES_ANNOTATION = 'prestage.dev/compressed-bytes';
/** Set annotation (rendered by `prestage plan`): the role the set was planned for, where its labels do not say. */
export const ROLE_ANNOTATION = 'prestage.dev/role';
/** An operator's set: the bundles whose images it holds, a comma list (its package: plan/assemble.ts's label). */
export const OPERATOR_BUNDLES_ANNOTATION = 'prestage.dev/operator-bundles';
/** An operator's set: the newest bundle it holds; once the cluster runs it, `prune` deletes the set. */
export const OPERATOR_HEAD_ANNOTATION = 'prestage.dev/operator-head';

/** The label every set prestage writes carries; `status` and `wait` without names use it. */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
