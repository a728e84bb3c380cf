/**
 * `prestage verify`'s conversation with the cluster: the release's sets and the nodes they
 * target, this node's runtime (`--cri-socket`), or every agent asked through a fresh
 * `prestage.dev/verify-requested` on each set and answered in its NodePinnedImages status.
 */
import { randomBytes } from 'node:crypto';
import { VERIFY_REQUESTED_ANNOTATION, type NodePinnedImages } from '../api/prestage.js';
import { AGENT_PATHS } from '../cluster/agent/backend.js';
import type { PinningBackend } from '../cluster/backend.js';
import { Informer } from '../kube/informer.js';
import type { KubeClient, KubeList, KubeObject } from '../kube/client.js';
import { RELEASE_VERSION_LABEL, releaseVersionLabel } from '../api/set-metadata.js';
import { listSetsWithImages } from '../cluster/release-lifecycle.js';
import { CriClient } from '../cri/client.js';
import { BadInputError } from '../errors.js';
import { roleOf, verifySet, VerifyTimeoutError, type NodeCheck, type SetImages } from './verdict.js';

export const DEFAULT_CRI_SOCKET = '/var/run/crio/crio.sock';

/** A set of the release, and the nodes it targets now. */
export interface ReleaseSetTargets extends SetImages {
  readonly nodes: readonly string[];
}

/** The prestage sets of `version` (label, then the exact version annotation) with their images and target nodes. */
export async function releaseSets(client: KubeClient, backend: PinningBackend, version: string): Promise<ReleaseSetTargets[]> {
  const sets = (await listSetsWithImages(client, backend, `${RELEASE_VERSION_LABEL}=${releaseVersionLabel(version)}`)).filter((set) => set.version === version);
  if (!sets.length) return [];
  const snapshot = await backend.snapshot(sets.map((set) => set.name));
  const targets = new Map(snapshot.sets.map((set) => [set.name, set.nodes.map((node) => node.node)]));
  return sets.map(({ version: _version, ...set }) => ({ ...set, nodes: targets.get(set.name) ?? [] }));
}

/** `--cri-socket`: the sets that target this node, against this node's runtime. */
export async function checkThisNode(client: KubeClient, sets: readonly ReleaseSetTargets[], socket: string, nodeName: string, version: string): Promise<NodeCheck> {
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
export async function askAgents(client: KubeClient, sets: readonly ReleaseSetTargets[], version: string, scriptName: string, timeoutMs: number, partial: (answered: NodeCheck[]) => void): Promise<NodeCheck[]> {
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
