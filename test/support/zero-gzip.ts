/**
 * A real gzip stream of `size` zero bytes, made in a second instead of deflating gigabytes:
 * one 64 MiB run of zeros deflated with a full flush (byte-aligned, no reference across it) is
 * repeated, then the final block and the trailer (CRC-32, ISIZE = size mod 2^32) follow.
 * Zeros shrink about 1000:1, so 4.5 GiB is about 4.6 MiB: small enough to serve from a test
 * registry, big enough that the ISIZE trailer wraps.
 */
import { createHash } from 'node:crypto';
import { constants, crc32, deflateRawSync } from 'node:zlib';

const RUN = 64 * 1024 * 1024;
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 3]);
const FINAL_EMPTY_BLOCK = Buffer.from([0x03, 0x00]);

export interface ZeroGzip {
  readonly bytes: Buffer;
  readonly digest: string;
  readonly uncompressedSize: number;
}

export function zeroGzip(size: number): ZeroGzip {
  const zeros = Buffer.alloc(RUN);
  const run = deflateRawSync(zeros, { level: 9, finishFlush: constants.Z_FULL_FLUSH });
  const parts: Buffer[] = [GZIP_HEADER];
  let crc = 0;
  for (let left = size; left > 0; left -= RUN) {
    const n = Math.min(RUN, left);
    parts.push(n === RUN ? run : deflateRawSync(zeros.subarray(0, n), { level: 9, finishFlush: constants.Z_FULL_FLUSH }));
    crc = crc32(zeros.subarray(0, n), crc);
  }
  const trailer = Buffer.alloc(8);
  trailer.writeUInt32LE(crc >>> 0, 0);
  trailer.writeUInt32LE(size % 2 ** 32, 4);
  const bytes = Buffer.concat([...parts, FINAL_EMPTY_BLOCK, trailer]);
  return { bytes, digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, uncompressedSize: size };
}
