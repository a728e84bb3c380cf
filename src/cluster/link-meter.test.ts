import { describe, expect, it } from 'vitest';
import { LinkMeter } from './link-meter.js';

const MiB = 2 ** 20;

describe('LinkMeter', () => {
  it('measures the rate over the last 10 s, against the cap, with the ETA of what is still to start', () => {
    const meter = new LinkMeter('nodes');
    const first = meter.sample({ bytes: 100 * MiB, pendingBytes: 20 * MiB, capBytesPerSecond: 2 * MiB }, 0);
    // Nothing measured yet: the ETA is at the cap.
    expect(first).toMatchObject({ bytes: 0, capBytesPerSecond: 2 * MiB, etaSeconds: 10 });
    expect(first.bytesPerSecond).toBeUndefined();
    for (let second = 1; second <= 20; second++) meter.sample({ bytes: 100 * MiB + second * 1.5 * MiB, pendingBytes: 20 * MiB - second * 0.9 * MiB, capBytesPerSecond: 2 * MiB }, second * 1000);
    const last = meter.sample({ bytes: 100 * MiB + 31.5 * MiB, pendingBytes: 1 * MiB, capBytesPerSecond: 2 * MiB }, 21_000);
    expect(last.bytes).toBe(31.5 * MiB);
    expect(last.bytesPerSecond).toBe(Math.round(1.5 * MiB));
    expect(last.etaSeconds).toBe(1);
  });

  it('starts over when the counter goes back (an agent restarted)', () => {
    const meter = new LinkMeter('nodes');
    meter.sample({ bytes: 50 }, 0);
    meter.sample({ bytes: 80 }, 2_000);
    expect(meter.sample({ bytes: 10 }, 3_000).bytesPerSecond).toBeUndefined();
  });
});
