import { describe, expect, it } from 'vitest';
import { TransferLanes, type Lane } from './lanes.js';

/** Work that runs until its test lets it go; records when it started. */
class Gate {
  readonly started: string[] = [];
  private readonly open = new Map<string, () => void>();

  work(name: string, then?: () => void) {
    return async (signal: AbortSignal): Promise<void> => {
      this.started.push(name);
      await new Promise<void>((resolve, reject) => {
        this.open.set(name, resolve);
        signal.addEventListener('abort', () => reject(new Error(`${name} aborted`)));
      });
      then?.();
    };
  }

  async finish(name: string): Promise<void> {
    this.open.get(name)!();
    // Let the lane's bookkeeping run (finally, then the next start).
    for (let i = 0; i < 5; i++) await Promise.resolve();
  }
}

describe('transfer lanes', () => {
  it('holds big blobs to their slots while light work is left, largest first, then gives them every slot', async () => {
    const gate = new Gate();
    const lanes = new TransferLanes(4, 1);
    const add = (lane: Lane, name: string, bytes: number) => lanes.add(lane, bytes, gate.work(name));
    add('light', 'manifest-a', 0);
    add('light', 'manifest-b', 0);
    add('light', 'small-c', 1);
    add('light', 'small-d', 1);
    add('bulk', 'big-10', 10);
    add('bulk', 'big-30', 30);
    add('bulk', 'big-20', 20);
    // Light work took every slot as it came; then slots free up for one bulk job at a time.
    expect(gate.started).toEqual(['manifest-a', 'manifest-b', 'small-c', 'small-d']);
    await gate.finish('small-d');
    expect(gate.started.slice(4)).toEqual(['big-30']);
    await gate.finish('big-30');
    // Light work is still running: the next largest big blob takes the one bulk slot, and
    // the slots light work frees stay empty rather than go to bulk.
    expect(gate.started.slice(5)).toEqual(['big-20']);
    await gate.finish('manifest-a');
    expect(gate.started.slice(6)).toEqual([]);
    for (const name of ['manifest-b', 'small-c']) await gate.finish(name);
    // No light work left: bulk takes every free slot.
    expect(gate.started.slice(6)).toEqual(['big-10']);
    const drained = lanes.drained();
    for (const name of ['big-20', 'big-10']) await gate.finish(name);
    await expect(drained).resolves.toBeUndefined();
  });

  it('counts connections: a big blob in Range parts takes one per part, and gets what is free while light work is left', async () => {
    const gate = new Gate();
    const widths = new Map<string, number>();
    const lanes = new TransferLanes(8, 4);
    const bulk = (name: string, bytes: number, width: number) => lanes.add('bulk', bytes, (signal, given) => {
      widths.set(name, given);
      return gate.work(name)(signal);
    }, width);
    for (const name of ['manifest-a', 'manifest-b']) lanes.add('light', 0, gate.work(name));
    bulk('layer-3-parts', 300, 3);
    bulk('layer-4-parts', 200, 4);
    bulk('layer-2-parts', 100, 2);
    // Four connections for bulk while light work is left: three parts, then the one left.
    expect(gate.started).toEqual(['manifest-a', 'manifest-b', 'layer-3-parts', 'layer-4-parts']);
    expect([...widths]).toEqual([['layer-3-parts', 3], ['layer-4-parts', 1]]);
    for (const name of ['manifest-a', 'manifest-b']) await gate.finish(name);
    // No light work left: every connection, so the last one gets all the parts it asked for.
    expect(widths.get('layer-2-parts')).toBe(2);
    const drained = lanes.drained();
    for (const name of ['layer-3-parts', 'layer-4-parts', 'layer-2-parts']) await gate.finish(name);
    await expect(drained).resolves.toBeUndefined();
  });

  it('runs work that light work queues, and drains only when that is done too', async () => {
    const gate = new Gate();
    const lanes = new TransferLanes(2, 1);
    lanes.add('light', 0, gate.work('manifest', () => {
      lanes.add('bulk', 50, gate.work('layer'));
      lanes.add('light', 1, gate.work('config'));
    }));
    let drained = false;
    const done = lanes.drained().then(() => (drained = true));
    await gate.finish('manifest');
    expect(gate.started).toEqual(['manifest', 'layer', 'config']);
    await gate.finish('layer');
    expect(drained).toBe(false);
    await gate.finish('config');
    await done;
    expect(drained).toBe(true);
  });

  it('stops at the first failure: queued work dropped, running work aborted, the failure rethrown once all settled', async () => {
    const lanes = new TransferLanes(2, 1);
    const aborted: string[] = [];
    const started: string[] = [];
    const slow = (name: string) => async (signal: AbortSignal) => {
      started.push(name);
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => {
        aborted.push(name);
        resolve();
      }));
    };
    lanes.add('bulk', 10, slow('big'));
    lanes.add('light', 0, async () => {
      started.push('failing');
      throw new Error('manifest not found');
    });
    lanes.add('light', 0, slow('never'));
    await expect(lanes.drained()).rejects.toThrow('manifest not found');
    expect(started).toEqual(['big', 'failing']);
    expect(aborted).toEqual(['big']);
    lanes.add('light', 0, slow('after'));
    expect(started).not.toContain('after');
  });
});
