/**
 * A channel as a graph: its head (the entry nothing else replaces or skips) and the replaces
 * chain down from it. operator-registry's model (`Channel.Head`, `validateReplacesChain`) refuses
 * a channel with no head, several heads or a replaces cycle; so do we, since every walk over a
 * channel (selection, the upgrade walk, dependency resolution) starts from its one head.
 */
import { BadInputError } from '../errors.js';
import type { CatalogChannel, ChannelEntry } from './declcfg.js';

function where(channel: CatalogChannel, catalogName: string): string {
  return `catalog ${catalogName}: package ${channel.package} channel ${channel.name}`;
}

/** The channel's entries by bundle name. */
function entriesByName(channel: CatalogChannel): Map<string, ChannelEntry> {
  return new Map(channel.entries.map((e) => [e.name, e]));
}

/** The one entry no other entry of the channel replaces or skips. */
export function channelHead(channel: CatalogChannel, catalogName: string): ChannelEntry {
  if (channel.entries.length === 0) {
    throw new BadInputError(`${where(channel, catalogName)} has no entries: a channel needs at least one bundle (opm validate refuses it); fix the catalog`);
  }
  const names = new Set<string>();
  for (const e of channel.entries) {
    if (names.has(e.name)) {
      throw new BadInputError(`${where(channel, catalogName)} lists bundle ${e.name} twice: opm validate refuses it; fix the catalog`);
    }
    names.add(e.name);
  }
  const reached = new Set<string>();
  for (const e of channel.entries) {
    // An edge to a bundle outside the channel is allowed (pruned or in another channel): it reaches no entry here.
    if (e.replaces !== undefined) reached.add(e.replaces);
    for (const s of e.skips) reached.add(s);
  }
  const heads = channel.entries.filter((e) => !reached.has(e.name));
  const [head, ...others] = heads;
  if (!head) {
    throw new BadInputError(`${where(channel, catalogName)} has no head (every entry is replaced or skipped by another, a cycle): opm validate refuses it; fix the catalog`);
  }
  if (others.length > 0) {
    const names = heads.map((e) => e.name).join(', ');
    throw new BadInputError(`${where(channel, catalogName)} has ${heads.length} heads (${names}): opm validate refuses it; fix the catalog so one entry replaces or skips the others`);
  }
  return head;
}

/** The head, then each entry it replaces in turn, while the replaced bundle is in the channel. */
export function replacesChain(channel: CatalogChannel, catalogName: string): ChannelEntry[] {
  const byName = entriesByName(channel);
  const chain: ChannelEntry[] = [];
  const seen = new Set<string>();
  let entry: ChannelEntry | undefined = channelHead(channel, catalogName);
  while (entry) {
    if (seen.has(entry.name)) {
      const cycle = [...chain.map((e) => e.name), entry.name].join(' -> ');
      throw new BadInputError(`${where(channel, catalogName)} has a replaces cycle (${cycle}): opm validate refuses it; fix the catalog`);
    }
    seen.add(entry.name);
    chain.push(entry);
    entry = entry.replaces ? byName.get(entry.replaces) : undefined;
  }
  return chain;
}
