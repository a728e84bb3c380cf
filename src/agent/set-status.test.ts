import { describe, expect, it } from 'vitest';
import type { NodePinnedImages, PinnedImageSet, SetStatus } from '../api/prestage.js';
import { reportOf, setStatus, statusChanged, type NodeReport } from './set-status.js';
import { SetStatusLoop } from './set-status-writer.js';

const A = `quay.io/a/a@sha256:${'a'.repeat(64)}`;
const B = `quay.io/a/b@sha256:${'b'.repeat(64)}`;
const now = new Date('2026-11-27T10:00:00Z');

function set(generation = 2, selector?: PinnedImageSet['spec']['nodeSelector']): PinnedImageSet {
  return { apiVersion: 'prestage.dev/v1alpha1', kind: 'PinnedImageSet', metadata: { name: 'release', uid: 'u1', generation }, spec: { pinnedImages: [{ name: A }, { name: B }], ...(selector ? { nodeSelector: selector } : {}) } };
}

function report(states: Record<string, 'Pinned' | 'Pulling' | 'Failed'>, options: { generation?: number; failed?: string; uid?: string } = {}): NodeReport {
  const generation = options.generation ?? 2;
  const pinned = Object.values(states).every((state) => state === 'Pinned');
  const object: Pick<NodePinnedImages, 'status'> = {
    status: {
      pinnedImageSets: [
        {
          name: 'release',
          uid: options.uid ?? 'u1',
          desiredGeneration: generation,
          ...(pinned ? { currentGeneration: generation } : {}),
          ...(options.failed ? { lastFailedGeneration: generation, lastFailedGenerationError: options.failed } : {}),
          images: Object.entries(states).map(([name, state]) => ({ name, state, attempts: 1 })),
        },
      ],
    },
  };
  return reportOf(object);
}

const nodes = [{ name: 'w1', labels: { role: 'worker' } }, { name: 'w2', labels: { role: 'worker' } }, { name: 'm1', labels: { role: 'master' } }];
const condition = (status: SetStatus, type: string) => status.conditions!.find((entry) => entry.type === type)!;

describe('setStatus', () => {
  it('is Reconciling, naming the node and image it waits on, until every selected node pinned the generation', () => {
    const status = setStatus(set(2, { matchLabels: { role: 'worker' } }), nodes, new Map([['w1', report({ [A]: 'Pinned', [B]: 'Pinned' })], ['w2', report({ [A]: 'Pinned', [B]: 'Pulling' })]]), undefined, now);
    expect(status.observedGeneration).toBe(2);
    expect([status.nodes, status.readyNodes]).toEqual([2, 1]);
    expect(condition(status, 'Ready')).toMatchObject({ status: 'False', reason: 'Staging' });
    expect(condition(status, 'Reconciling')).toMatchObject({ status: 'True', reason: 'Staging' });
    expect(condition(status, 'Reconciling').message).toBe(`1/2 nodes hold every image; waiting on w2 (1 of 2 images not pinned, first ${B} (Pulling))`);
    expect(condition(status, 'Stalled').status).toBe('False');
  });

  it('waits on a node with no report, one on an older generation and one reporting another object of the name', () => {
    const status = setStatus(set(3), nodes, new Map([['w1', report({ [A]: 'Pinned', [B]: 'Pinned' }, { generation: 2 })], ['w2', report({ [A]: 'Pinned', [B]: 'Pinned' }, { generation: 3, uid: 'old' })]]), undefined, now);
    expect(condition(status, 'Ready').status).toBe('False');
    expect(condition(status, 'Reconciling').message).toBe(
      '0/3 nodes hold every image; waiting on w1 (its agent works on generation 2, not 3); w2 (its agent has not seen the set yet); m1 (no report from its agent yet)',
    );
  });

  it('is Ready once every selected node pinned every image of this generation', () => {
    const all = report({ [A]: 'Pinned', [B]: 'Pinned' });
    const status = setStatus(set(), nodes, new Map(nodes.map((node) => [node.name, all])), undefined, now);
    expect(condition(status, 'Ready')).toMatchObject({ status: 'True', reason: 'Staged', message: '3/3 nodes hold and pin all 2 images', observedGeneration: 2 });
    expect(condition(status, 'Reconciling').status).toBe('False');
  });

  it('is Stalled naming the node and the failing image', () => {
    const failed = report({ [A]: 'Pinned', [B]: 'Failed' }, { failed: `image ${B}: manifest unknown` });
    const status = setStatus(set(2, { matchLabels: { role: 'worker' } }), nodes, new Map([['w1', failed], ['w2', report({ [A]: 'Pinned', [B]: 'Pinned' })]]), undefined, now);
    expect(condition(status, 'Stalled')).toMatchObject({ status: 'True', reason: 'PinFailed', message: `1/2 nodes failed: w1: image ${B}: manifest unknown` });
    expect(condition(status, 'Ready').status).toBe('False');
    expect(condition(status, 'Reconciling').status).toBe('False');
  });

  it('calls a set that selects no node Stalled, not Ready', () => {
    const status = setStatus(set(2, { matchLabels: { role: 'infra' } }), nodes, new Map(), undefined, now);
    expect(condition(status, 'Stalled')).toMatchObject({ status: 'True', reason: 'NoNodesSelected' });
    expect(condition(status, 'Ready').status).toBe('False');
  });

  it('names at most five nodes and counts the rest', () => {
    const many = Array.from({ length: 8 }, (_, index) => ({ name: `n${index}` }));
    const message = condition(setStatus(set(), many, new Map(), undefined, now), 'Reconciling').message;
    expect(message).toBe('0/8 nodes hold every image; waiting on n0 (no report from its agent yet); n1 (no report from its agent yet); n2 (no report from its agent yet); n3 (no report from its agent yet); n4 (no report from its agent yet); and 3 more');
  });

  it('keeps a transition time while the status holds, and reports no change then', () => {
    const first = setStatus(set(), nodes, new Map(), undefined, now);
    const again = setStatus(set(), nodes, new Map(), first, new Date('2026-11-27T11:00:00Z'));
    expect(again).toEqual(first);
    expect(statusChanged(first, again)).toBe(false);
    // The API server's answer sorts keys its own way: not a change.
    const reordered = JSON.parse(JSON.stringify({ conditions: first.conditions!.map((entry) => Object.fromEntries(Object.entries(entry).reverse())), readyNodes: first.readyNodes, nodes: first.nodes, observedGeneration: first.observedGeneration })) as SetStatus;
    expect(statusChanged(reordered, again)).toBe(false);
    expect(statusChanged({ observedGeneration: 0 }, again)).toBe(true);
  });
});

describe('SetStatusLoop', () => {
  it('writes only sets whose status changed, spaced by the write rate', async () => {
    const written: string[] = [];
    const slept: number[] = [];
    const sets = [set(), { ...set(2, { matchLabels: { role: 'master' } }), metadata: { name: 'other', uid: 'u2', generation: 1 } }];
    let reports = new Map<string, NodeReport>();
    const loop = new SetStatusLoop(
      { sets: () => sets, nodes: () => nodes, reports: () => reports, write: async (name) => void written.push(name) },
      { maxWritesPerSecond: 4, now: () => now, sleep: async (ms) => void slept.push(ms) },
    );
    expect(await loop.pass()).toBe(2);
    expect(slept).toEqual([250]);
    // Nothing new: nothing written, though the informer has not brought the writes back yet.
    expect(await loop.pass()).toBe(0);
    // w1's report changes what the set selecting it says, not what the master-only set says.
    reports = new Map([['w1', report({ [A]: 'Pinned', [B]: 'Pinned' })]]);
    expect(await loop.pass()).toBe(1);
    expect(written).toEqual(['release', 'other', 'release']);
  });
});

describe('SetStatusLoop against another writer', () => {
  it('writes the status back when someone else changed it, but not while its own write is on its way', async () => {
    const written: SetStatus[] = [];
    const current = { ...set(), metadata: { ...set().metadata, resourceVersion: '1' } };
    const loop = new SetStatusLoop({ sets: () => [current], nodes: () => nodes, reports: () => new Map(), write: async (_name, status) => void written.push(status) }, { now: () => now, sleep: async () => undefined });
    expect(await loop.pass()).toBe(1);
    // The watch has not brought it back: same resourceVersion, old status.
    expect(await loop.pass()).toBe(0);
    // Another writer claims Ready: a new resourceVersion with a status the writer did not compute.
    Object.assign(current, { metadata: { ...current.metadata, resourceVersion: '7' }, status: { observedGeneration: 2, conditions: [{ type: 'Ready', status: 'True', reason: 'Forged', message: '', lastTransitionTime: '2026-11-27T00:00:00Z' }] } });
    expect(await loop.pass()).toBe(1);
    expect(written[1]!.conditions!.find((condition) => condition.type === 'Ready')!.status).toBe('False');
  });
});
