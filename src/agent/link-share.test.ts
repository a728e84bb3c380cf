import { describe, expect, it } from 'vitest';
import { linkCharges, LeaseLinkLedger, LINK_LEDGER_ANNOTATION, MemoryLinkLedger } from './link-share.js';
import type { KubeClient } from '../kube/client.js';
import { createLogger } from '../telemetry/log.js';
import { virtualClock } from '../../test/support/virtual-clock.js';
import type { SizeResult } from './image-sizes.js';

const layer = (name: string, linkBytes: number) => ({ digest: `sha256:${name}`, diskBytes: linkBytes * 2, linkBytes, exact: true });

describe('linkCharges', () => {
  it('charges each new layer once, to the first image that pulls it, plus its config and manifests; stored layers cost nothing; unknown images fall back', () => {
    const sizes = new Map<string, SizeResult>([
      ['stored', { layers: [layer('base', 100)], from: 'r' }],
      ['a', { layers: [layer('base', 100), layer('mid', 30), layer('a', 5)], from: 'r', overheadBytes: 0 }],
      ['b', { layers: [layer('base', 100), layer('mid', 30), layer('b', 7)], from: 'r', overheadBytes: 3 }],
      ['c', { error: 'not found' }],
    ]);
    const charges = linkCharges(['a', 'b', 'c', 'd'], new Set(['stored']), sizes, (image) => (image === 'c' ? 42 : undefined));
    expect(Object.fromEntries(charges)).toEqual({ a: 35, b: 10, c: 42, d: 0 });
  });
});

describe('MemoryLinkLedger', () => {
  it('holds starts to the cap over 5 s, whatever cap each start brings', async () => {
    const clock = virtualClock();
    const ledger = new MemoryLinkLedger(clock);
    const t0 = clock.now();
    await ledger.start(6_000, 2_000);
    await ledger.start(4_000, 2_000);
    expect(clock.now()).toBe(t0);
    await ledger.start(1, 2_000);
    expect(clock.now()).toBe(t0 + 5_001);
  });
});

describe('LeaseLinkLedger', () => {
  it('counts an entry from a clock a little ahead of ours from now, and drops one hours ahead', async () => {
    const clock = virtualClock();
    const lease = { metadata: { name: 'prestage-link', namespace: 'prestage', resourceVersion: '1', annotations: { [LINK_LEDGER_ANNOTATION]: JSON.stringify([[clock.now() + 10 * 3_600_000, 10_000], [clock.now() + 2_000, 9_500]]) } }, spec: {} };
    const writes: unknown[] = [];
    const client = {
      find: async () => lease,
      request: async (_method: string, _path: string, options: { body: unknown }) => void writes.push(options.body),
    } as unknown as KubeClient;
    const ledger = new LeaseLinkLedger(client, { namespace: 'prestage', holder: 'node-a', log: createLogger('silent'), clock });
    const t0 = clock.now();
    // The 9.5 kB stamped 2 s ahead fill the window (10 kB at 2 kB/s) until 5 s past that stamp;
    // the 10 kB stamped ten hours ahead are dropped, or nothing would start for ten hours.
    await ledger.start(1_000, 2_000);
    expect(clock.now() - t0).toBeGreaterThanOrEqual(5_000);
    expect(clock.now() - t0).toBeLessThanOrEqual(7_001);
    expect(writes).toHaveLength(1);
  });
});
