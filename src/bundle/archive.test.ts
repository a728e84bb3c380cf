import { describe, expect, it } from 'vitest';
import { archiveDirFor, tarBytes } from './archive.js';
import { parseSize } from '../units.js';

describe('--max-archive-size', () => {
  it('reads binary-unit sizes', () => {
    expect(parseSize('4G')).toBe(4 * 1024 ** 3);
    expect(parseSize('500M')).toBe(500 * 1024 ** 2);
    expect(parseSize('1.5GiB')).toBe(1.5 * 1024 ** 3);
    expect(parseSize('2097152')).toBe(2 * 1024 ** 2);
  });

  it('refuses sizes under 1 MiB and nonsense, naming the format', () => {
    for (const bad of ['512K', '10', 'big', '-4G', '4X']) expect(() => parseSize(bad), bad).toThrow(/expected a number with an optional K, M, G or T suffix, at least 1M/);
  });

  it('puts the parts beside the layout and bounds their size from above', () => {
    expect(archiveDirFor('/media/usb/bundle/')).toBe('/media/usb/bundle.parts');
    // A header block and up to a block of padding per file, plus the end-of-archive blocks.
    expect(tarBytes(10_000, 3)).toBeGreaterThanOrEqual(10_000 + 3 * 1024 + 1024);
  });
});
