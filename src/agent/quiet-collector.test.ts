import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../telemetry/log.js';
import { compactingCollection, QuietCollector } from './quiet-collector.js';
import { NodeAgent, type AgentCluster } from './reconcile.js';
import { MemoryRuntime } from '../../test/support/memory-runtime.js';

describe('QuietCollector', () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
  afterEach(() => void vi.useRealTimers());

  it('collects once after the passes stay quiet, and a pass that starts meanwhile puts it off', () => {
    const collect = vi.fn();
    const collector = new QuietCollector({ afterMs: 5_000, collect });
    collector.quiet();
    vi.advanceTimersByTime(4_000);
    collector.busy();
    vi.advanceTimersByTime(10_000);
    expect(collect).not.toHaveBeenCalled();
    collector.quiet();
    collector.quiet();
    vi.advanceTimersByTime(5_000);
    expect(collect).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(60_000);
    expect(collect).toHaveBeenCalledTimes(1);
  });

  it('does nothing where node runs without --expose-gc', () => {
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
    const collector = new QuietCollector({ afterMs: 5_000 });
    collector.quiet();
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('compactingCollection', () => {
  it('compacts for its own collection only, and restores the default when the collection throws', () => {
    const flags: string[] = [];
    compactingCollection(() => void flags.push('gc'), (flag) => void flags.push(flag));
    expect(flags).toEqual(['--compact-on-every-full-gc', 'gc', '--no-compact-on-every-full-gc']);
    flags.length = 0;
    expect(() =>
      compactingCollection(
        () => {
          throw new Error('collection failed');
        },
        (flag) => void flags.push(flag),
      ),
    ).toThrow('collection failed');
    expect(flags).toEqual(['--compact-on-every-full-gc', '--no-compact-on-every-full-gc']);
  });
});

describe('NodeAgent and its quiet collector', () => {
  it('says busy when a pass starts and quiet once no pass runs or is queued, not per pass', async () => {
    const events: string[] = [];
    const cluster: AgentCluster = { pinnedImageSets: () => [], nodeLabels: () => ({}), readStatus: async () => undefined, writeStatus: async () => void events.push('status') };
    const agent = new NodeAgent({
      nodeName: 'n',
      runtime: new MemoryRuntime(2 ** 30),
      cluster,
      log: createLogger('silent'),
      concurrency: 1,
      reserveBytes: 0,
      quietCollector: { busy: () => void events.push('busy'), quiet: () => void events.push('quiet') },
    });
    agent.trigger();
    // A second request during the pass coalesces into one more pass, and the quiet comes after both.
    agent.trigger();
    await agent.idle();
    expect(events).toEqual(['busy', 'status', 'status', 'quiet']);
    await agent.stop();
  });
});
