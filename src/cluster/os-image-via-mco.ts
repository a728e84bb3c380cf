/**
 * The node OS image when prestage's own agent stages an OpenShift cluster. The upgrade's
 * machine-config daemon (the target release's) rebases each node to the new OS image; whether it
 * takes the image from the node's container storage (where the agent put it) or pulls it again
 * depends on its release (pkg/daemon/update.go, updateLayeredOS):
 * - 4.16: always from the registry;
 * - 4.17-4.18: from local storage when the PinnedImages feature gate is on (TechPreviewNoUpgrade);
 * - 4.19-4.22: only when one of the node's pools lists a PinnedImageSet (`isPinnedImageSetConfigured`);
 * - 5.0 (MCO main): whenever the image is present.
 * For 4.19-4.22 one MCO PinnedImageSet per pool holding the OS image makes the pool list a set,
 * and MCO then holds the image too: `--os-image-via-mco` writes it.
 */
import { COMPRESSED_BYTES_ANNOTATION, DISK_BYTES_ANNOTATION } from '../api/set-metadata.js';
import { ClusterError } from '../errors.js';
import { isNodeOsImageName } from '../plan/os-streams.js';
import { majorMinor } from '../plan/release-api.js';
import type { Plan } from '../plan/types.js';
import type { ApplyOutcome, DesiredSet, PinningBackend } from './backend.js';
import { desiredSetsFromPlan, mcoCheckBytes } from './desired-sets.js';
import { mcoVersions } from './detect.js';
import type { KubeClient, KubeList, KubeObject } from '../kube/client.js';
import { CLUSTER_VERSION } from './live-cluster.js';
import { MCO_GROUP, mcoBackend, mcoPaths } from './mco/backend.js';
import { formatBytes } from '../units.js';


export const OS_IMAGE_VIA_MCO_HELP = 'Agent backend on OpenShift 4.19-4.22: also write one MCO PinnedImageSet per pool holding the node OS image, so that the upgrade rebases nodes from their own storage instead of pulling it again';

export type OsRebaseSource = 'registry' | 'local-with-gate' | 'local-if-pool-lists-a-set' | 'local';

export function osRebaseSource(version: string): OsRebaseSource {
  const parsed = majorMinor(version);
  if (!parsed) return 'local-if-pool-lists-a-set';
  const [major, minor] = parsed;
  if (major > 4) return 'local';
  if (minor <= 16) return 'registry';
  if (minor <= 18) return 'local-with-gate';
  return 'local-if-pool-lists-a-set';
}

/** Per set of the plan: MCO's PinnedImageSet of its OS images alone (`<set>-os-image`), same labels. */
export function osImageSets(plan: Plan): DesiredSet[] {
  const osImages = new Set(plan.images.filter((i) => i.source === 'component' && isNodeOsImageName(i.names)).map((i) => i.pullSpec));
  return desiredSetsFromPlan(plan).flatMap((set) => {
    const images = set.images.filter((image) => osImages.has(image));
    if (!images.length) return [];
    const chosen = plan.images.filter((i) => images.includes(i.pullSpec));
    const compressed = chosen.reduce((a, i) => a + i.compressedBytes, 0);
    const disk = chosen.reduce((a, i) => a + i.diskBytes, 0);
    return [{ ...set, name: `${set.name}-os-image`, images, diskBytes: disk, mcoCheckBytes: mcoCheckBytes(plan, images), annotations: { ...set.annotations, [COMPRESSED_BYTES_ANNOTATION]: String(compressed), [DISK_BYTES_ANNOTATION]: String(disk) } }];
  });
}

export interface OsImageInputs {
  readonly plan: Plan;
  /** Pools (by the MCO role label their sets select) that list a PinnedImageSet now; undefined when MCO serves none. */
  readonly poolsListingSets: ReadonlySet<string> | undefined;
  readonly viaMco: boolean;
}

/** What to say, and the MCO sets to write (with --os-image-via-mco); throws when the flag cannot work. */
export function osImageAdvice({ plan, poolsListingSets, viaMco }: OsImageInputs): { warnings: string[]; mcoSets: DesiredSet[] } {
  const sets = osImageSets(plan);
  if (!sets.length) return { warnings: [], mcoSets: [] };
  const version = plan.release.version;
  const source = osRebaseSource(version);
  // What a node downloads again: the OS images' compressed bytes (the largest set's).
  const size = formatBytes(sets.reduce((a, s) => Math.max(a, Number(s.annotations[COMPRESSED_BYTES_ANNOTATION])), 0));
  const refuse = (why: string) => {
    throw new ClusterError(`--os-image-via-mco: ${why}`);
  };
  switch (source) {
    case 'local':
      if (viaMco) refuse(`MCO ${version} rebases from the node's storage whenever the OS image is there; no MCO set is needed (leave the flag out)`);
      return { warnings: [], mcoSets: [] };
    case 'registry':
      if (viaMco) refuse(`MCO ${version} always pulls the OS image from the registry at the upgrade; no set changes that`);
      return { warnings: [`MCO ${version} pulls the node OS image (${size}) from the registry at the upgrade whatever is on the node: staging it saves no download on 4.16`], mcoSets: [] };
    case 'local-with-gate':
      if (viaMco) refuse(`MCO ${version} takes the OS image from the node's storage when the PinnedImages feature gate is on (TechPreviewNoUpgrade), not by pool; no set changes that`);
      return plan.cluster.featureSet === 'TechPreviewNoUpgrade' ? { warnings: [], mcoSets: [] } : { warnings: [`MCO ${version} takes the node OS image (${size}) from the node's storage only with the PinnedImages feature gate (TechPreviewNoUpgrade); this plan's feature set is ${plan.cluster.featureSet}, so nodes pull it again at the upgrade`], mcoSets: [] };
    case 'local-if-pool-lists-a-set': {
      const pools = sets.map((s) => s.labels['machineconfiguration.openshift.io/role'] ?? s.role);
      const bare = pools.filter((pool) => !poolsListingSets?.has(pool));
      if (viaMco) {
        if (poolsListingSets === undefined) refuse('this cluster serves no MCO PinnedImageSets (machineconfiguration.openshift.io); nothing can make its pools list one');
        return { warnings: [], mcoSets: sets };
      }
      if (!bare.length) return { warnings: [], mcoSets: [] };
      return { warnings: [`MCO ${version} rebases a node from its own storage only when the node's pool lists a PinnedImageSet of MCO's; pool${bare.length === 1 ? '' : 's'} ${bare.join(', ')} list${bare.length === 1 ? 's' : ''} none, so ${bare.length === 1 ? 'its' : 'their'} nodes pull the OS image (${size}) again at the upgrade: --os-image-via-mco writes one MCO set per pool holding it`], mcoSets: [] };
    }
  }
}

/**
 * On the agent backend of an OpenShift cluster (one with a ClusterVersion): warns where the
 * upgrade pulls the OS image again, and with `viaMco` applies MCO's sets of it (returned).
 */
export async function stageOsImage(client: KubeClient, backend: PinningBackend, plan: Plan, options: { viaMco: boolean; dryRun: boolean | 'client'; warn: (line: string) => void }): Promise<ApplyOutcome[]> {
  if (backend.kind !== 'agent') {
    if (options.viaMco) throw new ClusterError('--os-image-via-mco: only with the agent backend; on the MCO backend the OS image is in MCO\'s sets already');
    return [];
  }
  if (!(await client.find(CLUSTER_VERSION).catch(() => undefined))) {
    if (options.viaMco) throw new ClusterError(`--os-image-via-mco: ${client.server} has no ClusterVersion (not OpenShift): no MCO rebases its nodes`);
    return [];
  }
  const versions = await mcoVersions(client);
  const pools = versions ? await client.get<KubeList<KubeObject & { spec?: { pinnedImageSets?: unknown[] } }>>(mcoPaths(versions).machineConfigPools) : undefined;
  const poolsListingSets = pools && new Set(pools.items.filter((p) => (p.spec?.pinnedImageSets ?? []).length > 0).map((p) => p.metadata.name));
  const { warnings, mcoSets } = osImageAdvice({ plan, poolsListingSets, viaMco: options.viaMco });
  for (const warning of warnings) options.warn(warning);
  if (!mcoSets.length || !versions) return [];
  const outcomes = await mcoBackend(client, versions).apply(mcoSets, { dryRun: options.dryRun });
  return outcomes.map((o) => ({ ...o, resource: `pinnedimageset.${MCO_GROUP}` }));
}
