import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { renderPruneResult, type PruneResult } from './prune.js';

const result: PruneResult = {
  current: '4.16.3',
  dryRun: 'server',
  prune: [
    { name: 'prestage-4-16-2-worker', release: '4.16.2', why: 'release 4.16.2 is older than 4.16.3', diskBytes: 2048, nodes: ['w1', 'w2'], result: 'deleted' },
    { name: 'prestage-4-16-2-control-plane', release: '4.16.2', why: 'release 4.16.2 is older than 4.16.3', nodes: [], result: 'gone' },
  ],
  kept: [{ name: 'prestage-4-16-3-worker', release: '4.16.3' }],
  freedBytesPerNode: { w1: 2048, w2: 2048 },
};

describe('renderPruneResult', () => {
  it('names each set deleted or that would be, as kubectl -o name does', () => {
    expect(renderPruneResult('name', result)).toBe('pinnedimageset/prestage-4-16-2-worker\npinnedimageset/prestage-4-16-2-control-plane\n');
    expect(renderPruneResult('name', { ...result, prune: [] })).toBe('');
  });

  it('prints the same object as JSON and YAML', () => {
    expect(JSON.parse(renderPruneResult('json', result))).toEqual(result);
    expect(yaml.load(renderPruneResult('yaml', result))).toEqual(result);
  });
});
