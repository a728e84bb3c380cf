/**
 * What OLM shows of a live cluster's operators, read-only (planned by plan/live-operators.ts):
 * - OLM v0 (operators.coreos.com/v1alpha1, operator-framework/api): Subscriptions, CatalogSources,
 *   and the ClusterServiceVersions that are not copies (label `olm.copiedFrom`, as OLM's
 *   openshift/helpers.go selects them; status.reason Copied dropped too), with olm.maxOpenShiftVersion
 *   read from the `operatorframework.io/properties` annotation as OLM reads it;
 * - OLM v1 (olm.operatorframework.io/v1, operator-controller): ClusterCatalogs and ClusterExtensions,
 *   each extension with the catalogs its selector admits (Unavailable ones left out).
 * A resource discovery does not list is not served: no operators of it; a refusal names the RBAC. Everything
 * read is checked (types, lengths, counts); an object that cannot be used is left out with a warning.
 */
import { KubeApiError, matchesSelector, type KubeClient, type KubeObject, type LabelSelector } from '../kube/client.js';
import type { Toleration } from '../catalog/declcfg.js';
import type { LiveCatalogSource, LiveClusterCatalog, LiveCsv, LiveExtension, LiveOperators, LiveSubscription } from '../plan/live-olm.js';
import { LIVE_OPERATORS_RBAC } from './live-cluster-help.js';
import { listAll, read, type ListOptions } from './live-reads.js';

const V0 = '/apis/operators.coreos.com/v1alpha1';
const V1 = '/apis/olm.operatorframework.io/v1';
const PROPERTIES_ANNOTATION = 'operatorframework.io/properties';
const MAX_OPEN_SHIFT_VERSION = 'olm.maxOpenShiftVersion';
/** Selector entries, tolerations, channels: more than any real object carries. */
const MAX_ENTRIES = 64;

type Item = Record<string, unknown>;

const record = (v: unknown): Item | undefined => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Item) : undefined);
const text = (v: unknown, max = 4096): string | undefined => (typeof v === 'string' && v !== '' && v.length <= max ? v : undefined);
const at = (v: unknown, ...path: string[]): unknown => path.reduce<unknown>((o, k) => record(o)?.[k], v);
/** `{ field: value }` when there is a value. */
const optional = <K extends string>(field: K, value: string | undefined): Partial<Record<K, string>> => (value ? ({ [field]: value } as Record<K, string>) : {});

function stringMap(v: unknown): Record<string, string> | undefined {
  const entries = Object.entries(record(v) ?? {});
  if (!record(v) || entries.length > MAX_ENTRIES || entries.some(([, value]) => typeof value !== 'string')) return undefined;
  return Object.fromEntries(entries) as Record<string, string>;
}

function tolerations(v: unknown): Toleration[] | undefined {
  if (!Array.isArray(v) || v.length > MAX_ENTRIES) return undefined;
  return v.flatMap((t) => {
    const fields = (['key', 'operator', 'value', 'effect'] as const).flatMap((f) => (text(at(t, f), 317) ? [[f, at(t, f) as string] as const] : []));
    return record(t) ? [Object.fromEntries(fields) as Toleration] : [];
  });
}

/**
 * Every item of a resource the cluster may not serve: undefined when discovery (readable by every
 * authenticated user) does not list it, since the API server refuses a list of a resource it does
 * not serve (403) before it would answer 404; a refusal of a served one names the RBAC.
 */
async function listServed<R>(client: KubeClient, groupVersion: string, plural: string, what: string, keep: (item: KubeObject) => R[], options: ListOptions): Promise<R[] | undefined> {
  const discovery = await read(client, () => client.find<{ resources?: Array<{ name?: string }> }>(groupVersion), `get ${groupVersion} (discovery)`, LIVE_OPERATORS_RBAC);
  if (!discovery?.resources?.some((r) => r.name === plural)) return undefined;
  try {
    return await read(client, () => listAll(client, `${groupVersion}/${plural}`, keep, options), what, LIVE_OPERATORS_RBAC);
  } catch (error) {
    // Removed since discovery listed it (a CRD deleted meanwhile).
    if (error instanceof KubeApiError && error.status === 404) return undefined;
    throw error;
  }
}

/** The cluster's operators; undefined when it serves neither OLM v0 nor v1. */
export async function readLiveOperators(client: KubeClient): Promise<LiveOperators | undefined> {
  const warnings: string[] = [];
  const list = <R>(groupVersion: string, plural: string, keep: (item: KubeObject) => R[], max: number, more: ListOptions = {}) =>
    listServed(client, groupVersion, plural, `list ${plural} (${groupVersion.split('/')[2]}) in all namespaces`, keep, { max: { count: max, what: plural }, ...more });
  const subscriptions = await list(V0, 'subscriptions', (i) => subscription(i, warnings), 2000);
  const catalogSources = subscriptions && (await list(V0, 'catalogsources', (i) => catalogSource(i, warnings), 500));
  // CSVs are big (icons, CRD descriptions): small pages.
  const csvs = subscriptions && (await list(V0, 'clusterserviceversions', csv, 5000, { page: 50, labelSelector: '!olm.copiedFrom' }));
  const catalogs = await list(V1, 'clustercatalogs', clusterCatalog, 200);
  const extensions = catalogs && (await list(V1, 'clusterextensions', (i) => extension(i, catalogs, warnings), 1000));
  if (!subscriptions && !catalogs) return undefined;
  return {
    subscriptions: subscriptions ?? [],
    catalogSources: catalogSources ?? [],
    csvs: csvs ?? [],
    extensions: extensions ?? [],
    clusterCatalogs: (catalogs ?? []).map(({ name, image, priority }) => ({ name, image, priority })),
    warnings,
  };
}

function named(item: KubeObject): { namespace: string; name: string } | undefined {
  const namespace = text(at(item, 'metadata', 'namespace'), 253);
  const name = text(at(item, 'metadata', 'name'), 253);
  return namespace && name ? { namespace, name } : undefined;
}

function subscription(item: KubeObject, warnings: string[]): LiveSubscription[] {
  const id = named(item);
  const [pkg, source, sourceNamespace] = ['name', 'source', 'sourceNamespace'].map((f) => text(at(item, 'spec', f), 253));
  if (!id || !pkg || !source || !sourceNamespace) {
    warnings.push(`Subscription ${id ? `${id.namespace}/${id.name}` : '(unnamed)'} names no package, CatalogSource or CatalogSource namespace (spec.name, spec.source, spec.sourceNamespace): left out`);
    return [];
  }
  const nodeSelector = stringMap(at(item, 'spec', 'config', 'nodeSelector'));
  const tolerated = tolerations(at(item, 'spec', 'config', 'tolerations'));
  return [{
    ...id,
    package: pkg,
    source,
    sourceNamespace,
    ...optional('channel', text(at(item, 'spec', 'channel'), 253)),
    ...optional('startingCSV', text(at(item, 'spec', 'startingCSV'), 253)),
    approval: at(item, 'spec', 'installPlanApproval') === 'Manual' ? 'Manual' : 'Automatic',
    ...(nodeSelector || tolerated ? { config: { ...(nodeSelector ? { nodeSelector } : {}), ...(tolerated ? { tolerations: tolerated } : {}) } } : {}),
    ...optional('installedCSV', text(at(item, 'status', 'installedCSV'), 253)),
    ...optional('currentCSV', text(at(item, 'status', 'currentCSV'), 253)),
    ...optional('state', text(at(item, 'status', 'state'), 64)),
  }];
}

function catalogSource(item: KubeObject, warnings: string[]): LiveCatalogSource[] {
  const id = named(item);
  if (!id) return [];
  const state = text(at(item, 'status', 'connectionState', 'lastObservedState'), 64);
  if (state && state !== 'READY') warnings.push(`CatalogSource ${id.namespace}/${id.name} is ${state}: OLM cannot resolve from it now; its Subscriptions' upgrades are planned from its image all the same`);
  return [{
    ...id,
    ...optional('sourceType', text(at(item, 'spec', 'sourceType'), 64)),
    ...optional('image', text(at(item, 'spec', 'image'))),
    ...optional('address', text(at(item, 'spec', 'address'))),
    ...optional('connectionState', state),
  }];
}

function csv(item: KubeObject): LiveCsv[] {
  const id = named(item);
  // A copy OLM put in a target namespace (the label selector may miss one): not an install.
  if (!id || at(item, 'status', 'reason') === 'Copied' || at(item, 'metadata', 'labels', 'olm.copiedFrom') !== undefined) return [];
  const annotation = at(item, 'metadata', 'annotations', PROPERTIES_ANNOTATION);
  return [{
    ...id,
    ...optional('version', text(at(item, 'spec', 'version'), 256)),
    ...optional('phase', text(at(item, 'status', 'phase'), 64)),
    ...maxOpenShiftVersion(typeof annotation === 'string' ? annotation : undefined),
  }];
}

/** OLM's maxOpenShiftVersion(): the property's raw JSON value (quotes and all), or why it cannot be read. */
function maxOpenShiftVersion(annotation: string | undefined): Pick<LiveCsv, 'maxOpenShiftVersion' | 'propertiesError'> {
  if (annotation === undefined) return {};
  let properties: unknown;
  try {
    properties = (JSON.parse(annotation) as { properties?: unknown } | null)?.properties;
  } catch (error) {
    return { propertiesError: `failed to unmarshal properties annotation: ${(error as Error).message}` };
  }
  if (properties !== undefined && properties !== null && !(Array.isArray(properties) && properties.every((p) => record(p) && ['string', 'undefined'].includes(typeof record(p)!.type)))) {
    return { propertiesError: 'failed to unmarshal properties annotation: properties is not a list of {type, value}' };
  }
  const max = ((properties ?? []) as Item[]).filter((p) => p.type === MAX_OPEN_SHIFT_VERSION);
  if (max.length > 1) return { propertiesError: `defining more than one "${MAX_OPEN_SHIFT_VERSION}" property is not allowed` };
  return max[0] ? { maxOpenShiftVersion: max[0].value === undefined ? '' : JSON.stringify(max[0].value) } : {};
}

interface ReadCatalog extends LiveClusterCatalog {
  readonly labels: Readonly<Record<string, string>>;
  readonly available: boolean;
}

function clusterCatalog(item: KubeObject): ReadCatalog[] {
  const name = text(at(item, 'metadata', 'name'), 253);
  const image = text(at(item, 'status', 'resolvedSource', 'image', 'ref')) ?? text(at(item, 'spec', 'source', 'image', 'ref'));
  const priority = at(item, 'spec', 'priority');
  if (!name || !image) return [];
  return [{
    name,
    image,
    priority: Number.isSafeInteger(priority) ? (priority as number) : 0,
    labels: stringMap(at(item, 'metadata', 'labels') ?? {}) ?? {},
    available: at(item, 'spec', 'availabilityMode') !== 'Unavailable',
  }];
}

function selector(v: unknown): LabelSelector | undefined {
  const matchLabels = stringMap(at(v, 'matchLabels') ?? {});
  const expressions = at(v, 'matchExpressions') ?? [];
  if (!matchLabels || !Array.isArray(expressions) || expressions.length > MAX_ENTRIES) return undefined;
  const matchExpressions = expressions.map((e) => ({ key: at(e, 'key'), operator: at(e, 'operator'), values: at(e, 'values') ?? [] }));
  const valid = matchExpressions.every((e) => typeof e.key === 'string' && ['In', 'NotIn', 'Exists', 'DoesNotExist'].includes(e.operator as string) && Array.isArray(e.values) && e.values.every((x) => typeof x === 'string'));
  return valid ? { matchLabels, matchExpressions: matchExpressions as LabelSelector['matchExpressions'] } : undefined;
}

function extension(item: KubeObject, catalogs: readonly ReadCatalog[], warnings: string[]): LiveExtension[] {
  const name = text(at(item, 'metadata', 'name'), 253);
  const source = at(item, 'spec', 'source', 'catalog');
  const packageName = text(at(source, 'packageName'), 253);
  const channels = at(source, 'channels') ?? [];
  const admits = selector(at(source, 'selector') ?? {});
  if (!name || !packageName || at(item, 'spec', 'source', 'sourceType') !== 'Catalog' || !Array.isArray(channels) || channels.length > MAX_ENTRIES || !channels.every((c) => text(c, 253)) || !admits) {
    warnings.push(`ClusterExtension ${name ?? '(unnamed)'} has no catalog source with a package, its channels and selector (spec.source.catalog): left out`);
    return [];
  }
  const policy = at(source, 'upgradeConstraintPolicy');
  const bundle = { name: text(at(item, 'status', 'install', 'bundle', 'name'), 253), version: text(at(item, 'status', 'install', 'bundle', 'version'), 256) };
  return [{
    name,
    packageName,
    channels: channels as string[],
    ...optional('version', text(at(source, 'version'), 1024)),
    ...(policy === 'SelfCertified' || policy === 'CatalogProvided' ? { upgradeConstraintPolicy: policy } : {}),
    catalogs: catalogs.filter((c) => c.available && matchesSelector(c.labels, admits)).map((c) => c.name),
    ...(bundle.name && bundle.version ? { installed: { name: bundle.name, version: bundle.version } } : {}),
  }];
}

/**
 * Per package, the bundle each install of it runs now: each Subscription's installedCSV and each
 * ClusterExtension's installed bundle, '' for one that runs none yet (prune: an operator set whose
 * newest bundle runs everywhere has done its work). Empty when the cluster serves no OLM API.
 */
export async function installedOperatorBundles(client: KubeClient): Promise<Map<string, string[]>> {
  const warnings: string[] = [];
  const subscriptions = (await listServed(client, V0, 'subscriptions', 'list subscriptions (operators.coreos.com) in all namespaces', (i) => subscription(i, warnings), { max: { count: 2000, what: 'subscriptions' } })) ?? [];
  const extensions = (await listServed(client, V1, 'clusterextensions', 'list clusterextensions (olm.operatorframework.io)', (i) => extension(i, [], warnings), { max: { count: 1000, what: 'clusterextensions' } })) ?? [];
  const installed = new Map<string, string[]>();
  const add = (pkg: string, bundle: string | undefined) => installed.set(pkg, [...(installed.get(pkg) ?? []), bundle ?? '']);
  for (const s of subscriptions) add(s.package, s.installedCSV);
  for (const e of extensions) add(e.packageName, e.installed?.name);
  return installed;
}
