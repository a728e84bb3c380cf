import { describe, expect, it } from 'vitest';
import { RetrySummary } from './retry-summary.js';

const retry = (registry: string, reason: string) => ({ kind: 'retry' as const, registry, url: `${registry}/v2/x`, attempt: 1, delayMs: 10, reason });

describe('RetrySummary', () => {
  it('sums retries per registry by cause, the most frequent first', () => {
    const summary = new RetrySummary();
    for (let i = 0; i < 8; i++) summary.record(retry('quay.io', 'HTTP 429 (TOOMANYREQUESTS: slow down)'));
    for (let i = 0; i < 4; i++) summary.record(retry('quay.io', 'connection error ECONNRESET at byte 1024'));
    summary.record(retry('mirror:5000', 'stalled transfer'));
    expect(summary.lines()).toEqual(['quay.io: 12 retries (HTTP 429 x8, ECONNRESET x4)', 'mirror:5000: 1 retry (stalled transfer x1)']);
  });
  it('has nothing to say without retries', () => {
    expect(new RetrySummary().lines()).toEqual([]);
  });
});
