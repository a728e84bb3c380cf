import { gzipSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { diskBytesFromTrailer } from './sizes.js';

const trailer = (gz: Buffer) => gz.subarray(gz.length - 4);

describe('diskBytesFromTrailer', () => {
  it('reads the exact uncompressed size of a gzip member', () => {
    const data = Buffer.concat([randomBytes(50_000), Buffer.alloc(200_000, 'x')]);
    const gz = gzipSync(data);
    expect(diskBytesFromTrailer(gz.length, trailer(gz))).toBe(data.length);
  });
  it('accepts incompressible data that grew slightly', () => {
    const data = randomBytes(100_000);
    const gz = gzipSync(data);
    expect(gz.length).toBeGreaterThan(data.length);
    expect(diskBytesFromTrailer(gz.length, trailer(gz))).toBe(data.length);
  });
  it('refuses a trailer of a small last member after a big first member', () => {
    const gz = Buffer.concat([gzipSync(randomBytes(300_000)), gzipSync(Buffer.from('tail'))]);
    expect(diskBytesFromTrailer(gz.length, trailer(gz))).toBeUndefined();
  });
  it('refuses layers of 4 GiB and more, whose ISIZE has wrapped', () => {
    expect(diskBytesFromTrailer(2 ** 32 + 10, Buffer.from([1, 0, 0, 0]))).toBeUndefined();
  });
  it('refuses sizes beyond deflate\'s maximum ratio', () => {
    expect(diskBytesFromTrailer(100, Buffer.from([0xff, 0xff, 0xff, 0x7f]))).toBeUndefined();
  });
});
