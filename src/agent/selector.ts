/**
 * Set selection: metav1.LabelSelector semantics, for matching a PinnedImageSet's nodeSelector
 * against a Node, and the sets a node's agent works on.
 */
import type { V1LabelSelector } from '@kubernetes/client-node';
import type { PinnedImageSet } from '../api/prestage.js';

/** An empty or absent selector selects everything, as for a PinnedImageSet meant for all nodes. */
export function selectorMatches(selector: V1LabelSelector | undefined, labels: Readonly<Record<string, string>>): boolean {
  for (const [key, value] of Object.entries(selector?.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  for (const { key, operator, values = [] } of selector?.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, key);
    const value = labels[key];
    switch (operator) {
      case 'In':
        if (!has || !values.includes(value as string)) return false;
        break;
      case 'NotIn':
        if (has && values.includes(value as string)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        // An operator we do not know selects nothing rather than everything.
        return false;
    }
  }
  return true;
}

/** The sets that select a node with these labels, not being deleted, in name order (the order disk is admitted in). */
export function selectingSets(sets: readonly PinnedImageSet[], labels: Readonly<Record<string, string>>): PinnedImageSet[] {
  return sets.filter((set) => !set.metadata.deletionTimestamp && selectorMatches(set.spec.nodeSelector, labels)).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
}

/** A control-plane node must keep serving the API: it pulls fewer images at once. */
export function isControlPlane(labels: Readonly<Record<string, string>>): boolean {
  return 'node-role.kubernetes.io/control-plane' in labels || 'node-role.kubernetes.io/master' in labels;
}
