/**
 * The credentials a pass pulls with: the node's pull secret (the kubelet's `config.json`) and
 * the Secrets a set names in `spec.pullSecrets`, both read afresh each pass (they may rotate)
 * and never logged; per image, the Secrets of the sets that list it come first, then the node's.
 */
import { existsSync, statSync } from 'node:fs';
import type { Logger } from 'pino';
import type { PinnedImageSet } from '../api/prestage.js';
import type { PullAuth } from '../cri/client.js';
import { findCredential, parsePullSecretFile, type PullSecret } from '../registry/credentials.js';
import { parseReference } from '../registry/reference.js';
import { oneLine } from './one-line.js';

/** The kubelet's pull secret, re-read each pass (it may rotate); never logged. */
export function readNodePullSecret(path: string | undefined, log: Logger): PullSecret[] {
  if (!path || !existsSync(path)) return [];
  // An empty file is no pull secret: the DaemonSet's FileOrCreate mount makes one on nodes without it.
  if (statSync(path).size === 0) return [];
  try {
    return [parsePullSecretFile(path)];
  } catch (error) {
    log.warn({ err: (error as Error).message }, 'pull secret unreadable; pulling anonymously');
    return [];
  }
}

export interface SetPullSecrets {
  /** Set → its Secrets, in the order it names them. */
  readonly bySet: Map<string, PullSecret[]>;
  /** Set → why one of its Secrets cannot be read: it pulls nothing (its pulls would only be denied). */
  readonly failures: Map<string, string>;
}

/**
 * The Secrets each set names, for the sets with images still to pull (a set that is done
 * never reads them). A Secret that cannot be read fails its set with the reason; one read
 * per Secret per pass, however many sets name it.
 */
export async function readSetPullSecrets(
  sets: readonly PinnedImageSet[],
  present: ReadonlySet<string>,
  read: ((name: string) => Promise<PullSecret>) | undefined,
  log: Logger,
): Promise<SetPullSecrets> {
  const bySet = new Map<string, PullSecret[]>();
  const failures = new Map<string, string>();
  const reads = new Map<string, Promise<PullSecret>>();
  for (const set of sets) {
    const names = (set.spec.pullSecrets ?? []).map((reference) => reference.name);
    if (names.length === 0 || set.spec.pinnedImages.every((entry) => present.has(entry.name))) continue;
    try {
      if (!read) throw new Error(`set ${set.metadata.name} names pull secrets, and this agent cannot read Secrets`);
      const secrets: PullSecret[] = [];
      for (const name of names) {
        if (!reads.has(name)) reads.set(name, read(name));
        secrets.push(await (reads.get(name) as Promise<PullSecret>));
      }
      bySet.set(set.metadata.name, secrets);
    } catch (error) {
      const reason = oneLine((error as Error).message);
      failures.set(set.metadata.name, reason);
      log.warn({ set: set.metadata.name, err: reason }, 'pull secret unreadable; not pulling this set');
    }
  }
  return { bySet, failures };
}

/** An image's credentials: the Secrets of the sets that list it, then the node's pull secret. */
export function pullAuthForSets(
  sets: readonly PinnedImageSet[],
  setSecrets: ReadonlyMap<string, readonly PullSecret[]>,
  nodeSecrets: readonly PullSecret[],
): (image: string) => PullAuth | undefined {
  const imageSecrets = new Map<string, PullSecret[]>();
  for (const set of sets) {
    for (const { name } of set.spec.pinnedImages) imageSecrets.set(name, [...(imageSecrets.get(name) ?? []), ...(setSecrets.get(set.metadata.name) ?? [])]);
  }
  return pullAuthFrom((image) => [...(imageSecrets.get(image) ?? []), ...nodeSecrets]);
}

/** CRI credentials per image: the first secret with a matching key, the most specific key in it. */
export function pullAuthFrom(secretsFor: (image: string) => readonly PullSecret[]): (image: string) => PullAuth | undefined {
  return (image) => {
    const reference = parseReference(image);
    const credential = findCredential(secretsFor(image), reference.registry, reference.repository);
    if (!credential) return undefined;
    return credential.identityToken
      ? { identityToken: credential.identityToken, serverAddress: reference.registry }
      : { username: credential.username, password: credential.password, serverAddress: reference.registry };
  };
}
