/**
 * The plain flag `--package NAME[/CHANNEL][@RANGE]`: one package selection without writing an
 * ImageSetConfiguration. RANGE is `V` (exactly V), `MIN..MAX`, `MIN..` or `..MAX`, inclusive, as
 * oc-mirror's minVersion/maxVersion are; select.ts applies it like any other selection.
 */
import semver from 'semver';
import { BadInputError } from '../errors.js';
import type { PackageSelection } from './selection.js';

const GRAMMAR = 'NAME[/CHANNEL][@RANGE], RANGE one of V, MIN..MAX, MIN.., ..MAX (e.g. --package etcd/stable@0.9.2..0.9.4)';

/** Package names are DNS-1123-like (lowercase, digits, `-` and `.`); channel names are freer (`stable-v1.2`, `4.16`). */
const NAME = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/;
const CHANNEL = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,252}$/;

function refuse(text: string, why: string): never {
  throw new BadInputError(`--package ${JSON.stringify(text)}: ${why}; write ${GRAMMAR}`);
}

/** A full semantic version, a leading `v` dropped: `v1.2.3` gives `1.2.3`. */
function version(text: string, part: string, flag: string): string {
  const v = text.replace(/^v/, '');
  if (!/^\d/.test(v) || semver.valid(v) === null) refuse(flag, `${part} "${text}" is not a semantic version like 1.2.3`);
  return v;
}

function range(text: string, flag: string): { minVersion?: string; maxVersion?: string } {
  const dots = text.indexOf('..');
  if (dots === -1) {
    const exact = version(text, 'version', flag);
    return { minVersion: exact, maxVersion: exact };
  }
  const min = text.slice(0, dots);
  const max = text.slice(dots + 2);
  if (!min && !max) refuse(flag, 'the range ".." names no version');
  const minVersion = min ? version(min, 'MIN', flag) : undefined;
  const maxVersion = max ? version(max, 'MAX', flag) : undefined;
  if (minVersion && maxVersion && semver.gt(minVersion, maxVersion)) refuse(flag, `MIN ${minVersion} is above MAX ${maxVersion}`);
  const bounds: { minVersion?: string; maxVersion?: string } = {};
  if (minVersion) bounds.minVersion = minVersion;
  if (maxVersion) bounds.maxVersion = maxVersion;
  return bounds;
}

/**
 * A range with a channel goes on the channel, without one on the package (every channel of it).
 * A named channel also becomes the filtered package's default channel: oc-mirror refuses a filter
 * that drops the default channel without naming another, and the flag has no other way to name it.
 */
export function parsePackageFlag(text: string): PackageSelection {
  const at = text.indexOf('@');
  const path = at === -1 ? text : text.slice(0, at);
  const rangeText = at === -1 ? undefined : text.slice(at + 1);
  const [name = '', channel, ...rest] = path.split('/');
  if (rest.length > 0) refuse(text, 'more than one "/"');
  if (!NAME.test(name)) refuse(text, `package name "${name}" must be lowercase letters, digits, "-" and "."`);
  if (channel !== undefined && !CHANNEL.test(channel)) refuse(text, `channel name "${channel}" must be letters, digits, ".", "_", "+" and "-"`);
  if (rangeText === '') refuse(text, 'nothing after "@"');
  const bounds = rangeText === undefined ? {} : range(rangeText, text);
  if (channel === undefined) return { name, ...bounds, channels: [] };
  return { name, defaultChannel: channel, channels: [{ name: channel, ...bounds }] };
}
