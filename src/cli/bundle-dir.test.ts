import { expect, it } from 'vitest';
import { bundleDirFrom, DEPRECATED_TO } from './bundle-dir.js';

it('takes --output-dir as is, with no warning', () => {
  const warnings: string[] = [];
  expect(bundleDirFrom({ 'output-dir': 'ocp-4.16.3' }, (l) => warnings.push(l))).toBe('ocp-4.16.3');
  expect(warnings).toEqual([]);
});

it('takes the deprecated --to with a warning, and refuses one that is a release version', () => {
  const warnings: string[] = [];
  expect(bundleDirFrom({ to: '/media/usb/ocp-4.16.3' }, (l) => warnings.push(l))).toBe('/media/usb/ocp-4.16.3');
  expect(warnings).toEqual([DEPRECATED_TO]);
  for (const version of ['4.16.3', '4.16', 'v4.17.0', '4.18.0-rc.1']) {
    expect(() => bundleDirFrom({ to: version }, () => undefined)).toThrow(`bundle create --to ${version}: looks like a release version`);
  }
});

it('refuses no directory, an empty one, or both spellings', () => {
  expect(() => bundleDirFrom({}, () => undefined)).toThrow('name the bundle directory with --output-dir DIR');
  expect(() => bundleDirFrom({ 'output-dir': '' }, () => undefined)).toThrow('name the bundle directory with --output-dir DIR');
  expect(() => bundleDirFrom({ 'output-dir': 'a', to: 'b' }, () => undefined)).toThrow('give --output-dir only');
});
