/**
 * `wait --timeout 720h --fail-after 720h`, past the ~24.8 days a plain setTimeout holds: with
 * fake timers, the wait neither ends at once nor re-judges in a loop, and each limit ends it
 * at its own time.
 */
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import type { NodeSetProgress, PinningBackend, ProgressSnapshot } from './backend.js';
import { SetFailedError, waitForSets, WaitTimeoutError } from './wait.js';

const HOUR = 3_600_000;

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

const node = (phase: NodeSetProgress['phase']): NodeSetProgress => ({ node: 'worker-0', set: 'workers', phase, desiredGeneration: 1, currentGeneration: 0, ...(phase === 'degraded' ? { error: 'ENOSPC' } : {}) });
const snapshot = (phase: NodeSetProgress['phase']): ProgressSnapshot => ({ sets: [{ name: 'workers', exists: true, generation: 1, nodes: [node(phase)] }] });

/** A backend whose one set stays in `phase` until the wait ends. */
function stuckBackend(phase: NodeSetProgress['phase']): PinningBackend {
  return {
    kind: 'agent',
    apply: () => Promise.reject(new Error('not applied here')),
    targetNodes: () => Promise.resolve(['worker-0']),
    snapshot: () => Promise.resolve(snapshot(phase)),
    watch: (_sets, onSnapshot, { signal }) => {
      onSnapshot(snapshot(phase));
      return new Promise((resolve) => signal.addEventListener('abort', () => resolve()));
    },
  };
}

async function settledAfter(promise: Promise<unknown>, ms: number): Promise<unknown> {
  let outcome: unknown = 'pending';
  promise.then((value) => (outcome = value), (error: unknown) => (outcome = error));
  await vi.advanceTimersByTimeAsync(ms);
  return outcome;
}

it('--timeout 720h: still waiting after 719 hours, timed out at 720', async () => {
  const onEvents = vi.fn();
  const waiting = waitForSets(stuckBackend('progressing'), ['workers'], { timeoutMs: 720 * HOUR, failAfterMs: 10 * 60_000, onEvents });
  expect(await settledAfter(waiting, 719 * HOUR)).toBe('pending');
  expect(onEvents).toHaveBeenCalledTimes(1);
  expect(await settledAfter(waiting, HOUR)).toBeInstanceOf(WaitTimeoutError);
});

it('--fail-after 720h: a degraded node is judged once, not in a loop, and fails the wait at 720 hours', async () => {
  const warnings = vi.spyOn(process, 'emitWarning');
  const failing = waitForSets(stuckBackend('degraded'), ['workers'], { timeoutMs: 8760 * HOUR, failAfterMs: 720 * HOUR, onEvents: () => undefined });
  expect(await settledAfter(failing, 719 * HOUR)).toBe('pending');
  // Node's TimeoutOverflowWarning came once per re-judge before: none now.
  expect(warnings).not.toHaveBeenCalled();
  const failed = await settledAfter(failing, HOUR);
  expect(failed).toBeInstanceOf(SetFailedError);
  expect((failed as Error).message).toBe('set workers failed on node worker-0 (degraded for 2592000 s): ENOSPC');
  warnings.mockRestore();
});
