import { describe, expect, it } from 'vitest';
import type { NodeSetProgress, ProgressSnapshot } from '../cluster/backend.js';
import { progressBar, watchStatus } from './status-watch.js';

const node = (name: string, phase: NodeSetProgress['phase'], pulledBytes: number): NodeSetProgress => ({ node: name, set: 'prestage-4.16.3-worker', phase, desiredGeneration: 1, currentGeneration: phase === 'done' ? 1 : 0, imagesTotal: 4, imagesDone: phase === 'done' ? 4 : 1, bytes: 4096, pulledBytes });
const snapshot = (...nodes: NodeSetProgress[]): ProgressSnapshot => ({ sets: [{ name: 'prestage-4.16.3-worker', exists: true, generation: 1, nodes }] });

/** Snapshots in turn, the last one repeated; sleeps recorded, never waited. */
function cluster(snapshots: ProgressSnapshot[]) {
  let i = 0;
  const slept: number[] = [];
  return { read: async () => snapshots[Math.min(i++, snapshots.length - 1)]!, sleep: async (ms: number) => void slept.push(ms), slept, reads: () => i };
}

describe('watchStatus', () => {
  it('piped: the table once, then only each row that changed, one line each, until done', async () => {
    const c = cluster([
      // A release whose sets are not applied yet: nothing to show.
      { sets: [] },
      snapshot(node('worker-0', 'progressing', 1024), node('worker-1', 'progressing', 0)),
      snapshot(node('worker-0', 'progressing', 1024), node('worker-1', 'progressing', 0)),
      snapshot(node('worker-0', 'done', 4096), node('worker-1', 'progressing', 2048)),
      snapshot(node('worker-0', 'done', 4096), node('worker-1', 'done', 4096)),
    ]);
    let out = '';
    const last = await watchStatus({ read: c.read, out: { write: (t: string) => (out += t) }, tty: false, intervalMs: 2000, signal: new AbortController().signal, sleep: c.sleep, done: (s) => s.sets.length > 0 && s.sets[0]!.nodes.every((n) => n.phase === 'done') });
    const lines = out.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NODE +SET +GENERATION \S+ +STATE +IMAGES +BYTES +ERROR$/);
    expect(lines.slice(1, 3).map((l) => l.split(/ +/)[0])).toEqual(['worker-0', 'worker-1']);
    // The unchanged second read printed nothing; then worker-0, worker-1 and worker-1 again.
    // In the table's columns, as kubectl get -w prints rows under its header.
    expect(lines.slice(3)).toEqual([
      'worker-0  prestage-4.16.3-worker  1/1/1                             done         4/4     4.0 KiB/4.0 KiB',
      'worker-1  prestage-4.16.3-worker  0/1/1                             progressing  1/4     2.0 KiB/4.0 KiB',
      'worker-1  prestage-4.16.3-worker  1/1/1                             done         4/4     4.0 KiB/4.0 KiB',
    ]);
    for (const line of lines.slice(3)) expect(line.indexOf('done') === -1 ? line.indexOf('progressing') : line.indexOf('done')).toBe(lines[0]!.indexOf('STATE'));
    expect(c.reads()).toBe(5);
    expect(c.slept).toEqual([2000, 2000, 2000, 2000]);
    expect(last!.sets[0]!.nodes.every((n) => n.phase === 'done')).toBe(true);
  });

  it('on a terminal: redraws in place only when the frame changes, with a bar per set', async () => {
    const c = cluster([snapshot(node('worker-0', 'progressing', 1024)), snapshot(node('worker-0', 'progressing', 1024)), snapshot(node('worker-0', 'done', 4096))]);
    const frames: string[] = [];
    await watchStatus({ read: c.read, out: { write: (t: string) => frames.push(t) }, tty: true, columns: 100, intervalMs: 1000, signal: new AbortController().signal, sleep: c.sleep, done: (s) => s.sets[0]!.nodes[0]!.phase === 'done' });
    expect(frames).toHaveLength(2);
    expect(frames.every((f) => f.startsWith('\x1b[H\x1b[2J'))).toBe(true);
    expect(frames[0]).toContain('prestage-4.16.3-worker  [##########------------------------------]  0/1 nodes  1.0 KiB/4.0 KiB');
    expect(frames[1]).toContain(`[${'#'.repeat(40)}]  1/1 nodes  4.0 KiB/4.0 KiB`);
  });

  it('ends when the signal aborts', async () => {
    const stop = new AbortController();
    const c = cluster([snapshot(node('worker-0', 'progressing', 0))]);
    await watchStatus({ read: c.read, out: { write: () => true }, tty: false, intervalMs: 10, signal: stop.signal, sleep: async () => { if (c.reads() === 3) stop.abort(); } });
    expect(c.reads()).toBe(3);
  });

  it('a bar counts images where no bytes are reported, nodes where neither is (MCO)', () => {
    const mco = { name: 's', exists: true, generation: 1, nodes: [{ node: 'a', set: 's', phase: 'done', desiredGeneration: 1, currentGeneration: 1 }, { node: 'b', set: 's', phase: 'progressing', desiredGeneration: 1, currentGeneration: 0 }] } as const;
    expect(progressBar(mco, 60)).toBe(`s  [${'#'.repeat(20)}${'-'.repeat(20)}]  1/2 nodes`);
  });
});
