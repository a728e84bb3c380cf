/** metav1.LabelSelector semantics, for matching a PinnedImageSet's nodeSelector against a Node. */
import type { V1LabelSelector } from '@kubernetes/client-node';

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
