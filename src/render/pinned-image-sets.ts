/**
 * Render a plan as PinnedImageSet manifests for the API that will pin them, as one YAML stream
 * or as a GitOps directory with a kustomization.yaml: MCO's `machineconfiguration.openshift.io/v1`
 * (OpenShift 4.19+), its `v1alpha1` (4.16-4.18, TechPreviewNoUpgrade), or prestage's own agent
 * (`prestage.dev/v1alpha1`, with the node selector of the set's role).
 */
import { mkdir, mkdtemp, open, rename, rm, rmdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import yaml from 'js-yaml';
import { writeFileAtomic } from '../atomic-file.js';
import { OutputError, systemErrorText } from '../errors.js';
import { COMPRESSED_BYTES_ANNOTATION, DISK_BYTES_ANNOTATION, OPERATOR_BUNDLES_ANNOTATION, OPERATOR_HEAD_ANNOTATION, ROLE_ANNOTATION, RELEASE_ANNOTATION, RELEASE_DIGEST_ANNOTATION, RELEASE_VERSION_ANNOTATION, RELEASE_VERSION_LABEL, releaseVersionLabel } from '../api/set-metadata.js';
import type { Plan, PlannedSet } from '../plan/types.js';
import type { SetApi } from './output-dir.js';
import { toAgentPinnedImageSet } from '../api/desired-set.js';
import { gitopsFiles, type GitOpsOptions } from './gitops-layout.js';

// The --api choices and the --output-dir check live apart (./output-dir.ts): a command loads
// this module, and the cluster modules it needs, only to render sets.
export { checkOutputDir, SET_APIS, type SetApi } from './output-dir.js';

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
      // The release, so status, ready and prune can answer per version.
      labels: { ...set.labels, 'app.kubernetes.io/managed-by': 'prestage', [RELEASE_VERSION_LABEL]: releaseVersionLabel(plan.release.version) },
      annotations: {
        [RELEASE_ANNOTATION]: plan.release.pullSpec,
        [RELEASE_DIGEST_ANNOTATION]: plan.release.digest,
        [RELEASE_VERSION_ANNOTATION]: plan.release.version,
        [ROLE_ANNOTATION]: set.role,
        [COMPRESSED_BYTES_ANNOTATION]: String(set.compressedBytes),
        [DISK_BYTES_ANNOTATION]: String(set.diskBytes),
        'prestage.dev/size-estimate': set.estimate.method,
        ...(set.operator ? { [OPERATOR_BUNDLES_ANNOTATION]: set.operator.bundles.join(',') } : {}),
        ...(set.operator?.head ? { [OPERATOR_HEAD_ANNOTATION]: set.operator.head } : {}),
      },
    },
    spec: { pinnedImages: set.images.map((name) => ({ name })) },
  };
}

/** A set's object for `api`; the agent's carries the node selector of the set's role. */
export function setObjectFor(plan: Plan, set: PlannedSet, api: SetApi): object {
  if (api === 'mco-v1alpha1') return toPinnedImageSet(plan, set, 'machineconfiguration.openshift.io/v1alpha1');
  if (api === 'prestage') {
    const { metadata } = toPinnedImageSet(plan, set);
    return toAgentPinnedImageSet({ name: set.name, role: set.role, labels: metadata.labels, annotations: metadata.annotations, images: set.images, diskBytes: set.diskBytes });
  }
  return toPinnedImageSet(plan, set);
}

function dump(obj: unknown): string {
  return yaml.dump(obj, { lineWidth: -1, noRefs: true, sortKeys: false });
}

export function renderYaml(plan: Plan, api: SetApi = 'mco'): string {
  return plan.sets.map((s) => `---\n${dump(setObjectFor(plan, s, api))}`).join('');
}

/**
 * One file per set plus kustomization.yaml; returns the files written. All of them are written
 * to a staging directory first, so a failure (a full disk) leaves the directory as it was.
 */
export async function writeGitOpsDir(plan: Plan, dir: string, api: SetApi = 'mco', extra: ReadonlyMap<string, string> = new Map(), gitops?: GitOpsOptions): Promise<string[]> {
  let files: Map<string, string>;
  if (gitops) {
    files = gitopsFiles(plan, api, new Map(plan.sets.map((set) => [`${set.name}.yaml`, setObjectFor(plan, set, api)])), extra, gitops);
  } else {
    // Extra objects (the release's signature ConfigMap) go with the sets, in the kustomization too.
    files = setFiles([plan], api, extra);
  }
  return writeFiles(dir, files);
}

/** Every hop's sets of an upgrade path in one directory (their names carry each hop's version), one kustomization. */
export async function writePathDir(plans: readonly Plan[], dir: string, api: SetApi = 'mco', extra: ReadonlyMap<string, string> = new Map()): Promise<string[]> {
  return writeFiles(dir, setFiles(plans, api, extra));
}

function setFiles(plans: readonly Plan[], api: SetApi, extra: ReadonlyMap<string, string>): Map<string, string> {
  const files = new Map([...plans.flatMap((plan) => plan.sets.map((set) => [`${set.name}.yaml`, dump(setObjectFor(plan, set, api))] as const)), ...extra]);
  files.set('kustomization.yaml', dump({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', resources: [...files.keys()] }));
  return files;
}

async function writeFiles(dir: string, files: ReadonlyMap<string, string>): Promise<string[]> {
  let created: string | undefined;
  let staging: string | undefined;
  try {
    created = await mkdir(dir, { recursive: true });
    staging = await mkdtemp(join(dir, '.prestage-'));
    // Flux's layout has a directory per step.
    for (const sub of new Set([...files.keys()].map(dirname).filter((parent) => parent !== '.'))) {
      await mkdir(join(staging, sub), { recursive: true });
      await mkdir(join(dir, sub), { recursive: true });
    }
    for (const [file, text] of files) await writeFileAtomic(join(staging, file), text);
    for (const file of files.keys()) await rename(join(staging, file), join(dir, file));
    for (const sub of [...new Set([...files.keys()].map(dirname).filter((parent) => parent !== '.'))].reverse()) await rmdir(join(staging, sub)).catch(() => undefined);
    await rmdir(staging);
    // Make the renames durable.
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (error) {
    if (created) await rm(created, { recursive: true, force: true });
    else if (staging) await rm(staging, { recursive: true, force: true });
    throw new OutputError(`cannot write --output-dir ${dir}: ${systemErrorText(error as NodeJS.ErrnoException)}`);
  }
  return [...files.keys()];
}
