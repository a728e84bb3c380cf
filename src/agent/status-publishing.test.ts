import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { NodePinnedImagesStatus, NodeVerification } from '../api/prestage.js';
import { createLogger } from '../telemetry/log.js';
import { FailureEvents, ProgressPublisher, StatusWriter, progressIntervalMs } from './status-publishing.js';

const answer = (request: string): NodeVerification => ({ time: '2026-01-01T00:00:00Z', sets: [{ name: 'a', request, images: 1, missingCount: 0, missing: [], unpinnedCount: 0, unpinned: [] }] });
const failed = (name: string, generation: number, error: string): NodePinnedImagesStatus => ({
  pinnedImageSets: [{ name, desiredGeneration: generation, lastFailedGeneration: generation, lastFailedGenerationError: error, images: [] }],
});

describe('StatusWriter', () => {
  it('writes in order, one at a time, each with the verify answer as of its turn (or the one it carried)', async () => {
    const written: NodePinnedImagesStatus[] = [];
    let active = 0;
    let verified: NodeVerification | undefined;
    const writer = new StatusWriter(
      {
        writeStatus: async (status) => {
          expect(++active).toBe(1);
          await new Promise((resolve) => setTimeout(resolve, 5));
          written.push(status);
          active--;
        },
      },
      () => verified,
    );
    const first = writer.write({ conditions: [], verified: answer('left') });
    verified = answer('r1');
    // Read only at its turn: after the first write.
    const second = writer.write(async () => ({ imageFilesystem: { capacityBytes: written.length, freeBytes: 0 } }));
    await Promise.all([first, second]);
    expect(written).toEqual([
      { conditions: [], verified: answer('r1') },
      { imageFilesystem: { capacityBytes: 1, freeBytes: 0 }, verified: answer('r1') },
    ]);
    verified = undefined;
    await writer.write({ verified: answer('left') });
    expect(written.at(-1)).toEqual({ verified: answer('left') });
  });

  it('a failed write rejects its caller and does not hold up the next', async () => {
    let calls = 0;
    const writer = new StatusWriter({ writeStatus: async () => (++calls === 1 ? Promise.reject(new Error('conflict')) : undefined) }, () => undefined);
    await expect(writer.write({})).rejects.toThrow('conflict');
    await writer.write({});
    await writer.drained();
    expect(calls).toBe(2);
  });
});

describe('progressIntervalMs', () => {
  it('writes a status of up to 100 images once a second, a bigger one as often as its size allows', () => {
    expect([0, 1, 100, 101, 500, 1000, 2000].map(progressIntervalMs)).toEqual([1_000, 1_000, 1_000, 2_000, 5_000, 10_000, 20_000]);
  });
});

describe('ProgressPublisher', () => {
  // vitest's fake timers move Date.now() and setTimeout together: order and counts, never the machine's pace.
  beforeEach(() => void vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] }));
  afterEach(() => void vi.useRealTimers());

  it('coalesces pokes, writes at most once per interval, and nothing after settle()', async () => {
    const start = Date.now();
    const writes: number[] = [];
    const publisher = new ProgressPublisher(async () => void writes.push(Date.now() - start), 100);
    // 200 ms of pokes every 10 ms: the first write at once, then one per 100 ms for the pokes between.
    for (let index = 0; index < 20; index++) {
      publisher.poke();
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(writes).toEqual([0, 100, 200]);
    publisher.poke();
    await publisher.settle();
    publisher.poke();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(writes).toEqual([0, 100, 200]);
  });

  it('settle() drops a write waiting for its turn at once, and a failing write is no error', async () => {
    let writes = 0;
    const publisher = new ProgressPublisher(async () => {
      writes++;
      throw new Error('API down');
    }, 10_000);
    publisher.poke();
    await vi.advanceTimersByTimeAsync(5);
    publisher.poke();
    let settled = false;
    const settling = publisher.settle().then(() => (settled = true));
    // No time passes: the waiting write is dropped, not waited for.
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBe(true);
    await settling;
    await vi.advanceTimersByTimeAsync(20_000);
    expect(writes).toBe(1);
  });
});

describe('FailureEvents', () => {
  it('announces each new failure of a set once, again when its generation or error changes', async () => {
    const events: string[] = [];
    const failures = new FailureEvents({ recordWarning: async (reason, message) => void events.push(`${reason} ${message}`) }, createLogger('silent'));
    await failures.announce(failed('a', 1, 'no disk'));
    await failures.announce(failed('a', 1, 'no disk'));
    await failures.announce(failed('a', 1, 'denied'));
    await failures.announce({ pinnedImageSets: [] });
    await failures.announce(failed('a', 1, 'denied'));
    expect(events).toEqual(['PinnedImageSetFailed a generation 1: no disk', 'PinnedImageSetFailed a generation 1: denied', 'PinnedImageSetFailed a generation 1: denied']);
  });

  it('a restarted agent does not announce again what the status it found says failed', async () => {
    const events: string[] = [];
    const failures = new FailureEvents({ recordWarning: async (_reason, message) => void events.push(message) }, createLogger('silent'));
    expect(failures.primed).toBe(false);
    failures.prime(failed('a', 2, 'no disk'));
    expect(failures.primed).toBe(true);
    await failures.announce(failed('a', 2, 'no disk'));
    expect(events).toEqual([]);
  });

  it('an Event that cannot be recorded is no error; without Events nothing is recorded', async () => {
    const failures = new FailureEvents({ recordWarning: async () => Promise.reject(new Error('forbidden')) }, createLogger('silent'));
    await expect(failures.announce(failed('a', 1, 'x'))).resolves.toBeUndefined();
    await expect(new FailureEvents({}, createLogger('silent')).announce(failed('a', 1, 'x'))).resolves.toBeUndefined();
  });
});
