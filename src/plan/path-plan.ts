/**
 * An upgrade of several hops, planned: one plan per hop's release, exactly as a single release
 * is planned (its sets named by its version), and the union a node holds while the path is
 * staged ahead of the first window. Consecutive releases share most layers, so the union counts
 * each layer (and image config) once per node; `perHop` says what each hop adds to the ones
 * before it. The graph and the choice of path are the graph source's (src/graph/); here a path is
 * a list of releases.
 */
import { PLAN_API_VERSION, type Plan, type PlannedImage, type PlannedNodeBytes, type SetRole } from './types.js';

export const PATH_KIND = 'UpgradePath';

/** One hop as the path chose it. */
export interface PathHopInput {
  readonly from: string;
  readonly to: string;
  /** The release image of `to`, by digest. */
  readonly pullSpec: string;
  /** The risks taken (a conditional edge); empty: recommended. */
  readonly risks: ReadonlyArray<{ readonly name: string; readonly message: string; readonly url?: string }>;
  readonly why: string;
}

export interface PathInput {
  readonly from: string;
  readonly to: string;
  readonly channel?: string;
  /** Where the graph was read. */
  readonly graph: string;
  readonly controlPlaneOnly: boolean;
  readonly hops: readonly PathHopInput[];
  readonly refused: ReadonlyArray<{ readonly from: string; readonly to: string; readonly why: string }>;
  readonly equallyShort: number;
  readonly notes: readonly string[];
}

export interface PlannedHop extends PathHopInput {
  /** A Control Plane Only hop before the last: workers stay paused (no node OS of this release on them). */
  readonly workersPaused: boolean;
  readonly plan: Plan;
}

/** What every hop's sets of a role put on one node, layers shared between hops once. */
export interface PathRoleTotal {
  readonly role: SetRole;
  readonly sets: readonly string[];
  readonly images: number;
  readonly compressedBytes: number;
  readonly diskBytes: number;
  /** Per hop, what it adds on the node to the hops before it. */
  readonly perHop: ReadonlyArray<{ readonly version: string; readonly newCompressedBytes: number; readonly newDiskBytes: number }>;
  /** The sum of the hops' own totals, as if each were staged alone. */
  readonly hopsSummedCompressedBytes: number;
}

export interface PathPlan extends Omit<PathInput, 'hops'> {
  readonly apiVersion: typeof PLAN_API_VERSION;
  readonly kind: typeof PATH_KIND;
  readonly hops: readonly PlannedHop[];
  readonly union: {
    readonly perNode: readonly PathRoleTotal[];
    /** Every blob of every hop once: what crosses the link once when nodes share a cache or mirror. */
    readonly compressedBytes: number;
  };
  readonly warnings: readonly string[];
}

/** What planning one hop needs: its release, and whether the workers sit it out. */
export type PlanHop = (hop: PathHopInput, workersPaused: { until: string } | undefined) => Promise<Plan>;

/** Plans every hop (at once: they share the registry's answers and the layer sizes) and assembles the path. */
export async function planPath(path: PathInput, planHop: PlanHop): Promise<PathPlan> {
  const last = path.hops.length - 1;
  const plans = await Promise.all(path.hops.map((hop, i) => {
    const paused = path.controlPlaneOnly && i < last ? { until: path.hops[last]!.to } : undefined;
    return planHop(hop, paused).then((plan) => ({ ...hop, workersPaused: paused !== undefined, plan }));
  }));
  return assemblePath(path, plans);
}

/** Pure: the path and its hops' plans in, the union out. */
export function assemblePath(path: PathInput, hops: readonly PlannedHop[]): PathPlan {
  const roles: SetRole[] = ['control-plane', 'worker'];
  const perNode = roles.map((role) => roleTotal(role, hops)).filter((total) => total.sets.length > 0);
  const blobs = new Map<string, number>();
  for (const hop of hops) for (const image of hop.plan.images) for (const [digest, bytes] of blobsOf(image)) blobs.set(digest, bytes);
  // A warning every hop gives is said once, naming the hops.
  const hopsOf = new Map<string, string[]>();
  for (const hop of hops) for (const w of new Set(hop.plan.warnings)) hopsOf.set(w, [...(hopsOf.get(w) ?? []), hop.to]);
  const warnings = [...path.notes, ...[...hopsOf].map(([w, versions]) => `${versions.join(', ')}: ${w}`)];
  return {
    apiVersion: PLAN_API_VERSION,
    kind: PATH_KIND,
    ...path,
    hops,
    union: { perNode, compressedBytes: sum([...blobs.values()]) },
    warnings,
  };
}

function roleTotal(role: SetRole, hops: readonly PlannedHop[]): PathRoleTotal {
  const seenBlobs = new Map<string, number>();
  const seenDisk = new Map<string, number>();
  const images = new Set<string>();
  const sets: string[] = [];
  const perHop: Array<PathRoleTotal['perHop'][number]> = [];
  let summed = 0;
  for (const hop of hops) {
    const byPullSpec = new Map(hop.plan.images.map((image) => [image.pullSpec, image]));
    const own = hop.plan.sets.filter((set) => set.role === role);
    sets.push(...own.map((set) => set.name));
    summed += hop.plan.perNode?.find((total) => total.role === role)?.compressedBytes ?? sum(own.map((set) => set.compressedBytes));
    let newCompressed = 0;
    let newDisk = 0;
    for (const pullSpec of new Set(own.flatMap((set) => set.images))) {
      images.add(pullSpec);
      const image = byPullSpec.get(pullSpec);
      if (!image) continue;
      for (const [digest, bytes] of blobsOf(image)) {
        if (seenBlobs.has(digest)) continue;
        seenBlobs.set(digest, bytes);
        newCompressed += bytes;
      }
      for (const layer of image.layers) {
        if (seenDisk.has(layer.digest)) continue;
        seenDisk.set(layer.digest, layer.diskBytes);
        newDisk += layer.diskBytes;
      }
    }
    perHop.push({ version: hop.to, newCompressedBytes: newCompressed, newDiskBytes: newDisk });
  }
  return { role, sets, images: images.size, compressedBytes: sum([...seenBlobs.values()]), diskBytes: sum([...seenDisk.values()]), perHop, hopsSummedCompressedBytes: summed };
}

/**
 * The disk each node needs for the whole path (stage's disk check): per role the union, for the
 * nodes each hop's plan saw. An upper bound: layers the nodes hold now are not taken off.
 */
export function pathNodeBytes(path: PathPlan): PlannedNodeBytes[] {
  return path.union.perNode.flatMap((total) => {
    const nodes = [...new Set(path.hops.flatMap((hop) => (hop.plan.nodes ?? []).filter((entry) => entry.role === total.role).flatMap((entry) => entry.nodes)))].sort();
    if (nodes.length === 0) return [];
    return [{ role: total.role, nodes, sets: total.sets, diskBytes: total.diskBytes, heldDiskBytes: 0, newDiskBytes: total.diskBytes, newCompressedBytes: total.compressedBytes }];
  });
}

/** An image's blobs as pulled: its config and layers, by digest. */
function blobsOf(image: PlannedImage): Array<[string, number]> {
  return [[image.config.digest, image.config.size], ...image.layers.map((layer): [string, number] => [layer.digest, layer.compressedBytes])];
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
