import { describe, expect, it } from 'vitest';
import { PREFLIGHT_API_VERSION, type Preflight, type PreflightNode } from '../api/preflight.js';
import { renderPreflight } from './preflight-table.js';

const MiB = 2 ** 20;
const node = (name: string, storage: PreflightNode['storage'], reasons: string[] = []): PreflightNode => ({
  node: name, role: 'worker', sets: [{ set: 'prestage-4.16.3-worker', images: 58, present: 8, fetchBytes: 8 * MiB, writeBytes: 12 * MiB, ...(reasons.length ? { refused: 'does not fit' } : {}) }],
  images: 58, present: 8, pulls: 50, fetchBytes: 8 * MiB, writeBytes: 12 * MiB, storage, heldFrom: 'agent', verdict: reasons.length ? 'NO-GO' : 'GO', reasons,
});
const preflight = (nodes: PreflightNode[], eta?: Preflight['eta']): Preflight => ({
  apiVersion: PREFLIGHT_API_VERSION, kind: 'Preflight', time: '2026-12-02T16:00:00Z', backend: 'agent', verdict: nodes.some((n) => n.verdict === 'NO-GO') ? 'NO-GO' : 'GO',
  reasons: nodes.flatMap((n) => n.reasons), sets: ['prestage-4.16.3-worker'], nodes,
  totals: { nodes: nodes.length, fetchBytes: 8 * MiB * nodes.length, linkBytes: 8 * MiB, writeBytes: 12 * MiB * nodes.length }, ...(eta ? { eta } : {}), assumptions: ['worker-9: \u001b[31mred\u001b[0m'],
});

describe('renderPreflight', () => {
  it('says each rule in its own terms, each reason on a NO-GO line, what was assumed (escaped), and the verdict last', () => {
    const text = renderPreflight(preflight([
      node('worker-0', { rule: 'agent', availableBytes: 100 * MiB, reserveBytes: 16 * MiB, neededBytes: 12 * MiB }),
      node('worker-1', { rule: 'mco', availableBytes: 20 * 2 ** 30, reserveBytes: 16 * 2 ** 30, neededBytes: 16 * MiB }, ['worker-1: prestage-4.16.3-worker is refused by MCO\'s disk check']),
    ]));
    expect(text).toMatch(/^worker-0 .* agent: 12\.0 MiB of 100\.0 MiB free \(16\.0 MiB kept\)\s+GO$/m);
    expect(text).toMatch(/^worker-1 .* mco: 2x 8\.0 MiB of 20\.0 GiB allocatable - 16 GiB\s+NO-GO$/m);
    expect(text).toContain("NO-GO worker-1: prestage-4.16.3-worker is refused by MCO's disk check\n");
    expect(text).not.toContain('\u001b');
    expect(text.trimEnd().split('\n').at(-1)).toBe('NO-GO: 2 nodes, 1 set, 1 reason');
  });

  it('shows the ETA and whether it fits the window; -o wide a row per set', () => {
    const text = renderPreflight(preflight([node('worker-0', { rule: 'agent', availableBytes: 100 * MiB, reserveBytes: 0, neededBytes: 12 * MiB })], { seconds: 70, bytesPerSecond: 512 * 1024, rateFrom: 'cap', pullSeconds: 19, doneBy: '2026-12-02T16:01:10Z', window: { opens: '2026-12-02T16:00:00Z', closes: '2026-12-02T19:00:00Z', fits: true } }), true);
    expect(text).toMatch(/^eta: 1m10s at 512 KiB\/s .* \(cap; 19s of it pulls one by one\), done by 2026-12-02T16:01:10Z; window .*: fits$/m);
    expect(text).toMatch(/^ {2}prestage-4\.16\.3-worker\s+58\s+8 /m);
    expect(text.trimEnd().split('\n').at(-1)).toBe('GO: 1 node, 1 set, every node has the room and staging fits the window');
  });
});
