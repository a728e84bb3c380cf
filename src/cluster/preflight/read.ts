/**
 * `prestage preflight`'s inputs, read from the cluster, then its answer: the nodes and what each
 * set targets (the backend's own selection), what each node stores (its agent's CRI listing in
 * NodePinnedImages `status.held`; without an agent, the prestage sets done on it, said as an
 * assumption), its space (the agent's free bytes and reserve, or allocatable ephemeral storage),
 * what the in-cluster cache holds (the images its warm Lease records), the cap and the windows.
 * Every figure from the cluster is checked before it counts: a node's status is input from outside.
 */
import { MAX_HELD_IMAGES, type NodePinnedImages } from '../../api/prestage.js';
import { PREFLIGHT_API_VERSION, type Preflight } from '../../api/preflight.js';
import { CACHE_NAME, CACHE_WARM_LEASE, CACHE_WARMED_ANNOTATION } from '../../api/names.js';
import { linkRateOf, scheduleOf, type StagingSchedule } from '../../api/staging.js';
import type { DesiredSet, PinningBackend } from '../backend.js';
import type { KubeClient, KubeList, KubeObject } from '../../kube/client.js';
import { parseQuantity } from '../../kube/quantity.js';
import { AGENT_PATHS } from '../agent/backend.js';
import { pinnedOnNodes, setsPathOf } from '../release-lifecycle.js';
import { ExitCode, PrestageError, BadInputError } from '../../errors.js';
import { MANAGED_BY_LABEL, ROLE_ANNOTATION } from '../../api/set-metadata.js';
import type { SetRole } from '../../plan/types.js';
import { mcoPace, predictMcoNodes } from '../mco/pace.js';
import { runningVersion } from '../mco/pace-work.js';
import { nodeFigures, type ModelImage, type ModelNode } from './model.js';
import { stagingEta } from './eta.js';
import { count } from '../../plural.js';

const DIGEST_PULLSPEC = /^[^\s@]{1,400}@(sha256:[a-f0-9]{64})$/;
/** The agent's `--reserve` default, for agents that do not report theirs. */
const AGENT_DEFAULT_RESERVE = 16 * 2 ** 30;
/** The warm record's bound (agent/cache-warm.ts keeps fewer). */
const MAX_WARM_KEYS = 10_000;

export interface PreflightRequest {
  /** The sets to check: about to be applied (a plan's), or on the cluster already (by name). */
  readonly sets: readonly DesiredSet[];
  readonly applied: boolean;
  /** Every image of the sets, measured. */
  readonly images: readonly ModelImage[];
  /** Layer digests (bottom first) of stored images the plan did not measure; unread ones are named. */
  readonly readLayers: (pullSpecs: readonly string[]) => Promise<{ readonly layers: ReadonlyMap<string, readonly string[]>; readonly unread: readonly string[] }>;
  /** `--link-rate`; else the sets' cap. */
  readonly linkRate?: number;
  /** `--window`; else the sets' windows. */
  readonly schedule?: StagingSchedule;
  /** Through the in-cluster cache in this namespace. */
  readonly cacheNamespace?: string;
  /** The agents' namespace: where the cache's warm Lease is. */
  readonly agentNamespace: string;
  readonly now: number;
}

/** NO-GO: the exit code 1 of a verdict, its reasons the one error line. */
export class PreflightNoGoError extends PrestageError {
  readonly exitCode = ExitCode.failed;
}

/** The prestage sets on the cluster now, as DesiredSets (their annotations carry the cap and windows). */
export async function appliedSets(client: KubeClient, backend: PinningBackend): Promise<DesiredSet[]> {
  const list = await client.get<KubeList<KubeObject & { spec?: { pinnedImages?: Array<{ name?: unknown }> } }>>(await setsPathOf(client, backend), { labelSelector: `${MANAGED_BY_LABEL}=prestage` });
  const sets = list.items.map((object): DesiredSet => {
    const annotations = object.metadata.annotations ?? {};
    const role: SetRole = annotations[ROLE_ANNOTATION] === 'control-plane' ? 'control-plane' : 'worker';
    const images = (object.spec?.pinnedImages ?? []).flatMap((entry) => (typeof entry.name === 'string' && DIGEST_PULLSPEC.test(entry.name) ? [entry.name] : []));
    return { name: object.metadata.name, role, labels: object.metadata.labels ?? {}, annotations, images };
  });
  if (!sets.length) throw new BadInputError('no prestage sets on the cluster to check; name a release (or --to VERSION), a plan file or manifests');
  return sets.sort((a, b) => a.name.localeCompare(b.name));
}

interface NodeObject extends KubeObject {
  status?: { allocatable?: Record<string, string> };
}

export async function runPreflight(client: KubeClient, backend: PinningBackend, request: PreflightRequest): Promise<Preflight> {
  const assumptions: string[] = [];
  const nodes = await client.get<KubeList<NodeObject>>('/api/v1/nodes');
  const setsOf = new Map<string, string[]>();
  for (const set of request.sets) {
    for (const node of await backend.targetNodes(request.applied ? set.name : set)) setsOf.set(node, [...(setsOf.get(node) ?? []), set.name]);
  }
  const targeted = nodes.items.filter((node) => setsOf.has(node.metadata.name));
  const statuses = backend.kind === 'agent' ? await agentStatuses(client) : new Map<string, NodePinnedImages['status']>();
  // Without an agent's listing: the images of prestage sets done on the node (a snapshot, read only then: at 1000 nodes it is the largest read).
  const listings = new Map(targeted.map((node) => [node.metadata.name, heldListing(statuses.get(node.metadata.name))]));
  const unlisted = [...listings.values()].some((listing) => !listing);
  const doneOn = new Map(unlisted ? (await pinnedOnNodes(client, backend)).map((entry) => [entry.node, entry.images]) : []);
  const pullSpecOf = new Map<string, string>();
  const modelNodes: ModelNode[] = [];
  const withoutListing: string[] = [];
  const partial: string[] = [];
  for (const node of targeted) {
    const name = node.metadata.name;
    const status = statuses.get(name);
    const listed = listings.get(name);
    const held = listed?.images ?? doneOn.get(name) ?? [];
    if (!listed) withoutListing.push(name);
    else if (listed.count > listed.images.length) partial.push(`${name} (${listed.images.length} of ${listed.count})`);
    const digests = held.flatMap((pullSpec) => {
      const digest = DIGEST_PULLSPEC.exec(pullSpec)?.[1];
      if (digest && !pullSpecOf.has(digest)) pullSpecOf.set(digest, pullSpec);
      return digest ? [digest] : [];
    });
    const allocatable = parseQuantity(node.status?.allocatable?.['ephemeral-storage'] ?? '');
    const filesystem = status?.imageFilesystem;
    const storage: ModelNode['storage'] =
      backend.kind === 'mco'
        ? allocatable !== undefined ? { rule: 'mco', allocatableBytes: allocatable } : { rule: 'unknown' }
        : filesystem && validBytes(filesystem.freeBytes)
          ? { rule: 'agent', freeBytes: filesystem.freeBytes, reserveBytes: validBytes(filesystem.reserveBytes) ? filesystem.reserveBytes! : AGENT_DEFAULT_RESERVE }
          : allocatable !== undefined ? { rule: 'allocatable', allocatableBytes: allocatable } : { rule: 'unknown' };
    if (storage.rule === 'agent' && !validBytes(filesystem?.reserveBytes)) assumptions.push(`${name}: its agent does not report its reserve; the default 16 GiB is assumed`);
    if (storage.rule === 'allocatable') assumptions.push(`${name}: no agent has reported its image filesystem; its allocatable ephemeral storage must hold the new bytes (what stage checks)`);
    if (storage.rule === 'unknown') assumptions.push(`${name}: neither an agent's filesystem figures nor allocatable ephemeral storage: its disk is not checked`);
    modelNodes.push({ name, ...roleOf(node), sets: setsOf.get(name)!, held: [...new Set(digests)], heldFrom: listed ? 'agent' : doneOn.has(name) ? 'sets' : 'none', storage });
  }
  if (withoutListing.length) {
    assumptions.push(`${count(withoutListing.length, 'node')} without an agent's listing of stored images (${withoutListing.slice(0, 5).join(', ')}${withoutListing.length > 5 ? ', ...' : ''}${backend.kind === 'mco' ? ': MCO reports none' : ''}): only the images of prestage sets done there count as stored; the bytes to fetch are an upper bound`);
  }
  if (partial.length) {
    assumptions.push(`${count(partial.length, 'node')} store images their agent does not name (${partial.slice(0, 5).join(', ')}${partial.length > 5 ? ', ...' : ''}: stored by tag only, or past the ${MAX_HELD_IMAGES} an agent names): those count as not stored`);
  }

  const measured = new Set(request.images.map((image) => image.digest));
  const toRead = [...pullSpecOf].filter(([digest]) => !measured.has(digest)).map(([, pullSpec]) => pullSpec);
  const { layers: heldLayers, unread } = toRead.length ? await request.readLayers(toRead) : { layers: new Map(), unread: [] };
  if (unread.length) assumptions.push(`${count(unread.length, 'stored image')} could not be read from the registry (${unread[0]}${unread.length > 1 ? ', ...' : ''}): their layers count as not stored`);

  const cache = request.cacheNamespace ? await cacheHolding(client, request.cacheNamespace, request.agentNamespace, assumptions) : undefined;
  const figures = nodeFigures({ images: request.images, sets: request.sets, nodes: modelNodes, heldLayers, ...(cache ? { cache: { images: cache.images } } : {}) });

  const reasons = figures.nodes.flatMap((node) => node.reasons);
  if (reasons.length) assumptions.push('a set refused for its disk pulls nothing: its bytes count in neither the link total nor the ETA');
  const rate = request.linkRate ?? firstOf(request.sets, (set) => linkRateOf(set.annotations));
  const schedule = request.schedule ?? firstOf(request.sets, (set) => scheduleOf(set.annotations));
  let eta: Preflight['eta'];
  if (rate !== undefined) {
    let floorSeconds = 0;
    if (backend.kind === 'mco') {
      const masters = new Set(targeted.filter((node) => roleOf(node).role === 'control-plane').map((node) => node.metadata.name));
      const works = figures.nodes.map((node) => ({ node: node.node, master: masters.has(node.node), images: node.images - node.present, compressedBytes: node.fetchBytes }));
      floorSeconds = Math.max(0, ...predictMcoNodes(works, mcoPace(await runningVersion(client)), rate).map((prediction) => prediction.seconds));
    }
    const result = stagingEta({ linkBytes: figures.linkBytes, bytesPerSecond: rate, rateFrom: 'cap', serialImages: backend.kind === 'agent' ? Math.max(0, ...figures.nodes.map((node) => node.pulls)) : 0, floorSeconds, ...(schedule ? { schedule } : {}), now: request.now });
    eta = result.eta;
    if (result.reason) reasons.push(result.reason);
  } else {
    // Measured on the test bed: 146 images at 4 pulls at once took 17 % more than each layer once.
    assumptions.push('no link cap (--link-rate, or the sets\' prestage.dev/link-rate): no ETA (give the link\'s rate with --link-rate for one), and the agents pull several images at once, so a layer two of them share may cross once per pull in flight (CRI-O fetches per pull); under a cap each crosses once');
  }
  return {
    apiVersion: PREFLIGHT_API_VERSION,
    kind: 'Preflight',
    time: new Date(request.now).toISOString().replace(/\.\d+Z$/, 'Z'),
    backend: backend.kind,
    verdict: reasons.length ? 'NO-GO' : 'GO',
    reasons,
    sets: request.sets.map((set) => set.name),
    nodes: figures.nodes,
    totals: { nodes: figures.nodes.length, fetchBytes: figures.fetchBytes, linkBytes: figures.linkBytes, writeBytes: figures.writeBytes },
    ...(cache ? { cache: { name: cache.name, heldImages: cache.images.size } } : {}),
    ...(eta ? { eta } : {}),
    assumptions,
  };
}

/** Each node's agent status, by node name; none when the CRD is not served. */
async function agentStatuses(client: KubeClient): Promise<Map<string, NodePinnedImages['status']>> {
  const list = await client.find<KubeList<NodePinnedImages & KubeObject>>(AGENT_PATHS.nodePinnedImages);
  return new Map((list?.items ?? []).map((item) => [item.spec?.nodeName ?? item.metadata.name, item.status]));
}

/** The agent's listing, when it is well formed (the CRD bounds it; an older agent has none). */
function heldListing(status: NodePinnedImages['status']): { count: number; images: string[] } | undefined {
  const held = status?.held;
  if (!held || !Number.isSafeInteger(held.count) || held.count < 0 || !Array.isArray(held.images) || held.images.length > MAX_HELD_IMAGES) return undefined;
  const images = held.images.filter((image): image is string => typeof image === 'string' && DIGEST_PULLSPEC.test(image));
  return { count: Math.max(held.count, images.length), images };
}

/** The images the cache's warm Lease records (warmed whole by one node before the others pulled). */
async function cacheHolding(client: KubeClient, namespace: string, agentNamespace: string, assumptions: string[]): Promise<{ name: string; images: Set<string> } | undefined> {
  const name = `${namespace}/${CACHE_NAME}`;
  const service = await client.find<KubeObject>(`/api/v1/namespaces/${encodeURIComponent(namespace)}/services/${CACHE_NAME}`);
  if (!service) {
    assumptions.push(`no cache ${name}: every node fetches over the link`);
    return undefined;
  }
  const lease = await client.find<KubeObject>(`/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(agentNamespace)}/leases/${CACHE_WARM_LEASE}`);
  const images = new Set<string>();
  try {
    const record = JSON.parse(lease?.metadata.annotations?.[CACHE_WARMED_ANNOTATION] ?? '{}') as { keys?: unknown };
    for (const key of Array.isArray(record.keys) ? record.keys.slice(-MAX_WARM_KEYS) : []) {
      const digest = typeof key === 'string' ? /@(sha256:[a-f0-9]{64})$/.exec(key)?.[1] : undefined;
      if (digest) images.add(digest);
    }
  } catch {
    assumptions.push(`Lease ${CACHE_WARM_LEASE}: its ${CACHE_WARMED_ANNOTATION} annotation is not JSON; the cache counts as empty`);
  }
  assumptions.push(`through ${name}: each blob crosses the link once per repository; the cache holds the ${count(images.size, 'image')} its warm Lease records (a warm that failed is recorded too, an eviction is not)`);
  return { name, images };
}

function roleOf(node: KubeObject): { role?: string } {
  const labels = node.metadata.labels ?? {};
  if ('node-role.kubernetes.io/control-plane' in labels || 'node-role.kubernetes.io/master' in labels) return { role: 'control-plane' };
  return { role: 'worker' };
}

function validBytes(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function firstOf<T>(sets: readonly DesiredSet[], read: (set: DesiredSet) => T | undefined): T | undefined {
  for (const set of sets) {
    const value = read(set);
    if (value !== undefined) return value;
  }
  return undefined;
}
