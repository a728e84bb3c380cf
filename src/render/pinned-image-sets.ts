/**
 * Render a plan as MCO PinnedImageSet manifests (`machineconfiguration.openshift.io/v1`),
 * as one YAML stream or as a GitOps directory with a kustomization.yaml.
 */
import { join } from 'node:path';
import yaml from 'js-yaml';
import { writeFileAtomic } from '../atomic-file.js';
import type { Plan, PlannedSet } from '../plan/types.js';

export const MCO_API_VERSION = 'machineconfiguration.openshift.io/v1';

export interface PinnedImageSetObject {
  apiVersion: string;
  kind: 'PinnedImageSet';
  metadata: { name: string; labels: Record<string, string>; annotations: Record<string, string> };
  spec: { pinnedImages: Array<{ name: string }> };
}

export function toPinnedImageSet(plan: Plan, set: PlannedSet, apiVersion = MCO_API_VERSION): PinnedImageSetObject {
  return {
    apiVersion,
    kind: 'PinnedImageSet',
    metadata: {
      name: set.name,
      labels: { ...set.labels, 'app.kubernetes.io/managed-by': 'prestage' },
      annotations: {
        'prestage.dev/release': plan.release.pullSpec,
        'prestage.dev/release-version': plan.release.version,
        'prestage.dev/role': set.role,
        'prestage.dev/compressed-bytes': String(set.compressedBytes),
        'prestage.dev/disk-bytes': String(set.diskBytes),
        'prestage.dev/size-estimate': set.estimate.method,
      },
    },
    spec: { pinnedImages: set.images.map((name) => ({ name })) },
  };
}

function dump(obj: unknown): string {
  return yaml.dump(obj, { lineWidth: -1, noRefs: true, sortKeys: false });
}

export function renderYaml(plan: Plan): string {
  return plan.sets.map((s) => `---\n${dump(toPinnedImageSet(plan, s))}`).join('');
}

/** One file per set plus kustomization.yaml; returns the files written. */
export async function writeGitOpsDir(plan: Plan, dir: string): Promise<string[]> {
  const files: string[] = [];
  for (const set of plan.sets) {
    const file = `${set.name}.yaml`;
    await writeFileAtomic(join(dir, file), dump(toPinnedImageSet(plan, set)));
    files.push(file);
  }
  const kustomization = {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    resources: files,
  };
  await writeFileAtomic(join(dir, 'kustomization.yaml'), dump(kustomization));
  return [...files, 'kustomization.yaml'];
}
