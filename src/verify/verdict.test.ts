import { describe, expect, it } from 'vitest';
import { MAX_VERIFY_NAMES } from '../api/prestage.js';
import type { RuntimeImage } from '../cri/client.js';
import { checkImages, NotVerifiedError, renderVerifyTable, roleOf, verifySet, verifyVerdict, type NodeCheck } from './verdict.js';

const image = (n: number) => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;
const stored = (name: string, pinned: boolean, tags: string[] = []): RuntimeImage => ({ id: name.slice(-12), repoTags: tags, repoDigests: [name], size: 1, pinned });

describe('checkImages', () => {
  it('names images no stored image answers to as missing, and stored unpinned ones as unpinned, each once', () => {
    const runtime = [stored(image(1), true), stored(image(2), false), stored('quay.io/other@sha256:' + 'f'.repeat(64), true, ['quay.io/ns/tagged:1'])];
    expect(checkImages([image(1), image(2), image(3), image(3), 'quay.io/ns/tagged:1'], runtime)).toEqual({ missing: [image(3)], unpinned: [image(2)] });
    expect(checkImages([image(1)], [])).toEqual({ missing: [image(1)], unpinned: [] });
  });
});

describe('verifySet', () => {
  it('answers a request with exact counts and at most MAX_VERIFY_NAMES names per list', () => {
    const images = Array.from({ length: MAX_VERIFY_NAMES + 6 }, (_, i) => image(i + 1));
    const answer = verifySet({ name: 'prestage-4.16.3-worker', uid: 'u1', images }, 'req-1', [stored(image(1), false)]);
    expect(answer).toMatchObject({ name: 'prestage-4.16.3-worker', uid: 'u1', request: 'req-1', images: MAX_VERIFY_NAMES + 6, missingCount: MAX_VERIFY_NAMES + 5, unpinnedCount: 1, unpinned: [image(1)] });
    expect(answer.missing).toHaveLength(MAX_VERIFY_NAMES);
    expect(answer.missing[0]).toBe(image(2));
  });
});

describe('roleOf', () => {
  it('lists node-role labels as kubectl ROLES does', () => {
    expect(roleOf({ 'node-role.kubernetes.io/master': '', 'node-role.kubernetes.io/control-plane': '', 'kubernetes.io/os': 'linux' })).toBe('control-plane,master');
    expect(roleOf({ 'node-role.kubernetes.io/worker': '' })).toBe('worker');
    expect(roleOf({})).toBe('<none>');
    expect(roleOf(undefined)).toBe('<none>');
  });
});

const ok = (images: number) => ({ images, missingCount: 0, missing: [], unpinnedCount: 0, unpinned: [] });
const master: NodeCheck = { node: 'master-0', role: 'control-plane,master', sets: [{ name: 'prestage-4.16.3-control-plane', ...ok(146) }] };
const worker = (name: string, extra: Partial<NodeCheck['sets'][number]> = {}): NodeCheck => ({ node: name, role: 'worker', sets: [{ name: 'prestage-4.16.3-worker', ...ok(58), ...extra }] });

describe('verifyVerdict', () => {
  it('is VERIFIED only when every node has every image present and pinned', () => {
    expect(verifyVerdict('4.16.3', [worker('worker-1'), master, worker('worker-0')])).toBe(
      'VERIFIED 4.16.3: every image of 2 sets present and pinned on all 3 nodes they target (262 images checked by CRI)',
    );
    expect(verifyVerdict('4.16.3', [worker('worker-0')])).toBe('VERIFIED 4.16.3: every image of 1 set present and pinned on worker-0 (58 images checked by CRI)');
  });

  it('is NOT VERIFIED (exit 1) naming each node and its missing and unpinned images, the names it did not list counted', () => {
    const lacking = worker('worker-1', { missingCount: 2, missing: [image(1), image(2)], unpinnedCount: 5, unpinned: [image(3), image(4), image(5), image(6)] });
    const verdict = () => verifyVerdict('4.16.3', [master, lacking, worker('worker-0')], ['prestage-4.16.3-gpu']);
    expect(verdict).toThrow(NotVerifiedError);
    expect(verdict).toThrow(
      `NOT VERIFIED 4.16.3: worker-1 misses 2 images (${image(1)}, ${image(2)}); worker-1 has 5 images not pinned (${image(3)}, ${image(4)}, ${image(5)} and 2 more); prestage-4.16.3-gpu targets no node`,
    );
    try {
      verdict();
    } catch (error) {
      expect((error as NotVerifiedError).exitCode).toBe(1);
    }
  });
});

describe('renderVerifyTable', () => {
  it('one row per node by name; NOT PINNED only when a node has such images', () => {
    expect(renderVerifyTable([worker('worker-0'), master]).split('\n')).toEqual([
      'NODE      ROLE                  SETS                           IMAGES  PINNED  MISSING',
      'master-0  control-plane,master  prestage-4.16.3-control-plane     146     146        0',
      'worker-0  worker                prestage-4.16.3-worker             58      58        0',
    ]);
    const table = renderVerifyTable([worker('worker-0', { missingCount: 1, missing: [image(1)], unpinnedCount: 2, unpinned: [image(2), image(3)] })]);
    expect(table.split('\n')).toEqual([
      'NODE      ROLE    SETS                    IMAGES  PINNED  MISSING  NOT PINNED',
      'worker-0  worker  prestage-4.16.3-worker      58      55        1           2',
    ]);
  });
});
