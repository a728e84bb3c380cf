/** `bundle push` of a path's bundles, after the hops: the update graph image and the UpdateService that serves it. */
import { join } from 'node:path';
import { writeFileAtomic } from '../atomic-file.js';
import { pushGraphImage, renderUpdateService, UPDATE_SERVICE_FILE } from '../bundle/graph-image.js';
import { mirrorRepository, parseMirrorTarget } from '../bundle/mirror.js';
import { GRAPH_DATA_DIR, type PathIndex } from '../bundle/path-index.js';
import { parseReference } from '../registry/reference.js';
import { PushClient } from '../registry/upload.js';
import { verifiedReader } from './bundle-signatures.js';
import { transportOptionsFrom, type RegistryFlags } from './registry-options.js';

export interface GraphPushFlags extends RegistryFlags {
  readonly bundle: string;
  readonly target: string;
  readonly 'output-dir': string;
}

/** Lines to print; nothing is pushed for a path bundled without a graph base image. */
export async function pushPathGraph(path: PathIndex, flags: GraphPushFlags, warn: (line: string) => void): Promise<string[]> {
  if (!path.graphBase) return [`no update graph image: the path was bundled with --graph-base-image ''; point ClusterVersion spec.upstream at an update service that knows ${path.channel}`];
  const target = parseMirrorTarget(flags.target);
  const client = new PushClient(target.registry, transportOptionsFrom(flags, undefined, warn));
  try {
    const first = join(flags.bundle, path.hops[0]!.dir);
    const graphImage = await pushGraphImage(client, target, join(flags.bundle, GRAPH_DATA_DIR), { pullSpec: path.graphBase, read: verifiedReader(first) });
    const releases = `${target.registry}/${mirrorRepository(parseReference(path.hops[0]!.pullSpec), target)}`;
    const file = join(flags['output-dir'], UPDATE_SERVICE_FILE);
    await writeFileAtomic(file, renderUpdateService(releases, graphImage));
    return [
      `update graph image ${graphImage} (channel ${path.channel}: ${[path.from, ...path.hops.map((hop) => hop.to)].join(', ')})`,
      `wrote ${file} (UpdateService prestage-update-service for ${releases}); once it reports status.policyEngineURI, set ClusterVersion spec.upstream to that URI + /api/upgrades_info/v1/graph and spec.channel to ${path.channel}`,
    ];
  } finally {
    await client.close();
  }
}
