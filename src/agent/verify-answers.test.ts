import { describe, expect, it } from 'vitest';
import { API_VERSION, MAX_VERIFIED_SETS, MAX_VERIFY_REQUEST_LENGTH, VERIFY_REQUESTED_ANNOTATION, type NodePinnedImagesStatus, type NodeVerification, type PinnedImageSet } from '../api/prestage.js';
import type { RuntimeImage } from '../cri/client.js';
import { createLogger } from '../telemetry/log.js';
import { VerifyAnswers } from './verify-answers.js';

const image = (n: number) => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;
const requested = (name: string, images: number[], request?: string): PinnedImageSet => ({
  apiVersion: API_VERSION,
  kind: 'PinnedImageSet',
  metadata: { name, uid: `uid-${name}`, ...(request ? { annotations: { [VERIFY_REQUESTED_ANNOTATION]: request } } : {}) },
  spec: { pinnedImages: images.map((n) => ({ name: image(n) })) },
});

function room(sets: PinnedImageSet[], stored: RuntimeImage[], options: { labels?: boolean; listMs?: number } = {}) {
  const written: NodePinnedImagesStatus[] = [];
  let lists = 0;
  const answers: VerifyAnswers = new VerifyAnswers({
    cluster: { nodeLabels: () => (options.labels === false ? undefined : {}), readStatus: async () => ({ conditions: [] }) },
    runtime: {
      listImages: async () => {
        lists++;
        if (options.listMs) await new Promise((resolve) => setTimeout(resolve, options.listMs));
        return stored;
      },
    },
    log: createLogger('silent'),
    selectingSets: () => sets,
    // As the status writer does: the answer as of the write's turn.
    write: async (status) => void written.push({ ...(await status()), verified: answers.answer as NodeVerification }),
  });
  return { answers, written, lists: () => lists };
}

describe('VerifyAnswers', () => {
  it('answers the requested sets from one ListImages, per set its missing and unpinned images, with the status as last written', async () => {
    const stored: RuntimeImage[] = [{ id: '1', repoDigests: [image(1)], repoTags: [], size: 1, pinned: false }];
    const { answers, written, lists } = room([requested('a', [1, 2], 'r1'), requested('b', [1])], stored);
    await answers.verify();
    expect(lists()).toBe(1);
    expect(written).toHaveLength(1);
    expect(written[0]?.conditions).toEqual([]);
    expect(written[0]?.verified?.sets).toEqual([{ name: 'a', uid: 'uid-a', request: 'r1', images: 2, missingCount: 1, missing: [image(2)], unpinnedCount: 1, unpinned: [image(1)] }]);
    expect(written[0]?.verified?.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });

  it('writes nothing without a request, or before the Node was seen', async () => {
    const none = room([requested('a', [1])], []);
    await none.answers.verify();
    expect(none.lists()).toBe(0);
    expect(none.written).toEqual([]);
    const unseen = room([requested('a', [1], 'r1')], [], { labels: false });
    await unseen.answers.verify();
    expect(unseen.written).toEqual([]);
  });

  it('answers the newest requests first, as many as the status holds, each cut to what it holds', async () => {
    const sets = Array.from({ length: MAX_VERIFIED_SETS + 1 }, (_, i) => requested(`s${i}`, [1], `2026-11-24T06:${String(Math.floor(i / 60)).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}Z ${'x'.repeat(300)}`));
    const { answers } = room(sets, []);
    await answers.verify();
    const names = answers.answer?.sets.map((entry) => entry.name) ?? [];
    expect(names).toHaveLength(MAX_VERIFIED_SETS);
    expect(names[0]).toBe(`s${MAX_VERIFIED_SETS}`);
    expect(names).not.toContain('s0');
    expect(answers.answer?.sets.every((entry) => entry.request.length === MAX_VERIFY_REQUEST_LENGTH)).toBe(true);
  });

  it('coalesces calls during an answer into one more, and starts none once stopped', async () => {
    const { answers, lists } = room([requested('a', [1], 'r1')], [], { listMs: 20 });
    await Promise.all([answers.verify(), answers.verify(), answers.verify()]);
    expect(lists()).toBe(2);
    answers.stop();
    await answers.verify();
    await answers.idle();
    expect(lists()).toBe(2);
  });

  it('carries the answer a previous agent left until it answers itself', async () => {
    const left: NodeVerification = { time: '2026-01-01T00:00:00Z', sets: [] };
    const { answers } = room([requested('a', [1], 'r1')], []);
    answers.adopt(left);
    expect(answers.answer).toBe(left);
    await answers.verify();
    expect(answers.answer?.sets.map((entry) => entry.request)).toEqual(['r1']);
    answers.adopt(left);
    expect(answers.answer?.sets.map((entry) => entry.request)).toEqual(['r1']);
  });
});
