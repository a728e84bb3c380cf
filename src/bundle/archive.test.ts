import { describe, expect, it } from 'vitest';
import { archiveDirFor, tarBytes } from './archive.js';
import { sizeAtLeast } from '../cli/flag-values.js';

describe('--max-archive-size', () => {
  const maxArchiveSize = sizeAtLeast('max-archive-size', 2 ** 20);
  it('reads sizes as Kubernetes quantities do, with or without a B', () => {
    expect(maxArchiveSize('4G')).toBe(4e9);
    expect(maxArchiveSize('4Gi')).toBe(4 * 1024 ** 3);
    expect(maxArchiveSize('500Mi')).toBe(500 * 1024 ** 2);
    expect(maxArchiveSize('1.5GiB')).toBe(1.5 * 1024 ** 3);
    expect(maxArchiveSize('2097152')).toBe(2 * 1024 ** 2);
  });

  it('refuses sizes under 1 MiB and nonsense, naming the flag and the form', () => {
    for (const bad of ['512K', '10']) expect(() => maxArchiveSize(bad), bad).toThrow(/^--max-archive-size "(512K|10)" is under 1.0 MiB, the least it takes; use e.g. 4Gi/);
    for (const bad of ['big', '-4G', '4X']) expect(() => maxArchiveSize(bad), bad).toThrow(/^--max-archive-size: "(big|-4G|4X)" is not a size; use e.g. 4Gi, 4G/);
  });

  it('puts the parts beside the layout and bounds their size from above', () => {
    expect(archiveDirFor('/media/usb/bundle/')).toBe('/media/usb/bundle.parts');
    // A header block and up to a block of padding per file, plus the end-of-archive blocks.
    expect(tarBytes(10_000, 3)).toBeGreaterThanOrEqual(10_000 + 3 * 1024 + 1024);
  });
});
