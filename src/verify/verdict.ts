/**
 * `prestage verify`, the pure half: a set's images against what a node's runtime stores (CRI
 * ListImages: present, and pinned), one row per node, and the verdict on a release. The node agent
 * uses `verifySet` to answer a verify request; the CLI uses it on the node it runs on
 * (`--cri-socket`), and renders the answers of every node.
 */
import { MAX_VERIFY_NAMES, type SetVerification } from '../api/prestage.js';
import type { RuntimeImage } from '../cri/client.js';
import { ExitCode, PrestageError } from '../errors.js';
import { table } from '../render/table.js';

/** Exit 1: an image of the release is missing or unpinned on a node it targets. */
export class NotVerifiedError extends PrestageError {
  readonly exitCode = ExitCode.failed;
}

/** Exit 124: nodes did not answer the verify request within --timeout. */
export class VerifyTimeoutError extends PrestageError {
  readonly exitCode = ExitCode.timeout;
}

export interface SetImages {
  readonly name: string;
  readonly uid?: string;
  /** Digest pullspecs, as the set lists them. */
  readonly images: readonly string[];
}

/**
 * Which of `images` the runtime does not store (no repo digest or tag of a stored image names
 * it), and which it stores unpinned (the kubelet's image GC may delete them).
 */
export function checkImages(images: readonly string[], stored: readonly RuntimeImage[]): { missing: string[]; unpinned: string[] } {
  const byName = new Map<string, RuntimeImage>();
  for (const image of stored) for (const name of [...image.repoDigests, ...image.repoTags]) byName.set(name, image);
  const missing: string[] = [];
  const unpinned: string[] = [];
  for (const name of new Set(images)) {
    const image = byName.get(name);
    if (!image) missing.push(name);
    else if (!image.pinned) unpinned.push(name);
  }
  return { missing, unpinned };
}

/** A set's answer to verify request `request`, as the agent records it (names capped, counts exact). */
export function verifySet(set: SetImages, request: string, stored: readonly RuntimeImage[]): SetVerification {
  const { missing, unpinned } = checkImages(set.images, stored);
  return {
    name: set.name,
    ...(set.uid ? { uid: set.uid } : {}),
    request,
    images: new Set(set.images).size,
    missingCount: missing.length,
    missing: missing.slice(0, MAX_VERIFY_NAMES),
    unpinnedCount: unpinned.length,
    unpinned: unpinned.slice(0, MAX_VERIFY_NAMES),
  };
}

/** One node's answer: each set of the release that targets it, checked by CRI. */
export interface NodeCheck {
  readonly node: string;
  readonly role: string;
  readonly sets: ReadonlyArray<Pick<SetVerification, 'name' | 'images' | 'missingCount' | 'missing' | 'unpinnedCount' | 'unpinned'>>;
}

/** `control-plane,master`, `worker`: the node-role.kubernetes.io/ labels, as kubectl shows ROLES. */
export function roleOf(labels: Readonly<Record<string, string>> | undefined): string {
  const roles = Object.keys(labels ?? {})
    .filter((key) => key.startsWith('node-role.kubernetes.io/'))
    .map((key) => key.slice('node-role.kubernetes.io/'.length))
    .filter(Boolean)
    .sort();
  return roles.join(',') || '<none>';
}

const sum = (values: readonly number[]) => values.reduce((total, value) => total + value, 0);
const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

function totals(check: NodeCheck): { images: number; missing: number; unpinned: number } {
  return { images: sum(check.sets.map((s) => s.images)), missing: sum(check.sets.map((s) => s.missingCount)), unpinned: sum(check.sets.map((s) => s.unpinnedCount)) };
}

/** `NODE  ROLE  SETS  IMAGES  PINNED  MISSING` (and `NOT PINNED` when a node has such images), nodes by name. */
export function renderVerifyTable(checks: readonly NodeCheck[]): string {
  const sorted = [...checks].sort((a, b) => a.node.localeCompare(b.node));
  const rows = sorted.map((check) => {
    const t = totals(check);
    return [check.node, check.role, check.sets.map((s) => s.name).join(','), String(t.images), String(t.images - t.missing - t.unpinned), String(t.missing), String(t.unpinned)];
  });
  const withUnpinned = rows.some((row) => row[6] !== '0');
  const header = ['NODE', 'ROLE', 'SETS', 'IMAGES', 'PINNED', 'MISSING', 'NOT PINNED'];
  const keep = (row: readonly string[]) => (withUnpinned ? row : row.slice(0, 6));
  return table([header, ...rows].map(keep), new Set([3, 4, 5, 6]));
}

/** `a, b, c and 4 more`: the names a node reported, and how many it did not list. */
function named(names: readonly string[], count: number, shown = 3): string {
  const listed = names.slice(0, shown);
  return `${listed.join(', ')}${count > listed.length ? `${listed.length ? ' and ' : ''}${count - listed.length} more` : ''}`;
}

/**
 * The verdict on release `version` from every targeted node's check: `VERIFIED ...` (returned)
 * only when every image of every set is present and pinned on every node it targets; otherwise
 * NotVerifiedError naming each node and what it lacks. `untargeted`: sets that target no node.
 */
export function verifyVerdict(version: string, checks: readonly NodeCheck[], untargeted: readonly string[] = []): string {
  const problems: string[] = [];
  for (const check of [...checks].sort((a, b) => a.node.localeCompare(b.node))) {
    const t = totals(check);
    const missing = check.sets.flatMap((s) => s.missing);
    const unpinned = check.sets.flatMap((s) => s.unpinned);
    if (t.missing) problems.push(`${check.node} misses ${plural(t.missing, 'image')} (${named(missing, t.missing)})`);
    if (t.unpinned) problems.push(`${check.node} has ${plural(t.unpinned, 'image')} not pinned (${named(unpinned, t.unpinned)})`);
  }
  for (const set of untargeted) problems.push(`${set} targets no node`);
  if (problems.length) throw new NotVerifiedError(`NOT VERIFIED ${version}: ${problems.join('; ')}`);
  const sets = new Set(checks.flatMap((check) => check.sets.map((s) => s.name)));
  const where = checks.length === 1 ? `on ${checks[0]!.node}` : `on all ${checks.length} nodes they target`;
  return `VERIFIED ${version}: every image of ${plural(sets.size, 'set')} present and pinned ${where} (${plural(sum(checks.map((c) => totals(c).images)), 'image')} checked by CRI)`;
}
