import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { parsePackageFlag } from './package-flag.js';

describe('parsePackageFlag', () => {
  it('a bare name selects the package, every channel, no range', () => {
    expect(parsePackageFlag('cert-manager.io')).toEqual({ name: 'cert-manager.io', channels: [] });
  });

  it('a channel is selected and becomes the default channel', () => {
    expect(parsePackageFlag('etcd/singlenamespace-alpha')).toEqual({
      name: 'etcd', defaultChannel: 'singlenamespace-alpha', channels: [{ name: 'singlenamespace-alpha' }],
    });
  });

  it('a range without a channel goes on the package', () => {
    expect(parsePackageFlag('etcd@0.9.2..0.9.4')).toEqual({ name: 'etcd', minVersion: '0.9.2', maxVersion: '0.9.4', channels: [] });
  });

  it('a range with a channel goes on the channel', () => {
    expect(parsePackageFlag('argocd-operator/alpha@0.2.0..')).toEqual({
      name: 'argocd-operator', defaultChannel: 'alpha', channels: [{ name: 'alpha', minVersion: '0.2.0' }],
    });
  });

  it('a single version means exactly it: min equal to max', () => {
    expect(parsePackageFlag('etcd@0.9.4')).toEqual({ name: 'etcd', minVersion: '0.9.4', maxVersion: '0.9.4', channels: [] });
  });

  it('..MAX bounds only the top, and a leading v is stripped', () => {
    expect(parsePackageFlag('local-storage-operator/stable@..v4.16.0-202410011135')).toEqual({
      name: 'local-storage-operator', defaultChannel: 'stable', channels: [{ name: 'stable', maxVersion: '4.16.0-202410011135' }],
    });
  });

  it.each([
    ['', /package name ""/],
    ['Etcd', /package name "Etcd" must be lowercase/],
    ['etcd/', /channel name ""/],
    ['etcd/a/b', /more than one "\/"/],
    ['etcd@', /nothing after "@"/],
    ['etcd@..', /the range "\.\." names no version/],
    ['etcd@0.9', /version "0\.9" is not a semantic version/],
    ['etcd@latest', /version "latest" is not a semantic version/],
    ['etcd@0.9.4..0.9.2', /MIN 0\.9\.4 is above MAX 0\.9\.2/],
  ])('refuses %j naming the flag and showing the grammar', (text, why) => {
    expect(() => parsePackageFlag(text)).toThrow(BadInputError);
    expect(() => parsePackageFlag(text)).toThrow(why);
    expect(() => parsePackageFlag(text)).toThrow(/^--package .*; write NAME\[\/CHANNEL\]\[@RANGE\]/);
  });
});
