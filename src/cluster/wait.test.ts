import { describe, expect, it } from 'vitest';
import type { NodeSetProgress, ProgressSnapshot } from './backend.js';
import { WaitTracker } from './wait.js';
import { parseDuration } from '../units.js';

const node = (name: string, phase: NodeSetProgress['phase'], extra: Partial<NodeSetProgress> = {}): NodeSetProgress => ({
  node: name,
  set: 'workers',
  phase,
  desiredGeneration: 1,
  currentGeneration: phase === 'done' ? 1 : 0,
  ...extra,
});
const snapshot = (...nodes: NodeSetProgress[]): ProgressSnapshot => ({ sets: [{ name: 'workers', exists: true, generation: 1, nodes }] });

describe('WaitTracker', () => {
  it('emits one event per node change and a set event only when the set summary changes', () => {
    const tracker = new WaitTracker(60_000);
    expect(tracker.observe(snapshot(node('a', 'progressing'), node('b', 'progressing')), 0).map((e) => e.type)).toEqual(['node', 'node', 'set']);
    expect(tracker.observe(snapshot(node('a', 'progressing'), node('b', 'progressing')), 1_000)).toEqual([]);
    const events = tracker.observe(snapshot(node('a', 'done'), node('b', 'progressing')), 2_000);
    expect(events).toMatchObject([{ type: 'node', node: 'a', phase: 'done' }, { type: 'set', nodesDone: 1, nodesTotal: 2, ready: false, etaSeconds: 2 }]);
    expect(tracker.ready()).toBe(false);
    tracker.observe(snapshot(node('a', 'done'), node('b', 'done')), 3_000);
    expect(tracker.ready()).toBe(true);
  });

  it('fails a node only after it stayed degraded for --fail-after, with the first error of the streak', () => {
    const tracker = new WaitTracker(5_000);
    tracker.observe(snapshot(node('a', 'degraded', { error: 'exit status 125' })), 0);
    tracker.observe(snapshot(node('a', 'degraded', { error: 'ENOSPC' })), 3_000);
    expect(tracker.failure(4_999)).toBeUndefined();
    expect(tracker.nextFailureCheck()).toBe(5_000);
    expect(tracker.failure(5_000)).toEqual({ set: 'workers', node: 'a', error: 'exit status 125', degradedMs: 5_000, unreported: false });
  });

  it('fails a node that nothing reports (no status object) once that lasts --fail-after, flagged as unreported', () => {
    const tracker = new WaitTracker(5_000);
    tracker.observe(snapshot(node('a', 'pending', { unreported: 'no MachineConfigNode for this node' })), 0);
    expect(tracker.failure(4_999)).toBeUndefined();
    expect(tracker.failure(5_000)).toEqual({ set: 'workers', node: 'a', error: 'no MachineConfigNode for this node', degradedMs: 5_000, unreported: true });
    tracker.observe(snapshot(node('a', 'pending')), 5_001);
    expect(tracker.failure(20_000)).toBeUndefined();
  });

  it('restarts the --fail-after clock when a node recovers between failures', () => {
    const tracker = new WaitTracker(5_000);
    tracker.observe(snapshot(node('a', 'degraded', { error: 'x' })), 0);
    tracker.observe(snapshot(node('a', 'progressing')), 4_000);
    tracker.observe(snapshot(node('a', 'degraded', { error: 'y' })), 6_000);
    expect(tracker.failure(10_000)).toBeUndefined();
    expect(tracker.failure(11_000)).toMatchObject({ error: 'y' });
  });

  it('a node that leaves the set no longer holds it back or fails it', () => {
    const tracker = new WaitTracker(1_000);
    tracker.observe(snapshot(node('a', 'done'), node('gone', 'degraded', { error: 'x' })), 0);
    tracker.observe(snapshot(node('a', 'done')), 500);
    expect(tracker.failure(5_000)).toBeUndefined();
    expect(tracker.ready()).toBe(true);
  });
});

describe('WaitTracker bytes', () => {
  const MiB = 2 ** 20;
  it('sums bytes over nodes only once every node reports them, so the total does not grow as nodes report', () => {
    const tracker = new WaitTracker(60_000);
    const first = tracker.observe(snapshot(node('a', 'progressing', { bytes: 10 * MiB, pulledBytes: 0 }), node('b', 'pending')), 0);
    expect(first.find((e) => e.type === 'set')).not.toHaveProperty('bytes');
    const both = tracker.observe(snapshot(node('a', 'progressing', { bytes: 10 * MiB, pulledBytes: 5 * MiB }), node('b', 'progressing', { bytes: 10 * MiB, pulledBytes: 5 * MiB })), 10_000);
    expect(both.find((e) => e.type === 'set')).toMatchObject({ bytes: 20 * MiB, pulledBytes: 10 * MiB });
    // The byte rate counts from when bytes became known (10 MiB in 10 s from here), not from 0 at the start.
    const later = tracker.observe(snapshot(node('a', 'progressing', { bytes: 10 * MiB, pulledBytes: 10 * MiB }), node('b', 'progressing', { bytes: 10 * MiB, pulledBytes: 5 * MiB })), 20_000);
    expect(later.find((e) => e.type === 'set')).toMatchObject({ bytes: 20 * MiB, pulledBytes: 15 * MiB, etaSeconds: 10 });
  });
});

describe('parseDuration', () => {
  it.each([
    ['90', 90_000],
    ['90s', 90_000],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['250ms', 250],
  ])('%s is %d ms', (text, ms) => expect(parseDuration(text)).toBe(ms));

  it('refuses anything else as bad input', () => expect(() => parseDuration('5 minutes')).toThrow(/"5 minutes" is not a duration/));
});
