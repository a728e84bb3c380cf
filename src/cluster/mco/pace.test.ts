import { describe, expect, it } from 'vitest';
import { DEFAULT_FAIL_AFTER_MS, DEFAULT_TIMEOUT_MS, mcoPace, mcoWaitDefaults, paceLines, predictMcoNode, predictMcoNodes } from './pace.js';

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const bytes = (n: number) => `${(n / MiB).toFixed(0)} MiB`;

describe('MCO pace', () => {
  it('has the deadline of each release: 2 min before 4.22, 5 min from 4.22 (and unknown = the older)', () => {
    expect(['4.16.3', '4.21.9', '4.22.0', '5.0.2', undefined].map((v) => mcoPace(v).deadlineSeconds)).toEqual([120, 120, 300, 300, 120]);
  });

  it('predicts the one run of the real daemon on record: 190 tiny images on a master at MCO main took 4 min 37 s (within 10%)', () => {
    const p = predictMcoNode({ node: 'master-0', master: true, images: 190, compressedBytes: 190 * 1024 }, mcoPace('4.22.0'), 100 * MiB);
    expect(Math.abs(p.seconds - 277) / 277).toBeLessThan(0.1);
    expect(p).toMatchObject({ workers: 1, pauseSeconds: 190, inspectSeconds: 76, deadlines: 0 });
  });

  it('before 4.22 the same master passes its 2 min deadline and is requeued; a worker pauses a fifth as long', () => {
    const master = predictMcoNode({ node: 'master-0', master: true, images: 190, compressedBytes: 0 }, mcoPace('4.21.0'), undefined);
    expect(master.deadlines).toBeGreaterThanOrEqual(1);
    expect(master.seconds).toBeGreaterThan(predictMcoNode({ node: 'master-0', master: true, images: 190, compressedBytes: 0 }, mcoPace('4.22.0'), undefined).seconds);
    const worker = predictMcoNode({ node: 'worker-0', master: false, images: 190, compressedBytes: 0 }, mcoPace('4.21.0'), undefined);
    expect(worker).toMatchObject({ workers: 5, pauseSeconds: 38, deadlines: 0 });
    expect(worker.seconds).toBe(76 + 38);
  });

  it('counts the bytes at each node\'s share of the link: every node pulls at once', () => {
    const works = [
      { node: 'master-0', master: true, images: 100, compressedBytes: 10 * GiB },
      { node: 'worker-0', master: false, images: 100, compressedBytes: 10 * GiB },
    ];
    const [master, worker] = predictMcoNodes(works, mcoPace('4.20.1'), 20 * MiB);
    // 10 GiB at 10 MiB/s = 1024 s of bytes on each node.
    expect([master!.bytesSeconds, worker!.bytesSeconds]).toEqual([1024, 1024]);
    // 10 s per image: the worker too passes its deadline while queueing; the requeues cost a little.
    expect(worker!.deadlines).toBeGreaterThan(5);
    expect(worker!.seconds).toBeGreaterThan(40 + 1024 + 20);
    expect(worker!.seconds).toBeLessThan((40 + 1024 + 20) * 1.1);
    // The master's 100 pauses come on top of its bytes, and its deadlines cost idle requeues.
    expect(master!.seconds).toBeGreaterThanOrEqual(40 + 1024 + 100);
    expect(master!.deadlines).toBeGreaterThan(5);
  });

  it('sets --timeout to twice the slowest node (at least 60m) and --fail-after to a retry (at least 10m), saying why', () => {
    const quick = mcoWaitDefaults(predictMcoNodes([{ node: 'w', master: false, images: 10, compressedBytes: 10 * MiB }], mcoPace('4.21.0'), 10 * MiB), mcoPace('4.21.0'));
    expect([quick.timeoutMs, quick.failAfterMs]).toEqual([DEFAULT_TIMEOUT_MS, DEFAULT_FAIL_AFTER_MS]);
    const slow = predictMcoNodes([{ node: 'master-0', master: true, images: 400, compressedBytes: 80 * GiB }], mcoPace('4.22.0'), 20 * MiB);
    const defaults = mcoWaitDefaults(slow, mcoPace('4.22.0'));
    expect(defaults.timeoutMs).toBe(Math.ceil((2 * slow[0]!.seconds) / 60) * 60_000);
    expect(defaults.reasons[0]).toMatch(/^--timeout \dh\d*m?: twice the slowest node's \dh\d\dm \(master-0\)$/);
    // One 205 MiB image at 20 MiB/s is 10 s: a deadline, an 82 s requeue, 5 tries and their 15 s of backoff.
    expect(defaults.failAfterMs).toBe(DEFAULT_FAIL_AFTER_MS);
    expect(defaults.reasons[1]).toBe('--fail-after 10m: the default; a failed pull is retried by the next sync within 7m28s (a 5m00s deadline, an 82 s requeue, 5 tries)');
  });

  it('prints one line per node with what its time is made of', () => {
    const pace = mcoPace('4.21.3');
    const lines = paceLines(predictMcoNodes([{ node: 'worker-0', master: false, images: 50, compressedBytes: 500 * MiB }], pace, undefined), pace, undefined, bytes);
    expect(lines).toEqual([
      'MCO 4.21.3 pace: 2m00s sync deadline, 5 pull workers (1 on masters), a 1 s pause after every image; bytes not counted (give --link-rate for them)',
      '  worker-0: 50 images, about 30s+ (20s disk check, 10s pauses on 5 workers)',
    ]);
  });
});
