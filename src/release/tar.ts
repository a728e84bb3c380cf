/**
 * A tar reader for the release payload: a Writable that parses headers as bytes arrive and
 * hands each entry's data to the caller synchronously, with no stream per entry. It reads tar
 * exactly as tar-stream 3's extract does (same header decoding, checksum, ustar/gnu formats,
 * PAX and GNU long names, zero blocks, and the same error messages, which payload.ts tells
 * from other failures); tar.test.ts compares the two on the same archives. One difference: an
 * entry whose base-256 size field cannot be read, on which tar-stream hangs, is an error. A release layer
 * holds a few hundred small files: tar-stream's stream and promise per entry cost a plan more
 * CPU than gunzip.
 */
import { Writable } from 'node:stream';

export type TarEntryType =
  | 'file' | 'link' | 'symlink' | 'character-device' | 'block-device' | 'directory' | 'fifo' | 'contiguous-file'
  | 'pax-header' | 'pax-global-header' | 'gnu-long-link-path' | 'gnu-long-path';

export interface TarHeader {
  readonly name: string;
  /** Null for a base-256 size field that cannot be read (a directory's; any other entry's is an error). */
  readonly size: number | null;
  readonly type: TarEntryType | null;
  readonly linkname: string | null;
}

/**
 * Called for each entry: return a function to receive its data (in order, then `end` once),
 * or undefined to skip the data. A throw fails the stream with that error.
 */
export type OnTarEntry = (header: TarHeader) => ((data: Buffer | null) => void) | undefined;

const BLOCK = 512;
/** tar-stream's bound on PAX and GNU long-name headers. */
const MAX_HEADER_SIZE = 4 * 1024 * 1024;
const USTAR_MAGIC = Buffer.from([0x75, 0x73, 0x74, 0x61, 0x72, 0x00]);
const GNU_MAGIC = Buffer.from([0x75, 0x73, 0x74, 0x61, 0x72, 0x20]);
const GNU_VER = Buffer.from([0x20, 0x00]);

export class TarEntries extends Writable {
  /** Bytes received and not consumed yet. */
  private readonly queue: Buffer[] = [];
  private queued = 0;
  /** Data bytes of the current entry still to come (or padding / long header bytes). */
  private missing = 0;
  private header: MutableHeader | null = null;
  private sink: ((data: Buffer | null) => void) | undefined;
  private longHeader = false;
  private pax: Record<string, string> | null = null;
  private paxGlobal: Record<string, string> | null = null;
  private gnuLongPath: string | null = null;
  private gnuLongLinkPath: string | null = null;
  /** Reading an entry's data (as opposed to padding or skipped data). */
  private inData = false;

  constructor(private readonly onEntry: OnTarEntry) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.queue.push(chunk);
    this.queued += chunk.length;
    try {
      this.update();
    } catch (err) {
      callback(err as Error);
      return;
    }
    callback();
  }

  override _final(callback: (error?: Error | null) => void): void {
    callback(this.missing === 0 && this.queued === 0 ? null : new Error('Unexpected end of data'));
  }

  private update(): void {
    while (this.queued > 0) {
      if (this.missing > 0) {
        if (this.inData) {
          const data = this.shiftFirst(this.missing);
          this.missing -= data.length;
          this.sink?.(data);
          if (this.missing === 0) this.endData();
          continue;
        }
        if (this.longHeader) {
          if (this.missing > this.queued) break;
          this.consumeLongHeader();
          continue;
        }
        this.missing -= this.shiftFirst(this.missing).length;
        continue;
      }
      if (this.queued < BLOCK) break;
      this.consumeHeader();
    }
  }

  private endData(): void {
    this.inData = false;
    const sink = this.sink;
    this.sink = undefined;
    sink?.(null);
    this.missing = overflow(this.header!.size!);
  }

  private consumeHeader(): void {
    const header = decodeHeader(this.shift(BLOCK));
    if (!header) return;
    this.header = header;
    switch (header.type) {
      case 'gnu-long-path':
      case 'gnu-long-link-path':
      case 'pax-global-header':
      case 'pax-header':
        this.longHeader = true;
        // A size tar-stream cannot read is no size: the next block is a header again.
        this.missing = header.size ?? 0;
        if (this.missing > MAX_HEADER_SIZE) throw new Error('Header exceeds max size');
        return;
    }
    if (this.gnuLongPath) {
      header.name = this.gnuLongPath;
      this.gnuLongPath = null;
    }
    if (this.gnuLongLinkPath) {
      header.linkname = this.gnuLongLinkPath;
      this.gnuLongLinkPath = null;
    }
    if (this.pax) {
      if (this.pax.path) header.name = this.pax.path;
      if (this.pax.linkpath) header.linkname = this.pax.linkpath;
      if (this.pax.size) header.size = parseInt(this.pax.size, 10);
      this.pax = null;
    }
    if (header.size === null) {
      // tar-stream waits forever for the data of such an entry (a directory has none).
      if (header.type !== 'directory') throw new Error('Invalid tar header: unreadable size field');
    } else if (!(header.size >= 0)) {
      throw new Error('Invalid header');
    }
    const sink = this.onEntry(header);
    // As tar-stream: an empty entry or a directory has no data blocks to read.
    if (header.size === 0 || header.type === 'directory') {
      sink?.(null);
      return;
    }
    this.sink = sink;
    this.inData = true;
    this.missing = header.size!;
  }

  private consumeLongHeader(): void {
    this.longHeader = false;
    const { type } = this.header!;
    const size = this.header!.size ?? 0;
    this.missing = overflow(size);
    const buf = this.shift(size);
    switch (type) {
      case 'gnu-long-path':
        this.gnuLongPath = decodeStr(buf, 0, buf.length);
        break;
      case 'gnu-long-link-path':
        this.gnuLongLinkPath = decodeStr(buf, 0, buf.length);
        break;
      case 'pax-global-header':
        this.paxGlobal = decodePax(buf);
        break;
      case 'pax-header':
        this.pax = this.paxGlobal === null ? decodePax(buf) : { ...this.paxGlobal, ...decodePax(buf) };
        break;
    }
  }

  /** Up to `size` bytes, from the first buffer only. */
  private shiftFirst(size: number): Buffer {
    const first = this.queue[0]!;
    if (size >= first.length) {
      this.queue.shift();
      this.queued -= first.length;
      return first;
    }
    this.queue[0] = first.subarray(size);
    this.queued -= size;
    return first.subarray(0, size);
  }

  /** Exactly `size` bytes (the caller checked they are there). */
  private shift(size: number): Buffer {
    if (size === 0) return Buffer.alloc(0);
    const chunk = this.shiftFirst(size);
    if (chunk.length === size) return chunk;
    const chunks = [chunk];
    let rest = size - chunk.length;
    while (rest > 0) {
      const next = this.shiftFirst(rest);
      chunks.push(next);
      rest -= next.length;
    }
    return Buffer.concat(chunks, size);
  }
}

function overflow(size: number): number {
  size &= 511;
  return size && BLOCK - size;
}

interface MutableHeader {
  name: string;
  size: number | null;
  type: TarEntryType | null;
  linkname: string | null;
}

function decodeHeader(buf: Buffer): MutableHeader | null {
  const typeflag = buf[156] === 0 ? 0 : buf[156]! - 48;
  let name = decodeStr(buf, 0, 100);
  const size = decodeOct(buf, 124, 12);
  const linkname = buf[157] === 0 ? null : decodeStr(buf, 157, 100);
  const sum = checksum(buf);
  // The checksum of a block of zeros: no header here.
  if (sum === 8 * 32) return null;
  if (sum !== decodeOct(buf, 148, 8)) throw new Error('Invalid tar header. Maybe the tar is corrupted or it needs to be gunzipped?');
  if (buf.subarray(257, 263).equals(USTAR_MAGIC)) {
    if (buf[345]) name = `${decodeStr(buf, 345, 155)}/${name}`;
  } else if (!(buf.subarray(257, 263).equals(GNU_MAGIC) && buf.subarray(263, 265).equals(GNU_VER))) {
    throw new Error('Invalid tar header: unknown format.');
  }
  // (tar-stream turns a file named with a trailing slash into a directory after it has taken
  // the entry's type, so such an entry stays a file.)
  return { name, size, type: toType(typeflag), linkname };
}

function toType(flag: number): TarEntryType | null {
  switch (flag) {
    case 0: return 'file';
    case 1: return 'link';
    case 2: return 'symlink';
    case 3: return 'character-device';
    case 4: return 'block-device';
    case 5: return 'directory';
    case 6: return 'fifo';
    case 7: return 'contiguous-file';
    case 72: return 'pax-header';
    case 55: return 'pax-global-header';
    case 27: return 'gnu-long-link-path';
    case 28:
    case 30: return 'gnu-long-path';
  }
  return null;
}

function checksum(block: Buffer): number {
  let sum = 8 * 32;
  for (let i = 0; i < 148; i++) sum += block[i]!;
  for (let j = 156; j < 512; j++) sum += block[j]!;
  return sum;
}

function indexOf(block: Buffer, byte: number, offset: number, end: number): number {
  for (; offset < end; offset++) if (block[offset] === byte) return offset;
  return end;
}

function decodeStr(buf: Buffer, offset: number, length: number): string {
  return buf.toString('utf8', offset, indexOf(buf, 0, offset, offset + length));
}

/** Octal (leading spaces and NULs skipped, up to a space), or base-256 when the first byte has its top bit set. */
function decodeOct(buf: Buffer, offset: number, length: number): number | null {
  const val = buf.subarray(offset, offset + length);
  if (val[0]! & 0x80) return parse256(val);
  let start = 0;
  while (start < val.length && val[start] === 32) start++;
  const end = Math.min(indexOf(val, 32, start, val.length), val.length);
  while (start < end && val[start] === 0) start++;
  if (end === start) return 0;
  return parseInt(val.toString('utf8', start, end), 8);
}

function parse256(buf: Buffer): number | null {
  let positive: boolean;
  if (buf[0] === 0x80) positive = true;
  else if (buf[0] === 0xff) positive = false;
  else return null;
  let sum = 0;
  for (let i = buf.length - 1, power = 0; i > 0; i--, power++) sum += (positive ? buf[i]! : 0xff - buf[i]!) * 256 ** power;
  return positive ? sum : -1 * sum;
}

function decodePax(buf: Buffer): Record<string, string> {
  const result: Record<string, string> = {};
  while (buf.length) {
    let i = 0;
    while (i < buf.length && buf[i] !== 32) i++;
    const len = parseInt(buf.toString('utf8', 0, i), 10);
    if (!len) return result;
    const record = buf.toString('utf8', i + 1, len - 1);
    const keyIndex = record.indexOf('=');
    if (keyIndex === -1) return result;
    result[record.slice(0, keyIndex)] = record.slice(keyIndex + 1);
    buf = buf.subarray(len);
  }
  return result;
}
