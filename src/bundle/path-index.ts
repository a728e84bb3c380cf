/**
 * A path's bundles: DIR/prestage-path.json names the hops in the order the cluster takes them
 * and the directory of each hop's bundle (DIR/VERSION), and DIR/graph-data holds the update
 * graph data for an OpenShift Update Service in the disconnected site (channels/CHANNEL.yaml
 * listing the path's releases, blocked-edges for the conditional edges taken, as
 * openshift/cincinnati-graph-data lays them out): OSUS draws the edges from each mirrored
 * release's own metadata and keeps those the channel and the blocked edges allow.
 */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { writeFileAtomic } from '../atomic-file.js';
import { BadInputError } from '../errors.js';
import { PLAN_API_VERSION } from '../plan/types.js';

export const PATH_INDEX_FILE = 'prestage-path.json';
export const GRAPH_DATA_DIR = 'graph-data';
/** The graph-data schema version openshift/cincinnati-graph-data's `version` file holds. */
const GRAPH_DATA_VERSION = '1.1.0';

export interface PathIndex {
  readonly apiVersion: typeof PLAN_API_VERSION;
  readonly kind: 'BundlePath';
  readonly from: string;
  readonly to: string;
  readonly channel: string;
  /** The base of the graph image (graph-image.ts), by digest: carried in the first hop's bundle. */
  readonly graphBase?: string;
  readonly hops: ReadonlyArray<{ readonly from: string; readonly to: string; readonly dir: string; readonly pullSpec: string; readonly risks: ReadonlyArray<{ readonly name: string; readonly message: string; readonly url?: string }> }>;
}

/** A channel name as the update service's channel filter accepts it: also a file name inside graph-data/channels. */
const CHANNEL = /^[0-9a-z][0-9a-z.-]*$/;
/** The index file is a few KiB; a larger one is not ours. */
const MAX_INDEX_BYTES = 1024 * 1024;

/** A risk name from the graph as a file-name part: its letters, digits and dashes only. */
const fileSafe = (name: string) => name.replace(/[^A-Za-z0-9-]/g, '-').slice(0, 100);

/** The index and the graph data, each file written atomically. */
export async function writePathIndex(dir: string, index: PathIndex): Promise<string[]> {
  if (!CHANNEL.test(index.channel)) throw new BadInputError(`channel ${JSON.stringify(index.channel)}: not a channel name (lower-case letters, digits, '.', '-'); name one with --channel`);
  const files = new Map<string, string>([
    [join(GRAPH_DATA_DIR, 'version'), `${GRAPH_DATA_VERSION}\n`],
    [join(GRAPH_DATA_DIR, 'channels', `${index.channel}.yaml`), yaml.dump({ name: index.channel, versions: [index.from, ...index.hops.map((hop) => hop.to)] })],
    ...index.hops.filter((hop) => hop.risks.length > 0).map((hop): [string, string] => [
      join(GRAPH_DATA_DIR, 'blocked-edges', `${hop.to}-${fileSafe(hop.risks[0]!.name)}.yaml`),
      // The risk as the cluster that takes this edge saw it; Always: the disconnected cluster cannot evaluate the upstream's PromQL any better.
      yaml.dump({ to: hop.to, from: `^${hop.from.replace(/\./g, '\\.')}$`, name: hop.risks.map((r) => r.name).join(', '), message: hop.risks.map((r) => r.message).join(' '), url: hop.risks[0]!.url ?? '', matchingRules: [{ type: 'Always' }] }),
    ]),
    [PATH_INDEX_FILE, `${JSON.stringify(index, null, 2)}\n`],
  ]);
  for (const [file, text] of files) await writeFileAtomic(join(dir, file), text);
  return [...files.keys()];
}

/** The index of a path's bundles in `dir`, or undefined when `dir` is one bundle. */
export async function readPathIndex(dir: string): Promise<PathIndex | undefined> {
  const file = join(dir, PATH_INDEX_FILE);
  let size: number;
  try {
    const info = await stat(file);
    if (!info.isFile()) return undefined;
    size = info.size;
  } catch {
    return undefined;
  }
  const fail = (what: string): never => {
    throw new BadInputError(`${file}: ${what}; not a prestage path index (create it again with bundle create --from --to)`);
  };
  if (size > MAX_INDEX_BYTES) fail(`${size} bytes, over the ${MAX_INDEX_BYTES}-byte bound for it`);
  let doc: Partial<PathIndex>;
  try {
    doc = JSON.parse(await readFile(file, 'utf8')) as Partial<PathIndex>;
  } catch {
    return fail('not JSON');
  }
  if (doc.kind !== 'BundlePath' || !Array.isArray(doc.hops) || doc.hops.length === 0) fail('no hops');
  if (typeof doc.channel !== 'string' || !CHANNEL.test(doc.channel)) fail(`its channel ${JSON.stringify(doc.channel)} is not a channel name`);
  for (const hop of doc.hops!) {
    // Each hop's directory is a name inside DIR, never a path out of it.
    if (typeof hop?.dir !== 'string' || !/^[0-9A-Za-z][0-9A-Za-z.+-]*$/.test(hop.dir)) fail(`a hop's dir ${JSON.stringify(hop?.dir)} is not a version directory inside ${dir}`);
  }
  return doc as PathIndex;
}
