/**
 * What both backends share: sets are applied server-side to one collection, and progress is
 * a pure projection of a few watched collections (sets, nodes, per-node status objects).
 * A backend supplies the paths and the projection; this module does apply, list and watch.
 */
import { ClusterError } from '../errors.js';
import { FIELD_MANAGER, type ApplyOutcome, type BackendKind, type DesiredSet, type PinningBackend, type ProgressSnapshot, type WatchOptions } from './backend.js';
import { Informer } from '../kube/informer.js';
import { KubeApiError, type KubeClient, type KubeList, type KubeObject } from '../kube/client.js';
import { PAUSED_ROLE_ANNOTATION } from '../api/staging.js';
import { POOL_ROLE_LABEL } from '../plan/assemble.js';

/** The watched collections by path, each as name → object. */
export type ClusterView = ReadonlyMap<string, ReadonlyMap<string, KubeObject>>;

export interface BackendSpec {
  readonly kind: BackendKind;
  /** Collection path of the backend's set objects. */
  readonly setsPath: string;
  toObject(set: DesiredSet): KubeObject;
  /** Images of a set object (for the apply diff). */
  imagesOf(object: KubeObject): string[];
  /** Every collection `project` reads, the sets' included. */
  readonly collections: readonly string[];
  project(view: ClusterView, sets: readonly string[] | undefined): ProgressSnapshot;
  /**
   * Sees every object as a watch delivers it, before changes are batched into one projection:
   * for what a status shows only for a moment (MCO's entry error between two syncs).
   */
  observe?(path: string, object: KubeObject): void;
}

export function observedBackend(client: KubeClient, spec: BackendSpec): PinningBackend {
  const backend: PinningBackend = {
    kind: spec.kind,
    apply: (sets, { dryRun }) => applySets(client, spec, sets, dryRun),
    async targetNodes(set) {
      const view = await listView(client, spec);
      // A set not applied yet is projected as if it were, so `stage` can check disks first.
      if (typeof set !== 'string') view.get(spec.setsPath)!.set(set.name, spec.toObject(set));
      const name = typeof set === 'string' ? set : set.name;
      return spec.project(view, [name]).sets[0]?.nodes.map((n) => n.node) ?? [];
    },
    async snapshot(sets) {
      return spec.project(await listView(client, spec), sets);
    },
    async watch(sets, onSnapshot, options: WatchOptions) {
      let started = false;
      let pending: NodeJS.Timeout | undefined;
      const publish = () => {
        pending = undefined;
        if (!options.signal.aborted) onSnapshot(spec.project(viewOf(informers), sets));
      };
      // A fleet writes hundreds of status updates a second: project once per batch of
      // changes (at most COALESCE_MS late), not once per event. Changes during the initial
      // lists are folded into the first snapshot.
      const changed = () => {
        if (started && !pending) pending = setTimeout(publish, COALESCE_MS);
      };
      options.signal.addEventListener('abort', () => clearTimeout(pending), { once: true });
      const informers = spec.collections.map(
        (path) => new Informer(client, path, {
          onChange: changed,
          slim: (object) => {
            spec.observe?.(path, object);
            return path === NODES_PATH ? slimNode(object) : dropManagedFields(object);
          },
          ...(options.onRetry ? { onRetry: options.onRetry } : {}),
        }),
      );
      await Promise.all(informers.map((informer) => informer.start(options.signal)));
      started = true;
      publish();
    },
  };
  return backend;
}

async function listView(client: KubeClient, spec: BackendSpec): Promise<Map<string, Map<string, KubeObject>>> {
  const lists = await Promise.all(spec.collections.map((path) => client.get<KubeList>(path)));
  return new Map(spec.collections.map((path, i) => [path, new Map(lists[i]!.items.map((o) => [o.metadata.name, o]))]));
}

const COALESCE_MS = 100;
const NODES_PATH = '/api/v1/nodes';

/** Backends read a Node's name and labels only; real Nodes carry image lists and more. */
function slimNode(node: KubeObject): KubeObject {
  const { name, labels, resourceVersion } = node.metadata;
  return { metadata: { name, ...(labels ? { labels } : {}), ...(resourceVersion ? { resourceVersion } : {}) } };
}

function dropManagedFields(object: KubeObject): KubeObject {
  const { managedFields: _managedFields, ...metadata } = object.metadata;
  return { ...object, metadata: metadata as KubeObject['metadata'] };
}

function viewOf(informers: readonly Informer[]): ClusterView {
  return new Map(informers.map((informer) => [informer.path, informer.items]));
}

async function applySets(client: KubeClient, spec: BackendSpec, sets: readonly DesiredSet[], dryRun: boolean | 'client'): Promise<ApplyOutcome[]> {
  const outcomes: ApplyOutcome[] = [];
  for (const set of sets) {
    const path = `${spec.setsPath}/${encodeURIComponent(set.name)}`;
    const before = await client.find<KubeObject>(path);
    const wanted = keptPaused(spec.toObject(set), before);
    if (dryRun === 'client') {
      // What the apply would leave, merged here: the labels and annotations of others stay.
      outcomes.push(diffSet(set.name, spec, before, before ? mergedLocally(before, wanted) : wanted));
      continue;
    }
    let after: KubeObject;
    try {
      after = await client.apply(path, wanted, { fieldManager: FIELD_MANAGER, dryRun });
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 422) throw new ClusterError(`the cluster refused set ${set.name}: ${error.message}`);
      throw error;
    }
    outcomes.push(diffSet(set.name, spec, before, after));
  }
  return outcomes;
}

/**
 * A client dry run's guess at a server-side apply: the spec's fields, labels and annotations
 * given win, the rest (server defaults, others' keys) stays.
 */
function mergedLocally(before: KubeObject, wanted: KubeObject): KubeObject {
  const metadata = {
    ...before.metadata,
    labels: { ...before.metadata.labels, ...wanted.metadata.labels },
    annotations: { ...before.metadata.annotations, ...wanted.metadata.annotations },
  };
  const spec = { ...(before['spec'] as object | undefined), ...(wanted['spec'] as object | undefined) };
  return { ...before, ...wanted, metadata, spec };
}

/**
 * A set `prestage pause` took from MCO's pools (its role label moved into an annotation) stays
 * paused when applied again: without the label, or the pools would select it and pull at once.
 */
function keptPaused(object: KubeObject, before: KubeObject | undefined): KubeObject {
  const role = before?.metadata.annotations?.[PAUSED_ROLE_ANNOTATION];
  if (role === undefined || !object.metadata.labels?.[POOL_ROLE_LABEL]) return object;
  const { [POOL_ROLE_LABEL]: _role, ...labels } = object.metadata.labels;
  return { ...object, metadata: { ...object.metadata, labels } };
}

function diffSet(name: string, spec: BackendSpec, before: KubeObject | undefined, after: KubeObject): ApplyOutcome {
  const now = new Set(spec.imagesOf(after));
  const was = new Set(before ? spec.imagesOf(before) : []);
  const addedImages = [...now].filter((i) => !was.has(i)).sort();
  const removedImages = [...was].filter((i) => !now.has(i)).sort();
  const changedMetadata = before ? [...changedKeys(before.metadata.labels, after.metadata.labels), ...changedKeys(before.metadata.annotations, after.metadata.annotations)] : [];
  const otherSpecChange = before !== undefined && JSON.stringify(before['spec']) !== JSON.stringify(after['spec']);
  const action = !before ? 'created' : addedImages.length || removedImages.length || changedMetadata.length || otherSpecChange ? 'configured' : 'unchanged';
  return { set: name, action, addedImages, removedImages, changedMetadata };
}

function changedKeys(a: Record<string, string> = {}, b: Record<string, string> = {}): string[] {
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => a[k] !== b[k]).sort();
}
