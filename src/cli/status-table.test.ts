import { describe, expect, it } from 'vitest';
import type { ProgressSnapshot } from '../cluster/backend.js';
import { renderStatusTable } from './status-table.js';

const sets: ProgressSnapshot['sets'] = [{ name: 'workers', exists: true, generation: 1, nodes: [{ node: 'worker-0', set: 'workers', phase: 'done', currentGeneration: 1, desiredGeneration: 1 }] }];

describe('status: which cache a node pulls from', () => {
  it('names the leaf, then the root, then the source; a node without a leaf the root; hostile text escaped', () => {
    const text = renderStatusTable({
      sets,
      caches: [
        { node: 'worker-0', leaf: 'zone-a', locations: ['10.0.0.7:5000', '10.0.0.5:5000'] },
        { node: 'worker-1', locations: ['10.0.0.5:5000'] },
        { node: 'worker-2\u001b[31m', locations: ['10.0.0.5:5000'] },
      ],
    });
    expect(text).toContain('\nnode worker-0 pulls through leaf zone-a (10.0.0.7:5000), then root 10.0.0.5:5000, then the source\n');
    expect(text).toContain('node worker-1 pulls through root 10.0.0.5:5000, then the source\n');
    expect(text).not.toContain('\u001b');
    expect(renderStatusTable({ sets })).not.toContain('pulls through');
  });
});
