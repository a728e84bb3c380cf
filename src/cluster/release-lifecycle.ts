/**
 * The upgrade lifecycle in release versions, as an admin thinks of it: which release
 * `--to VERSION` means (the updates ClusterVersion offers, read as `oc adm upgrade --to` reads
 * them), which prestage sets belong to which release, whether a release is on every node it
 * targets, and which releases the cluster no longer needs (`prune`).
 */
import { gitopsOwnerOf, type GitOpsOwner } from './gitops-owner.js';
import semver from 'semver';
import { DISK_BYTES_ANNOTATION, OPERATOR_HEAD_ANNOTATION, RELEASE_VERSION_ANNOTATION, RELEASE_VERSION_LABEL } from '../api/set-metadata.js';
import { OPERATOR_PACKAGE_LABEL } from '../plan/assemble.js';
import { BadInputError, ClusterError, ExitCode, PrestageError } from '../errors.js';
import { AGENT_PATHS } from './agent/backend.js';
import { setReady, type NodeSetProgress, type PinningBackend, type ProgressSnapshot } from './backend.js';
import { mcoVersions } from './detect.js';
import { KubeApiError, type KubeClient, type KubeList, type KubeObject } from '../kube/client.js';
import type { ClusterRelease, ClusterVersion } from './live-cluster.js';
import { mcoPaths } from './mco/backend.js';
import { MANAGED_BY_LABEL } from '../api/set-metadata.js';
import { count, plural } from '../plural.js';


/** A coerce for `what` (`--to`, `VERSION`): an OpenShift release version (x.y.z, maybe -rc.N/-ec.N). */
export function parseReleaseVersion(what: string) {
  return (value: string | undefined): string | undefined => {
    if (value === undefined) return undefined;
    if (!semver.valid(value)) throw new BadInputError(`${what} ${value}: not a release version; name one such as 4.16.3`);
    return value;
  };
}

export interface UpdateRisk {
  readonly name: string;
  readonly message: string;
  readonly url?: string;
}

export interface ResolvedUpdate {
  readonly version: string;
  readonly pullSpec: string;
  /** The risks of a conditional update accepted with --allow-not-recommended; empty for a recommended one. */
  readonly risks: readonly UpdateRisk[];
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();
const describeRisk = (risk: UpdateRisk) => `${risk.name}: ${risk.message}${risk.url ? ` (${risk.url})` : ''}`;
/** Release versions in semver order (4.16.3 < 4.16.10); anything else after, by name. */
export const byVersion = (a: string, b: string) => (semver.valid(a) && semver.valid(b) ? semver.compare(a, b) : semver.valid(a) ? -1 : semver.valid(b) ? 1 : a.localeCompare(b));

/**
 * The pullspec of `version` as the cluster offers it: a recommended update
 * (`status.availableUpdates`), or a conditional one (`status.conditionalUpdates`, not
 * recommended: its risks apply) only with `allowNotRecommended`. Anything else is bad input
 * naming what the cluster offers.
 */
export function resolveUpdate(clusterVersion: ClusterVersion, version: string, allowNotRecommended: boolean): ResolvedUpdate {
  const status = clusterVersion.status ?? {};
  const offered = (release: ClusterRelease | undefined): release is ClusterRelease & { version: string; image: string } => !!release?.version && !!release.image;
  const available = (status.availableUpdates ?? []).filter(offered);
  const recommended = available.find((update) => update.version === version);
  if (recommended) return { version, pullSpec: recommended.image, risks: [] };
  const conditional = (status.conditionalUpdates ?? []).filter((update) => offered(update.release) && !available.some((a) => a.version === update.release!.version));
  const update = conditional.find((candidate) => candidate.release!.version === version);
  if (!update) {
    const list = [...available.map((a) => a.version).sort(byVersion), ...conditional.map((c) => `${c.release!.version} (not recommended)`).sort(byVersion)];
    const channel = (clusterVersion['spec'] as { channel?: string } | undefined)?.channel;
    throw new BadInputError(
      `--to ${version}: not an update this cluster offers; it offers ${list.length ? list.join(', ') : 'none'}${channel ? ` in channel ${channel}` : ''} (ClusterVersion status.availableUpdates, status.conditionalUpdates); name one of them, or the release pullspec instead of --to`,
    );
  }
  const risks = (update.risks ?? []).map((risk) => ({ name: risk.name ?? 'unnamed risk', message: oneLine(risk.message ?? ''), ...(risk.url ? { url: risk.url } : {}) }));
  if (!allowNotRecommended) {
    const why = update.conditions?.find((condition) => condition.type === 'Recommended')?.reason;
    throw new BadInputError(`--to ${version}: a conditional update, not recommended for this cluster${why ? ` (${why})` : ''}; risks: ${risks.map(describeRisk).join('; ') || 'none named'}; pass --allow-not-recommended to accept them`);
  }
  return { version, pullSpec: update.release!.image!, risks };
}

/** One line per risk of a conditional update accepted with --allow-not-recommended. */
export function riskLines(update: ResolvedUpdate): string[] {
  return update.risks.map((risk) => `${update.version} is not recommended: ${describeRisk(risk)}`);
}

/** A prestage set as listed: its release, and the bytes it takes on each node it targets. */
export interface ReleaseSet {
  readonly name: string;
  readonly uid?: string;
  readonly resourceVersion?: string;
  readonly version?: string;
  readonly diskBytes?: number;
  /** The GitOps controller that applied it, if one did. */
  readonly gitops?: GitOpsOwner;
  /** An operator's set: its package and the newest bundle it holds. */
  readonly operator?: { readonly package: string; readonly head: string };
}

/** The collection of the backend's set objects. */
export async function setsPathOf(client: KubeClient, backend: PinningBackend): Promise<string> {
  if (backend.kind === 'agent') return AGENT_PATHS.pinnedImageSets;
  const versions = await mcoVersions(client);
  if (!versions) throw new ClusterError('the cluster no longer serves MCO PinnedImageSets');
  return mcoPaths(versions).pinnedImageSets;
}

/** Every set prestage manages (label app.kubernetes.io/managed-by=prestage), by name; never anyone else's. */
export async function listReleaseSets(client: KubeClient, setsPath: string): Promise<ReleaseSet[]> {
  const list = await client.get<KubeList>(setsPath, { labelSelector: `${MANAGED_BY_LABEL}=prestage` });
  return list.items
    .map((object: KubeObject): ReleaseSet => {
      const annotations = object.metadata.annotations ?? {};
      const version = annotations[RELEASE_VERSION_ANNOTATION] ?? object.metadata.labels?.[RELEASE_VERSION_LABEL];
      const diskBytes = Number(annotations[DISK_BYTES_ANNOTATION]);
      return {
        name: object.metadata.name,
        ...(typeof object.metadata['uid'] === 'string' ? { uid: object.metadata['uid'] } : {}),
        ...(object.metadata.resourceVersion ? { resourceVersion: object.metadata.resourceVersion } : {}),
        ...(version ? { version } : {}),
        ...(Number.isFinite(diskBytes) && diskBytes > 0 ? { diskBytes } : {}),
        ...((owner) => (owner ? { gitops: owner } : {}))(gitopsOwnerOf(object.metadata)),
        ...((pkg, head) => (pkg && head ? { operator: { package: pkg, head } } : {}))(object.metadata.labels?.[OPERATOR_PACKAGE_LABEL], annotations[OPERATOR_HEAD_ANNOTATION]),
      };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** Exit 1: a release is not yet on every node its sets target. */
export class ReleaseNotReadyError extends PrestageError {
  readonly exitCode = ExitCode.failed;
}

/** Throws ReleaseNotReadyError naming what is missing; returns the line `ready` prints otherwise. */
export function checkReleaseReady(version: string, snapshot: ProgressSnapshot): string {
  if (!snapshot.sets.length) throw new ReleaseNotReadyError(`NOT READY ${version}: no prestage set of release ${version} on the cluster; stage it (stage --to ${version})`);
  const missing = snapshot.sets.filter((set) => !setReady(set)).flatMap((set) => {
    if (!set.exists) return [`${set.name} not found`];
    if (!set.nodes.length) return [`${set.name} targets no node`];
    return set.nodes.filter((n) => n.phase !== 'done').map((n) => `${set.name} on ${n.node} ${n.phase}${n.imagesTotal ? ` (${n.imagesDone ?? 0}/${n.imagesTotal} images)` : ''}${reason(n)}`);
  });
  if (missing.length) throw new ReleaseNotReadyError(`NOT READY ${version}: ${missing.join(', ')}`);
  const nodes = new Set(snapshot.sets.flatMap((set) => set.nodes.map((n) => n.node)));
  return `READY ${version}: ${count(snapshot.sets.length, 'set')} current on ${nodes.size === 1 ? 'the node' : `all ${nodes.size} nodes`} ${plural(snapshot.sets.length, 'it targets', 'they target')}`;
}

/** What a node reports for a set it has not finished: its error, else why it still works or is silent. */
function reason(n: NodeSetProgress): string {
  const said = n.error ?? n.note ?? n.unreported;
  return said ? `: ${said}` : '';
}

export interface PruneDecision {
  /** The version the cluster runs: the newest history entry, Completed. */
  readonly current: string;
  readonly prune: readonly ReleaseSet[];
  readonly keep: readonly ReleaseSet[];
  /** Why each pruned set goes, by name: an older release, or its operator moved on. */
  readonly why: ReadonlyMap<string, string>;
}

/**
 * Which sets the cluster no longer needs: those of releases older than the one it runs, once
 * its newest history entry is Completed, and operator sets whose operator runs the newest bundle
 * they hold wherever it is installed (`installed`: per package, the bundle each of its
 * Subscriptions and ClusterExtensions runs, '' for one that runs none yet). The current release, newer (staged) ones and sets without a version prestage can
 * order are kept. Undefined, with why, while an update is in progress or the history names no
 * version.
 */
export function decidePrune(clusterVersion: ClusterVersion, sets: readonly ReleaseSet[], installed: ReadonlyMap<string, readonly string[]> = new Map()): PruneDecision | { readonly waiting: string } {
  const newest = clusterVersion.status?.history?.[0];
  if (!newest?.version) return { waiting: 'ClusterVersion status.history names no release version' };
  if (newest.state !== 'Completed') return { waiting: `the update to ${newest.version} is not Completed (history state ${newest.state ?? 'unknown'}); prune once it is` };
  const current = newest.version;
  const why = new Map<string, string>();
  for (const set of sets) {
    if (set.version && semver.valid(set.version) && semver.valid(current) && semver.lt(set.version, current)) why.set(set.name, `release ${set.version} is older than ${current}`);
    else if (set.operator && movedOn(installed.get(set.operator.package) ?? [], set.operator.head)) why.set(set.name, `operator ${set.operator.package} runs ${set.operator.head}, the newest bundle the set holds, wherever it is installed`);
  }
  return { current, prune: sets.filter((set) => why.has(set.name)), keep: sets.filter((set) => !why.has(set.name)), why };
}

/** Every install of the package (each Subscription, each ClusterExtension) runs `head`: none still walks towards it. */
function movedOn(installs: readonly string[], head: string): boolean {
  return installs.length > 0 && installs.every((bundle) => bundle === head);
}

/** Per node, the bytes the sets to prune take there: an upper bound, since layers shared with kept sets stay. */
export function bytesFreedPerNode(prune: readonly ReleaseSet[], snapshot: ProgressSnapshot): Map<string, number> {
  const diskBytes = new Map(prune.map((set) => [set.name, set.diskBytes ?? 0]));
  const freed = new Map<string, number>();
  for (const set of snapshot.sets) for (const node of set.nodes) freed.set(node.node, (freed.get(node.node) ?? 0) + (diskBytes.get(set.name) ?? 0));
  return new Map([...freed].sort(([a], [b]) => a.localeCompare(b)));
}

/** Deletes a set as it was listed: one changed or recreated since is left alone (409), one gone already is fine. */
export async function deleteReleaseSet(client: KubeClient, setsPath: string, set: ReleaseSet, dryRun = false): Promise<'deleted' | 'gone'> {
  try {
    await client.request('DELETE', `${setsPath}/${encodeURIComponent(set.name)}`, {
      // In the body: the API server reads a DELETE's options from its body when it has one, not the query.
      body: { apiVersion: 'v1', kind: 'DeleteOptions', ...(dryRun ? { dryRun: ['All'] } : {}), preconditions: { ...(set.uid ? { uid: set.uid } : {}), ...(set.resourceVersion ? { resourceVersion: set.resourceVersion } : {}) } },
    });
    return 'deleted';
  } catch (error) {
    if (error instanceof KubeApiError && error.status === 404) return 'gone';
    if (error instanceof KubeApiError && error.status === 409) throw new ClusterError(`set ${set.name} changed since prune listed it, so it was not deleted; run prune again`);
    throw error;
  }
}

/** The progress of the sets of release `version` (none: no set of it on the cluster). */
export async function releaseSnapshot(client: KubeClient, backend: PinningBackend, version: string): Promise<ProgressSnapshot> {
  const sets = (await listReleaseSets(client, await setsPathOf(client, backend))).filter((set) => set.version === version);
  return sets.length ? backend.snapshot(sets.map((set) => set.name)) : { sets: [] };
}

/** A prestage set object with its images, as listed from the backend's collection. */
export interface SetWithImages {
  readonly name: string;
  readonly uid?: string;
  readonly version?: string;
  readonly images: string[];
}

/** The backend's prestage sets (and `selector`, if given) with their images, by name. */
export async function listSetsWithImages(client: KubeClient, backend: PinningBackend, selector?: string): Promise<SetWithImages[]> {
  const list = await client.get<KubeList<KubeObject & { spec?: { pinnedImages?: Array<{ name?: string }> } }>>(await setsPathOf(client, backend), {
    labelSelector: [`${MANAGED_BY_LABEL}=prestage`, ...(selector ? [selector] : [])].join(','),
  });
  return list.items
    .map((set) => {
      const version = set.metadata.annotations?.[RELEASE_VERSION_ANNOTATION] ?? set.metadata.labels?.[RELEASE_VERSION_LABEL];
      return {
        name: set.metadata.name,
        ...(typeof set.metadata['uid'] === 'string' ? { uid: set.metadata['uid'] } : {}),
        ...(version ? { version } : {}),
        images: (set.spec?.pinnedImages ?? []).flatMap((i) => (i.name ? [i.name] : [])),
      };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * Per node, the images prestage sets (of any release) pin there now: done on that node. What
 * earlier stages left is on disk, so a new plan does not count it as new bytes.
 */
export async function pinnedOnNodes(client: KubeClient, backend: PinningBackend): Promise<Array<{ node: string; images: string[] }>> {
  const sets = await listSetsWithImages(client, backend);
  if (sets.length === 0) return [];
  const imagesOf = new Map(sets.map((set) => [set.name, set.images]));
  const pinned = new Map<string, Set<string>>();
  for (const set of (await backend.snapshot([...imagesOf.keys()])).sets) {
    for (const node of set.nodes) {
      if (node.phase !== 'done') continue;
      const images = pinned.get(node.node) ?? new Set<string>();
      for (const image of imagesOf.get(set.name) ?? []) images.add(image);
      pinned.set(node.node, images);
    }
  }
  return [...pinned].map(([node, images]) => ({ node, images: [...images].sort() })).sort((a, b) => a.node.localeCompare(b.node));
}
