/**
 * On OpenShift, nodes pull through the in-cluster cache the way the platform wires mirrors: an
 * ImageDigestMirrorSet `prestage-cache` (the MCO renders it into every node's registries.conf; a
 * digest mirror is used for digest pulls only, which is all prestage pins, and
 * `AllowContactingSource` keeps the upstream after it), plus the cache's address in the cluster
 * Image config's `registrySources.insecureRegistries` (it serves plain HTTP; the MCO marks the
 * mirror `insecure` from that list) and, where the cluster restricts `allowedRegistries`, there too.
 * The MCO backend has no prestage agent to write a drop-in: this is its `--cache-mirror`.
 *
 * The Image config is shared and its lists are atomic (a server-side apply would replace them
 * whole), so it is changed by read-modify-write with the resourceVersion as precondition, adding
 * only the cache's address; what was added is recorded on the mirror set and exactly that is
 * taken out again when the cache is turned off.
 */
import { ClusterError } from '../errors.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
import { applyInMode, dryRunWords, type DryRunMode, type Manifest } from './apply.js';
import { CACHE_NAME } from '../api/names.js';
import { CACHE_MIRROR_SET_NAME } from '../api/names.js';

const GROUP_VERSION = '/apis/config.openshift.io/v1';
const MIRROR_SETS = `${GROUP_VERSION}/imagedigestmirrorsets`;
const IMAGE_CONFIG = `${GROUP_VERSION}/images/cluster`;
/** On the mirror set: the entries prestage added to the Image config, to take out exactly those. */
export const IMAGE_CONFIG_ADDED_ANNOTATION = 'prestage.dev/image-config-added';
const CONFLICT_ATTEMPTS = 5;

export interface RegistrySources {
  insecureRegistries?: string[];
  allowedRegistries?: string[];
  blockedRegistries?: string[];
  [other: string]: unknown;
}

/** What prestage put into the Image config's registrySources. */
export interface AddedEntries {
  readonly insecureRegistries: readonly string[];
  readonly allowedRegistries: readonly string[];
}

const NOTHING: AddedEntries = { insecureRegistries: [], allowedRegistries: [] };

export function cacheMirrorSet(upstream: string, location: string, added: AddedEntries): Manifest {
  return {
    apiVersion: 'config.openshift.io/v1',
    kind: 'ImageDigestMirrorSet',
    metadata: {
      name: CACHE_MIRROR_SET_NAME,
      labels: { 'app.kubernetes.io/name': CACHE_NAME, 'app.kubernetes.io/managed-by': 'prestage' },
      annotations: { [IMAGE_CONFIG_ADDED_ANNOTATION]: JSON.stringify(added) },
    },
    spec: { imageDigestMirrors: [{ source: upstream, mirrors: [location], mirrorSourcePolicy: 'AllowContactingSource' }] },
  };
}

/**
 * The registry sources with `location` insecure (and allowed, where a list of allowed registries
 * exists), and without what an earlier run added for another address. Pure.
 */
export function withCacheRegistry(sources: RegistrySources, location: string, before: AddedEntries): { sources: RegistrySources; added: AddedEntries } {
  const host = location.split('/')[0]!;
  const stale = (list: readonly string[]) => (entry: string) => entry !== host && list.includes(entry);
  const insecure = (sources.insecureRegistries ?? []).filter((entry) => !stale(before.insecureRegistries)(entry));
  const addedInsecure = insecure.includes(host) && !before.insecureRegistries.includes(host) ? [] : [host];
  if (!insecure.includes(host)) insecure.push(host);
  const next: RegistrySources = { ...sources, insecureRegistries: insecure };
  let addedAllowed: string[] = [];
  if (sources.allowedRegistries) {
    const allowed = sources.allowedRegistries.filter((entry) => !stale(before.allowedRegistries)(entry));
    addedAllowed = allowed.includes(host) && !before.allowedRegistries.includes(host) ? [] : [host];
    if (!allowed.includes(host)) allowed.push(host);
    next.allowedRegistries = allowed;
  }
  return { sources: next, added: { insecureRegistries: addedInsecure, allowedRegistries: addedAllowed } };
}

/** The registry sources without what prestage added. Pure. */
export function withoutCacheRegistry(sources: RegistrySources, added: AddedEntries): RegistrySources {
  const next: RegistrySources = { ...sources };
  if (sources.insecureRegistries) next.insecureRegistries = sources.insecureRegistries.filter((entry) => !added.insecureRegistries.includes(entry));
  if (sources.allowedRegistries) next.allowedRegistries = sources.allowedRegistries.filter((entry) => !added.allowedRegistries.includes(entry));
  return next;
}

/** Whether the cluster serves ImageDigestMirrorSets (OpenShift 4.13+). */
export async function servesMirrorSets(client: KubeClient): Promise<boolean> {
  const resources = await client.find<{ resources?: Array<{ name: string }> }>(GROUP_VERSION);
  return resources?.resources?.some((resource) => resource.name === 'imagedigestmirrorsets') ?? false;
}

/** Wires the nodes to the cache at `location` for `upstream`; returns what it did, one line each. */
export async function applyCacheMirrorSet(client: KubeClient, upstream: string, location: string, mode: DryRunMode = 'none'): Promise<string[]> {
  const before = addedBy(await client.find<KubeObject>(`${MIRROR_SETS}/${CACHE_MIRROR_SET_NAME}`));
  // Insecure first: the MCO must never render the plain-HTTP mirror as a TLS one.
  const { added, line } = await editImageConfig(client, (sources) => {
    const edit = withCacheRegistry(sources, location, before);
    return { sources: edit.sources, result: edit.added };
  }, mode);
  const [applied] = await applyInMode(client, [cacheMirrorSet(upstream, location, added)], mode);
  return [line, `${applied}: ${upstream} digest pulls through ${location} first`];
}

/** Takes the mirror set and the Image config entries it recorded out again; nothing when there is none. */
export async function removeCacheMirrorSet(client: KubeClient, mode: DryRunMode = 'none'): Promise<string[]> {
  const existing = await client.find<KubeObject>(`${MIRROR_SETS}/${CACHE_MIRROR_SET_NAME}`);
  if (!existing) return [];
  const added = addedBy(existing);
  if (mode !== 'client') {
    await client.request('DELETE', `${MIRROR_SETS}/${CACHE_MIRROR_SET_NAME}`, { query: { dryRun: mode === 'server' ? 'All' : undefined } }).catch((error: unknown) => {
      if (!(error instanceof KubeApiError && error.status === 404)) throw error;
    });
  }
  const lines = [`imagedigestmirrorset/${CACHE_MIRROR_SET_NAME} deleted${dryRunWords(mode)}`];
  if (added.insecureRegistries.length + added.allowedRegistries.length > 0) {
    lines.push((await editImageConfig(client, (sources) => ({ sources: withoutCacheRegistry(sources, added), result: added }), mode)).line);
  }
  return lines;
}

function addedBy(mirrorSet: KubeObject | undefined): AddedEntries {
  const text = mirrorSet?.metadata.annotations?.[IMAGE_CONFIG_ADDED_ANNOTATION];
  if (!text) return NOTHING;
  try {
    const parsed = JSON.parse(text) as Partial<AddedEntries>;
    const strings = (value: unknown) => (Array.isArray(value) ? value.filter((entry): entry is string => typeof entry === 'string') : []);
    return { insecureRegistries: strings(parsed.insecureRegistries), allowedRegistries: strings(parsed.allowedRegistries) };
  } catch {
    return NOTHING;
  }
}

interface ImageConfig extends KubeObject {
  spec?: { registrySources?: RegistrySources; [other: string]: unknown };
}

/** Read, edit, write with the resourceVersion read as precondition; again on a conflict. */
async function editImageConfig<T>(client: KubeClient, edit: (sources: RegistrySources) => { sources: RegistrySources; result: T }, mode: DryRunMode): Promise<{ added: T; line: string }> {
  for (let attempt = 1; ; attempt++) {
    const config = await client.find<ImageConfig>(IMAGE_CONFIG);
    if (!config) throw new ClusterError('images.config.openshift.io/cluster does not exist: the cluster Image config is where the cache is marked insecure; is this OpenShift?');
    const sources = config.spec?.registrySources ?? {};
    const { sources: next, result } = edit(sources);
    const line = `images.config.openshift.io/cluster: registrySources.insecureRegistries ${JSON.stringify(next.insecureRegistries ?? [])}${next.allowedRegistries ? `, allowedRegistries ${JSON.stringify(next.allowedRegistries)}` : ''}`;
    if (JSON.stringify(next) === JSON.stringify(sources)) return { added: result, line: `${line} (unchanged)` };
    if (mode === 'client') return { added: result, line: `${line}${dryRunWords(mode)}` };
    try {
      // A merge patch replaces the lists whole; the resourceVersion makes it fail (409) if another writer came first.
      await client.request('PATCH', IMAGE_CONFIG, {
        query: { dryRun: mode === 'server' ? 'All' : undefined },
        body: { metadata: { resourceVersion: config.metadata.resourceVersion }, spec: { registrySources: next } },
        contentType: 'application/merge-patch+json',
      });
      return { added: result, line: `${line}${dryRunWords(mode)}` };
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 409 && attempt < CONFLICT_ATTEMPTS) continue;
      throw error;
    }
  }
}
