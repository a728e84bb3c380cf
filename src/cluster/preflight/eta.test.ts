import { describe, expect, it } from 'vitest';
import { parseWindow } from '../../api/staging.js';
import { stagingEta } from './eta.js';

const MiB = 2 ** 20;
const at = (time: string) => Date.parse(`2026-12-02T${time}Z`);
const nightly = { windows: [parseWindow('22:00-06:00')], timeZone: 'UTC', strict: false };

describe('stagingEta', () => {
  it('is the link bytes at the rate without windows', () => {
    const { eta, reason } = stagingEta({ linkBytes: 600 * MiB, bytesPerSecond: 10 * MiB, rateFrom: 'cap', serialImages: 0, now: at('12:00:00') });
    expect(eta).toEqual({ seconds: 60, bytesPerSecond: 10 * MiB, rateFrom: 'cap', pullSeconds: 0, doneBy: '2026-12-02T12:01:00Z' });
    expect(reason).toBeUndefined();
  });

  it('waits for the window to open, and fits when the bytes take less than it gives', () => {
    const { eta, reason } = stagingEta({ linkBytes: 3600 * MiB, bytesPerSecond: MiB, rateFrom: 'cap', serialImages: 0, schedule: nightly, now: at('12:00:00') });
    expect(eta.doneBy).toBe('2026-12-02T23:00:00Z');
    expect(eta.window).toEqual({ opens: '2026-12-02T22:00:00Z', closes: '2026-12-03T06:00:00Z', fits: true });
    expect(reason).toBeUndefined();
  });

  it('is NO-GO when the window is too short, naming the time needed, the room and the shortfall; the rest goes on in the next window', () => {
    const { eta, reason } = stagingEta({ linkBytes: 10 * 3600 * MiB, bytesPerSecond: MiB, rateFrom: 'cap', serialImages: 0, schedule: nightly, now: at('23:00:00') });
    // 7 h left of tonight's window, 3 h more the next night.
    expect(eta.doneBy).toBe('2026-12-04T01:00:00Z');
    expect(eta.window).toEqual({ opens: '2026-12-02T23:00:00Z', closes: '2026-12-03T06:00:00Z', fits: false });
    expect(reason).toMatch(/^staging needs 10h00m \(35.2 GiB over the link at 1 MiB\/s .*\), the window 2026-12-02T23:00:00Z to 2026-12-03T06:00:00Z leaves 7h00m: short by 3h00m; raise --link-rate/);
  });

  it("takes MCO's own pace when it is slower than the bytes", () => {
    expect(stagingEta({ linkBytes: MiB, bytesPerSecond: MiB, rateFrom: 'cap', serialImages: 0, floorSeconds: 300, now: at('12:00:00') }).eta.seconds).toBe(300);
  });
});

it("adds the busiest node's pulls one by one, each its fixed cost", () => {
  expect(stagingEta({ linkBytes: 50 * MiB, bytesPerSecond: MiB, rateFrom: 'cap', serialImages: 100, now: at('12:00:00') }).eta).toMatchObject({ seconds: 63, pullSeconds: 13 });
});
