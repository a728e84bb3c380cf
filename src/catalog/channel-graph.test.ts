import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { channelHead, replacesChain } from './channel-graph.js';
import type { CatalogChannel, ChannelEntry } from './declcfg.js';

function entry(name: string, replaces?: string, skips: string[] = [], skipRange?: string): ChannelEntry {
  return { name, replaces, skips, skipRange };
}

function channel(...entries: ChannelEntry[]): CatalogChannel {
  return { name: 'stable', package: 'etcd', entries };
}

describe('channelHead', () => {
  it('is the entry nothing replaces or skips, whatever the entry order', () => {
    const ch = channel(entry('etcd.v0.9.2', 'etcd.v0.9.0'), entry('etcd.v0.9.4', 'etcd.v0.9.2', ['etcd.v0.9.3']), entry('etcd.v0.9.0'));
    expect(channelHead(ch, 'community').name).toBe('etcd.v0.9.4');
  });

  it('is the only entry of a one-bundle channel', () => {
    expect(channelHead(channel(entry('etcd.v0.6.1')), 'community').name).toBe('etcd.v0.6.1');
  });

  it('ignores replaces and skips of bundles outside the channel', () => {
    const ch = channel(entry('etcd.v0.9.4', 'etcd.v0.9.2', ['etcd.v0.9.3'], '>=0.9.0 <0.9.4'));
    expect(channelHead(ch, 'community').name).toBe('etcd.v0.9.4');
  });

  it('refuses a channel with two heads, naming both', () => {
    const ch = channel(entry('etcd.v0.9.4', 'etcd.v0.9.2'), entry('etcd.v0.9.3', 'etcd.v0.9.2'), entry('etcd.v0.9.2'));
    expect(() => channelHead(ch, 'community')).toThrow(BadInputError);
    expect(() => channelHead(ch, 'community')).toThrow(/catalog community: package etcd channel stable has 2 heads \(etcd\.v0\.9\.4, etcd\.v0\.9\.3\)/);
  });

  it('refuses a channel whose entries all replace each other (no head)', () => {
    const ch = channel(entry('a.v2', 'a.v1'), entry('a.v1', 'a.v2'));
    expect(() => channelHead(ch, 'community')).toThrow(/has no head/);
  });

  it('refuses an empty channel and a channel listing a bundle twice', () => {
    expect(() => channelHead(channel(), 'community')).toThrow(/has no entries/);
    expect(() => channelHead(channel(entry('a.v1'), entry('a.v1')), 'community')).toThrow(/lists bundle a\.v1 twice/);
  });
});

describe('replacesChain', () => {
  it('runs from the head along replaces, stopping at a bundle outside the channel', () => {
    const ch = channel(
      entry('etcd.v0.9.0', 'etcd.v0.6.1'),
      entry('etcd.v0.9.4', 'etcd.v0.9.2', ['etcd.v0.9.3']),
      entry('etcd.v0.9.2', 'etcd.v0.9.0'),
      entry('etcd.v0.9.3', 'etcd.v0.9.2'),
    );
    expect(replacesChain(ch, 'community').map((e) => e.name)).toEqual(['etcd.v0.9.4', 'etcd.v0.9.2', 'etcd.v0.9.0']);
  });

  it('refuses a replaces cycle below the head', () => {
    const ch = channel(entry('a.v4', 'a.v3'), entry('a.v3', 'a.v2'), entry('a.v2', 'a.v3'));
    expect(() => replacesChain(ch, 'community')).toThrow(/replaces cycle \(a\.v4 -> a\.v3 -> a\.v2 -> a\.v3\)/);
  });
});
