/** wait's output on a terminal: set lines redrawn in place, each node's first error printed once. */
import { Writable } from 'node:stream';
import { expect, it } from 'vitest';
import type { NodeSetProgress, ProgressSnapshot } from '../src/cluster/backend.js';
import { WaitTracker } from '../src/cluster/wait.js';
import { WaitPrinter } from '../src/cli/wait.js';

function terminal(columns?: number): { stream: Writable & { isTTY: boolean; columns?: number }; text: () => string } {
  let text = '';
  const stream = Object.assign(
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        text += chunk.toString();
        done();
      },
    }),
    { isTTY: true, ...(columns !== undefined ? { columns } : {}) },
  );
  return { stream, text: () => text };
}

const node = (name: string, phase: NodeSetProgress['phase'], error?: string): NodeSetProgress => ({
  node: name,
  set: 'workers',
  phase,
  desiredGeneration: 1,
  currentGeneration: phase === 'done' ? 1 : 0,
  imagesTotal: 2,
  imagesDone: phase === 'done' ? 2 : 0,
  bytes: 2 * 2 ** 20,
  pulledBytes: phase === 'done' ? 2 * 2 ** 20 : 0,
  ...(error ? { error } : {}),
});
const snapshot = (...nodes: NodeSetProgress[]): ProgressSnapshot => ({ sets: [{ name: 'workers', exists: true, generation: 1, nodes }] });

it('redraws one line per set in place and prints a node error once, above the set lines', () => {
  const out = terminal();
  const printer = new WaitPrinter(out.stream, 'text', 'xterm-256color');
  const tracker = new WaitTracker(60_000);
  const show = (s: ProgressSnapshot, at: number) => printer.print(tracker.observe(s, at), tracker);

  show(snapshot(node('a', 'progressing'), node('b', 'degraded', 'exit status 125')), 0);
  show(snapshot(node('a', 'done'), node('b', 'degraded', 'exit status 125')), 10_000);
  show(snapshot(node('a', 'done'), node('b', 'done')), 20_000);

  const frames = out.text().split('\x1b[1A');
  expect(frames).toHaveLength(3);
  expect(frames[0]).toMatch(/^\x1b\[2K\S+ workers b: degraded \(generation 0\/1\) 0\/2 images 0 B\/2\.0 MiB: exit status 125\n\x1b\[2Kworkers: 0\/2 nodes done {2}0 B\/4\.0 MiB\n$/);
  expect(frames[1]).toBe('\x1b[2Kworkers: 1/2 nodes done  2.0 MiB/4.0 MiB  ETA 10s\n');
  expect(frames[2]).toBe('\x1b[2Kworkers: 2/2 nodes done  4.0 MiB/4.0 MiB  ready\n');
});

it('on TERM=dumb writes a plain line per change, no escape codes', () => {
  const out = terminal();
  const printer = new WaitPrinter(out.stream, 'text', 'dumb');
  const tracker = new WaitTracker(60_000);
  printer.print(tracker.observe(snapshot(node('a', 'progressing'), node('b', 'progressing')), 0), tracker);
  printer.print(tracker.observe(snapshot(node('a', 'done'), node('b', 'done')), 10_000), tracker);
  expect(out.text()).not.toMatch(/\x1b/);
  expect(out.text()).toMatch(/workers: 2\/2 nodes done {2}4\.0 MiB\/4\.0 MiB {2}ready\n$/);
});

it("cuts each redrawn line to the terminal's width, so a long line is not redrawn as two", () => {
  const out = terminal(20);
  const printer = new WaitPrinter(out.stream, 'text', 'xterm');
  const tracker = new WaitTracker(60_000);
  printer.print(tracker.observe(snapshot(node('a', 'done'), node('b', 'done')), 0), tracker);
  expect(out.text()).toBe('\x1b[2Kworkers: 2/2 nodes…\n');
});
