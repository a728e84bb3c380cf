import { describe, expect, it } from 'vitest';
import { ensureFreeSpace, spaceShortfall } from './disk-space.js';

describe('free space check', () => {
  it('counts the blocks an unprivileged writer may use', () => {
    expect(spaceShortfall(10 * 4096, { bavail: 10, bsize: 4096 })).toBe(0);
    expect(spaceShortfall(10 * 4096 + 1, { bavail: 10n, bsize: 4096n })).toBe(1);
  });

  it('refuses in one line naming the shortfall and the fix', async () => {
    const fakeStatFs = async () => ({ bavail: 256, bsize: 4096 });
    await expect(ensureFreeSpace('/media/usb/bundle', 3 * 1024 * 1024, 'or choose another --output-dir', fakeStatFs)).rejects.toMatchObject({
      exitCode: 2,
      message: 'not enough free space in /media/usb/bundle: 3.0 MiB more is needed, 1.0 MiB is free (short by 2.0 MiB); free up space there or choose another --output-dir',
    });
    await expect(ensureFreeSpace('/media/usb/bundle', 1024 * 1024, 'or choose another --output-dir', fakeStatFs)).resolves.toBeUndefined();
  });
});
