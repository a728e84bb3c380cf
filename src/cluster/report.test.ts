import { describe, expect, it } from 'vitest';
import { LINK_LEDGER_ANNOTATION } from '../api/names.js';
import type { KubeClient } from '../kube/client.js';
import { eventSamples, ledgerSamples } from './report.js';

describe('the link over time', () => {
  it("reads wait -o json's link events, skipping other events and lines that are not JSON", () => {
    const lines = [
      JSON.stringify({ type: 'node', time: '2026-12-02T16:00:00Z' }),
      'not json',
      JSON.stringify({ type: 'link', time: '2026-12-02T16:00:01Z', bytesPerSecond: 400_000, capBytesPerSecond: 524_288 }),
      JSON.stringify({ type: 'link', time: 'yesterday', bytesPerSecond: 1 }),
      JSON.stringify({ type: 'link', time: '2026-12-02T16:00:03Z', bytesPerSecond: -5 }),
      JSON.stringify({ type: 'link', time: '2026-12-02T16:00:05Z', bytesPerSecond: 500_000 }),
    ];
    expect(eventSamples(lines.join('\n'))).toEqual({
      source: 'wait -o json link events',
      capBytesPerSecond: 524_288,
      samples: [{ time: '2026-12-02T16:00:01Z', bytesPerSecond: 400_000 }, { time: '2026-12-02T16:00:05Z', bytesPerSecond: 500_000 }],
    });
    expect(eventSamples('{}\n')).toBeUndefined();
  });

  it("turns the ledger Lease's charges into 5 s rates, empty ones between too; a bad annotation gives none", async () => {
    const lease = (annotation: string) => ({ find: async () => ({ metadata: { name: 'prestage-link', annotations: { [LINK_LEDGER_ANNOTATION]: annotation } } }) }) as unknown as KubeClient;
    const at = Date.parse('2026-12-02T16:00:00Z');
    const entries = [[at, 50_000], [at + 1_000, 50_000, at + 2_000, 'a'], [at + 10_000, 25_000], ['x', 1], [at, -1]];
    expect(await ledgerSamples(lease(JSON.stringify(entries)), 'prestage', 524_288)).toEqual({
      source: "the charges on Lease prestage/prestage-link (the agents' ledger, its last entries)",
      capBytesPerSecond: 524_288,
      samples: [
        { time: '2026-12-02T16:00:00Z', bytesPerSecond: 20_000 },
        { time: '2026-12-02T16:00:05Z', bytesPerSecond: 0 },
        { time: '2026-12-02T16:00:10Z', bytesPerSecond: 5_000 },
      ],
    });
    expect(await ledgerSamples(lease('{'), 'prestage', undefined)).toBeUndefined();
  });
});
