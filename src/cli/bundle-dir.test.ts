import { expect, it } from 'vitest';
import { bundleDirFrom, toIsNoDirectory } from './bundle-dir.js';

it('takes --output-dir as is', () => {
  expect(bundleDirFrom({ 'output-dir': 'ocp-4.16.3' })).toBe('ocp-4.16.3');
});

it('refuses no directory or an empty one', () => {
  expect(() => bundleDirFrom({})).toThrow('name the bundle directory with --output-dir DIR');
  expect(() => bundleDirFrom({ 'output-dir': '' })).toThrow('name the bundle directory with --output-dir DIR');
});

it('says a directory given to --to belongs to --output-dir', () => {
  expect(toIsNoDirectory('/media/usb/ocp')).toBe('bundle create --to /media/usb/ocp: --to is a release version (as in plan and stage), not the bundle directory; name the directory with --output-dir /media/usb/ocp');
});
