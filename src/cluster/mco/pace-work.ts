/**
 * What MCO's daemons still have to pull, per node, read from the cluster for the pace model:
 * the sets' images (their average size from the set's compressed-bytes annotation), less the
 * images of sets already current on the node, and the MCO release the cluster runs.
 */
import { COMPRESSED_BYTES_ANNOTATION } from '../../api/set-metadata.js';
import type { PinningBackend } from '../backend.js';
import type { KubeClient, KubeList, KubeObject } from '../../kube/client.js';
import { CLUSTER_VERSION, currentRelease, type ClusterVersion } from '../live-cluster.js';
import { mcoPaths, type McoVersions } from './backend.js';
import type { NodeWork } from './pace.js';


/** The release whose MCO runs now (the release the nodes run, as a live plan reads it); undefined off OpenShift. */
export async function runningVersion(client: KubeClient): Promise<string | undefined> {
  const clusterVersion = await client.find<ClusterVersion>(CLUSTER_VERSION).catch(() => undefined);
  return clusterVersion && currentRelease(clusterVersion)?.version;
}

interface SetObject extends KubeObject {
  spec?: { pinnedImages?: Array<{ name?: string }> };
}

/** Per target node of `names` not yet done: the images it lacks and their compressed bytes. */
export async function mcoNodeWork(client: KubeClient, backend: PinningBackend, versions: McoVersions, names: readonly string[] | undefined): Promise<NodeWork[]> {
  const paths = mcoPaths(versions);
  const [sets, nodes, snapshot] = await Promise.all([
    client.get<KubeList<SetObject>>(paths.pinnedImageSets),
    client.get<KubeList<KubeObject>>(paths.nodes),
    backend.snapshot(names),
  ]);
  const byName = new Map(sets.items.map((s) => [s.metadata.name, s]));
  const lacking = new Map<string, Map<string, number>>();
  const held = new Map<string, Set<string>>();
  for (const set of snapshot.sets) {
    const object = byName.get(set.name);
    const images = (object?.spec?.pinnedImages ?? []).flatMap((i) => (i.name ? [i.name] : []));
    const bytes = Number(object?.metadata.annotations?.[COMPRESSED_BYTES_ANNOTATION]);
    const average = images.length && Number.isFinite(bytes) && bytes > 0 ? bytes / images.length : 0;
    for (const node of set.nodes) {
      if (node.phase === 'done') {
        held.set(node.node, new Set([...(held.get(node.node) ?? []), ...images]));
        continue;
      }
      const wanted = lacking.get(node.node) ?? new Map<string, number>();
      for (const image of images) wanted.set(image, Math.max(wanted.get(image) ?? 0, average));
      lacking.set(node.node, wanted);
    }
  }
  const master = new Set(nodes.items.filter((n) => n.metadata.labels?.['node-role.kubernetes.io/master'] !== undefined).map((n) => n.metadata.name));
  return [...lacking]
    .map(([node, images]) => {
      const still = [...images].filter(([image]) => !held.get(node)?.has(image));
      return { node, master: master.has(node), images: still.length, compressedBytes: Math.round(still.reduce((a, [, b]) => a + b, 0)) };
    })
    .sort((a, b) => a.node.localeCompare(b.node));
}
