/**
 * A set as prestage wants it on a cluster, before a backend turns it into its object, and the
 * prestage.dev object it becomes for prestage's own agent (also what `plan --api prestage` writes).
 */
import type { LabelSelector } from '../kube/client.js';
import type { SetRole } from '../plan/types.js';
import { API_VERSION, type PinnedImageSet } from './prestage.js';
import { DISK_BYTES_ANNOTATION, MANAGED_BY_LABEL } from './set-metadata.js';

/** A set as prestage wants it on the cluster, before a backend turns it into its object. */
export interface DesiredSet {
  readonly name: string;
  readonly role: SetRole;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** Digest pullspecs. */
  readonly images: readonly string[];
  /** Uncompressed bytes the set takes on a node, when the plan knows it. */
  readonly diskBytes?: number;
  /** The compressed layer bytes MCO's disk check counts for the set (each layer once; manifest lists 0), when the plan knows it. */
  readonly mcoCheckBytes?: number;
}

const CONTROL_PLANE = 'node-role.kubernetes.io/control-plane';
const MASTER = 'node-role.kubernetes.io/master';

export function nodeSelectorFor(role: SetRole): LabelSelector {
  return role === 'control-plane'
    ? { matchExpressions: [{ key: CONTROL_PLANE, operator: 'Exists' }] }
    : { matchExpressions: [{ key: CONTROL_PLANE, operator: 'DoesNotExist' }, { key: MASTER, operator: 'DoesNotExist' }] };
}

export function toAgentPinnedImageSet(set: DesiredSet): PinnedImageSet {
  return {
    apiVersion: API_VERSION,
    kind: 'PinnedImageSet',
    metadata: {
      name: set.name,
      labels: { ...set.labels, [MANAGED_BY_LABEL]: 'prestage' },
      annotations: { ...set.annotations, ...(set.diskBytes ? { [DISK_BYTES_ANNOTATION]: String(set.diskBytes) } : {}) },
    },
    spec: { pinnedImages: set.images.map((name) => ({ name })), nodeSelector: nodeSelectorFor(set.role) },
  };
}

