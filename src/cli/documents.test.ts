import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { machineFormat, renderDocument, renderEvent, renderNames } from './documents.js';

const value = { release: '4.16.3', sets: [{ name: 'prestage-4-16-3-worker', nodes: ['w1', 'w2'] }], freed: { w1: 1024 } };

describe('renderDocument', () => {
  it('prints one indented JSON object that parses back to the value', () => {
    const text = renderDocument('json', value);
    expect(text.endsWith('}\n')).toBe(true);
    expect(text.split('\n')[1]).toBe('  "release": "4.16.3",');
    expect(JSON.parse(text)).toEqual(value);
  });

  it('prints the same object as YAML, long strings unfolded', () => {
    const long = { line: 'x'.repeat(200) };
    expect(yaml.load(renderDocument('yaml', value))).toEqual(value);
    expect(renderDocument('yaml', long)).toBe(`line: ${'x'.repeat(200)}\n`);
  });
});

describe('renderEvent', () => {
  it('prints JSON lines, one event each', () => {
    expect(renderEvent('json', { type: 'set', set: 'a' }) + renderEvent('json', { type: 'set', set: 'b' })).toBe('{"type":"set","set":"a"}\n{"type":"set","set":"b"}\n');
  });

  it('prints a YAML stream, one document per event', () => {
    const text = renderEvent('yaml', { type: 'set', set: 'a' }) + renderEvent('yaml', { type: 'node', node: 'w1' });
    expect(text).toBe('---\ntype: set\nset: a\n---\ntype: node\nnode: w1\n');
    expect(yaml.loadAll(text)).toEqual([{ type: 'set', set: 'a' }, { type: 'node', node: 'w1' }]);
  });
});

describe('renderNames', () => {
  it('prints KIND/NAME per object as kubectl -o name does', () => {
    expect(renderNames('pinnedimageset', ['b', 'a'])).toBe('pinnedimageset/b\npinnedimageset/a\n');
    expect(renderNames('pinnedimageset', [])).toBe('');
  });
});

describe('machineFormat', () => {
  it('takes json and yaml, leaves the text formats to the command', () => {
    expect(machineFormat('json')).toBe('json');
    expect(machineFormat('yaml')).toBe('yaml');
    expect(machineFormat('text')).toBeUndefined();
    expect(machineFormat('table')).toBeUndefined();
    expect(machineFormat(undefined)).toBeUndefined();
  });
});
