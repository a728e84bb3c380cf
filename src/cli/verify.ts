/**
 * `prestage verify VERSION`: is every image of every set of the release present AND pinned on
 * every node it targets, as each node's container runtime (CRI) says now?
 *
 * - `--cri-socket PATH` (on a node, or in a debug pod with the host's socket): this node's sets
 *   (those of the release that target it, as the backend selects nodes: the agent's
 *   nodeSelector, MCO's pools), checked with CRI ListImages here. Works on either backend.
 * - Otherwise (agent backend): the release's sets are stamped with a fresh
 *   `prestage.dev/verify-requested`; every agent they select answers with its own ListImages in
 *   its NodePinnedImages `status.verified`, and verify waits (watch) for every targeted node's
 *   answer to THIS request. MCO's daemon makes no per-image check to ask for: run
 *   `--cri-socket` on the node.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Argv } from 'yargs';
import { VERIFY_REQUESTED_ANNOTATION, type NodePinnedImages } from '../api/prestage.js';
import { AGENT_PATHS } from '../cluster/agent/backend.js';
import type { PinningBackend } from '../cluster/backend.js';
import { Informer } from '../kube/informer.js';
import type { KubeClient, KubeList, KubeObject } from '../kube/client.js';
import { RELEASE_VERSION_LABEL, releaseVersionLabel } from '../api/set-metadata.js';
import { listSetsWithImages, parseReleaseVersion } from '../cluster/release-lifecycle.js';
import { CriClient } from '../cri/client.js';
import { BadInputError } from '../errors.js';
import { renderVerifyTable, roleOf, verifySet, verifyVerdict, VerifyTimeoutError, type NodeCheck, type SetImages } from '../verify/verdict.js';
import type { CommandContext } from './context.js';
import { positiveSeconds } from './flag-values.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';

const DEFAULT_CRI_SOCKET = '/var/run/crio/crio.sock';

/** A set of the release, and the nodes it targets now. */
interface ReleaseSetTargets extends SetImages {
  readonly nodes: readonly string[];
}

export function verifyCommand(ctx: CommandContext, scriptName: string) {
  return {
    builder: (y: Argv) =>
      withKubeOptions(
        y
          .positional('release-version', { type: 'string', demandOption: true, coerce: parseReleaseVersion('VERSION'), describe: 'Release version, e.g. 4.16.3' })
          .option('cri-socket', {
            type: 'string',
            describe: `Check THIS node through its runtime's socket (e.g. ${DEFAULT_CRI_SOCKET}), on either backend; without it every agent is asked to check its node`,
          })
          .option('node-name', { type: 'string', describe: 'With --cri-socket: this node as the cluster names it (default: the hostname)' })
          .option('timeout', { type: 'string', default: 120, coerce: positiveSeconds('timeout'), describe: 'How long (120s, 5m; bare: seconds) to wait for every targeted node to answer (agent backend)' })
          .check((argv) => {
            if (argv['node-name'] !== undefined && argv['cri-socket'] === undefined) throw new BadInputError(`--node-name names the node --cri-socket checks; pass --cri-socket ${DEFAULT_CRI_SOCKET} too, or neither to ask every node's agent`);
            return true;
          }),
      ),
    handler: async (args: any) => {
      const version = args['release-version'] as string;
      const socket = args['cri-socket'] as string | undefined;
      if (socket !== undefined) checkSocketPath(socket);
      const { client, backend } = await clusterFrom(args as KubeFlags, scriptName);
      if (socket === undefined && backend.kind === 'mco') {
        throw new BadInputError(
          `verify ${version}: on MCO, the machine-config-daemon reports per set and node only (MachineConfigNode), no per-image CRI check to ask for; run '${scriptName} verify ${version} --cri-socket ${DEFAULT_CRI_SOCKET}' on each node (e.g. in a debug pod with the host's socket)`,
        );
      }
      const sets = await releaseSets(client, backend, version);
      if (!sets.length) throw new BadInputError(`verify ${version}: no prestage set of release ${version} on the cluster, so nothing to verify; stage it first (${scriptName} stage --to ${version})`);
      const untargeted = sets.filter((set) => !set.nodes.length).map((set) => set.name);
      let checks: NodeCheck[];
      if (socket !== undefined) {
        checks = [await checkThisNode(client, sets, socket, (args['node-name'] as string | undefined) ?? hostname(), version)];
      } else {
        checks = await askAgents(client, sets, version, scriptName, (args.timeout as number) * 1000, (answered) => ctx.stdout.write(`${renderVerifyTable(answered)}\n\n`));
      }
      ctx.stdout.write(`${renderVerifyTable(checks)}\n\n`);
      ctx.stdout.write(`${verifyVerdict(version, checks, socket === undefined ? untargeted : [])}\n`);
    },
  };
}

/** A socket path that is not there is bad input (the runtime being down is a cluster error, later). */
function checkSocketPath(path: string): void {
  if (!existsSync(path)) throw new BadInputError(`--cri-socket ${path}: no such file; name the container runtime's socket on this node (CRI-O: ${DEFAULT_CRI_SOCKET})`);
  if (!statSync(path).isSocket()) throw new BadInputError(`--cri-socket ${path}: not a socket; name the container runtime's socket on this node (CRI-O: ${DEFAULT_CRI_SOCKET})`);
}

/** The prestage sets of `version` (label, then the exact version annotation) with their images and target nodes. */
async function releaseSets(client: KubeClient, backend: PinningBackend, version: string): Promise<ReleaseSetTargets[]> {
  const sets = (await listSetsWithImages(client, backend, `${RELEASE_VERSION_LABEL}=${releaseVersionLabel(version)}`)).filter((set) => set.version === version);
  if (!sets.length) return [];
  const snapshot = await backend.snapshot(sets.map((set) => set.name));
  const targets = new Map(snapshot.sets.map((set) => [set.name, set.nodes.map((node) => node.node)]));
  return sets.map(({ version: _version, ...set }) => ({ ...set, nodes: targets.get(set.name) ?? [] }));
}

/** `--cri-socket`: the sets that target this node, against this node's runtime. */
async function checkThisNode(client: KubeClient, sets: readonly ReleaseSetTargets[], socket: string, nodeName: string, version: string): Promise<NodeCheck> {
  const node = await client.find<KubeObject>(`/api/v1/nodes/${encodeURIComponent(nodeName)}`);
  if (!node) throw new BadInputError(`--node-name ${nodeName}: no such Node in the cluster; name this node as the cluster does (kubectl get nodes)`);
  const mine = sets.filter((set) => set.nodes.includes(nodeName));
  if (!mine.length) throw new BadInputError(`verify ${version}: no set of release ${version} targets node ${nodeName} (sets: ${sets.map((set) => set.name).join(', ')}); run it on a node they target, or name this one with --node-name`);
  const cri = await CriClient.connect(socket);
  try {
    const stored = await cri.listImages();
    return { node: nodeName, role: roleOf(node.metadata.labels), sets: mine.map((set) => verifySet(set, 'local', stored)) };
  } finally {
    cri.close();
  }
}

/**
 * Agent backend: stamps a fresh request on each set, then waits (watching NodePinnedImages) until
 * every node a set targets has answered that request for that set. Past the timeout:
 * VerifyTimeoutError naming the nodes that did not answer (after the answers that came, via `partial`).
 */
async function askAgents(client: KubeClient, sets: readonly ReleaseSetTargets[], version: string, scriptName: string, timeoutMs: number, partial: (answered: NodeCheck[]) => void): Promise<NodeCheck[]> {
  const request = `${new Date().toISOString()} ${randomBytes(4).toString('hex')}`;
  const nodes = await client.get<KubeList>(AGENT_PATHS.nodes);
  const roles = new Map(nodes.items.map((node) => [node.metadata.name, roleOf(node.metadata.labels)]));
  const targeted = [...new Set(sets.flatMap((set) => set.nodes))].sort();
  const abort = new AbortController();
  let settle: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (settle = resolve));
  let answers = new Map<string, NodeCheck>();
  const statuses = new Informer<NodePinnedImages & KubeObject>(client, AGENT_PATHS.nodePinnedImages, {
    onChange: () => {
      answers = answersTo(request, sets, targeted, statuses.items, roles);
      if (answers.size === targeted.length) settle();
    },
  });
  const timer = setTimeout(settle, timeoutMs);
  try {
    // Watch first, then ask: no answer can come before the watch sees it.
    await statuses.start(abort.signal);
    for (const set of sets) {
      if (!set.nodes.length) continue;
      await client.request('PATCH', `${AGENT_PATHS.pinnedImageSets}/${encodeURIComponent(set.name)}`, {
        query: { fieldManager: 'prestage-verify' },
        body: { metadata: { annotations: { [VERIFY_REQUESTED_ANNOTATION]: request } } },
        contentType: 'application/merge-patch+json',
      });
    }
    if (targeted.length) await done;
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  const silent = targeted.filter((node) => !answers.has(node));
  if (silent.length) {
    if (answers.size) partial([...answers.values()]);
    throw new VerifyTimeoutError(
      `verify ${version}: no answer within ${Math.round(timeoutMs / 1000)} s from ${silent.join(', ')} (is prestage agent running there? kubectl -n prestage get pods -o wide); or run '${scriptName} verify ${version} --cri-socket ${DEFAULT_CRI_SOCKET}' on those nodes`,
    );
  }
  return [...answers.values()];
}

/** Per node, its answers to `request` for every set that targets it; a node missing one has not answered. */
function answersTo(
  request: string,
  sets: readonly ReleaseSetTargets[],
  targeted: readonly string[],
  statuses: ReadonlyMap<string, NodePinnedImages>,
  roles: ReadonlyMap<string, string>,
): Map<string, NodeCheck> {
  const answers = new Map<string, NodeCheck>();
  for (const node of targeted) {
    const verified = statuses.get(node)?.status?.verified?.sets ?? [];
    const mine = sets.filter((set) => set.nodes.includes(node));
    const found = mine.map((set) => verified.find((entry) => entry.name === set.name && entry.request === request && (!entry.uid || !set.uid || entry.uid === set.uid)));
    if (found.every((entry) => entry !== undefined)) answers.set(node, { node, role: roles.get(node) ?? '<none>', sets: found });
  }
  return answers;
}
