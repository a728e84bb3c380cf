import { gzipSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { readTrailer } from './sizes.js';

const trailer = (gz: Buffer) => gz.subarray(gz.length - 4);
const isize = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n % 2 ** 32);
  return b;
};
const MiB = 1024 * 1024;

describe('readTrailer', () => {
  it('reads the exact uncompressed size of a gzip member', () => {
    const data = Buffer.concat([randomBytes(50_000), Buffer.alloc(200_000, 'x')]);
    const gz = gzipSync(data);
    expect(readTrailer(gz.length, trailer(gz))).toEqual({ exact: data.length });
  });
  it('accepts incompressible data that grew slightly', () => {
    const data = randomBytes(100_000);
    const gz = gzipSync(data);
    expect(gz.length).toBeGreaterThan(data.length);
    expect(readTrailer(gz.length, trailer(gz))).toEqual({ exact: data.length });
  });
  it('refuses a trailer of a small last member after a big first member', () => {
    const gz = Buffer.concat([gzipSync(randomBytes(300_000)), gzipSync(Buffer.from('tail'))]);
    expect(readTrailer(gz.length, trailer(gz))).toHaveProperty('implausible');
  });
  it("refuses sizes beyond deflate's maximum ratio", () => {
    expect(readTrailer(100, Buffer.from([0xff, 0xff, 0xff, 0x7f]))).toHaveProperty('implausible');
  });
  it('trusts ISIZE where no wrap is possible: under ~4 MiB compressed, 4 GiB would need more than 1032:1', () => {
    expect(readTrailer(3 * MiB, isize(900 * MiB))).toEqual({ exact: 900 * MiB });
  });
  it('trusts ISIZE of a mid-sized layer at an ordinary ratio: a wrap would need over 16:1', () => {
    expect(readTrailer(100 * MiB, isize(300 * MiB))).toEqual({ exact: 300 * MiB });
  });
  it('counts a big layer: 1.5 GiB compressed at an ordinary 4:1 is 6 GiB, whose ISIZE says 2 GiB', () => {
    expect(readTrailer(1536 * MiB, isize(6144 * MiB))).toHaveProperty('count', expect.stringMatching(/may hold 4 GiB or more .* lower bound/));
  });
  it('counts a small layer that already shows a ratio where wrapping is plausible (zeros: 4.5 GiB in 5 MiB)', () => {
    expect(readTrailer(5 * MiB, isize(4608 * MiB))).toHaveProperty('count');
  });
  it('counts a layer of 4 GiB or more compressed', () => {
    expect(readTrailer(2 ** 32 + 10, isize(2 ** 32 + 5000))).toHaveProperty('count');
  });
});
