import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { describe, expect, it } from 'vitest';
import { TarEntries } from './tar.js';

interface Seen {
  entries: Array<{ name: string; type: string | null; size: number | null; linkname: string | null; data?: string }>;
  error?: string;
}

/** Bytes in chunks of the given sizes (cycled), as a stream delivers them. */
function chunked(bytes: Buffer, sizes: readonly number[]): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const n = Math.max(1, sizes[i % sizes.length]!);
    chunks.push(bytes.subarray(at, at + n));
    at += n;
  }
  return chunks;
}

/** What tar-stream's extract gives, read as payload.ts read it: files' data taken, other entries resumed. */
async function withTarStream(chunks: readonly Buffer[]): Promise<Seen> {
  const seen: Seen = { entries: [] };
  const extract = tar.extract();
  const collect = (async () => {
    for await (const entry of extract) {
      const { name, type, size, linkname } = entry.header;
      const record: Seen['entries'][number] = { name, type: type ?? null, size: size ?? null, linkname: linkname ?? null };
      seen.entries.push(record);
      if (type !== 'file') {
        entry.resume();
        continue;
      }
      const parts: Buffer[] = [];
      for await (const chunk of entry as AsyncIterable<Buffer>) parts.push(chunk);
      record.data = Buffer.concat(parts).toString('latin1');
    }
  })();
  try {
    await Promise.all([pipeline(Readable.from(chunks), extract), collect]);
  } catch (err) {
    extract.destroy();
    seen.error = (err as Error).message;
  }
  return seen;
}

async function withTarEntries(chunks: readonly Buffer[]): Promise<Seen> {
  const seen: Seen = { entries: [] };
  const extract = new TarEntries((header) => {
    const record: Seen['entries'][number] = { name: header.name, type: header.type, size: header.size, linkname: header.linkname };
    seen.entries.push(record);
    if (header.type !== 'file') return undefined;
    const parts: Buffer[] = [];
    return (data) => {
      if (data) parts.push(data);
      else record.data = Buffer.concat(parts).toString('latin1');
    };
  });
  try {
    await pipeline(Readable.from(chunks), extract);
  } catch (err) {
    seen.error = (err as Error).message;
  }
  return seen;
}

async function expectSame(bytes: Buffer, sizes: readonly number[] = [bytes.length]): Promise<Seen> {
  const chunks = chunked(bytes, sizes);
  const expected = await withTarStream(chunks);
  expect(await withTarEntries(chunks)).toEqual(expected);
  return expected;
}

/** A raw header: `fields` written at their offsets, the checksum computed unless given. */
function header(fields: { name?: string; size?: number | Buffer; type?: string; linkname?: string; prefix?: string; magic?: 'ustar' | 'gnu' | 'none'; checksum?: number }): Buffer {
  const block = Buffer.alloc(512);
  block.write(fields.name ?? '', 0, 100, 'utf8');
  block.write('0000644\0', 100);
  if (Buffer.isBuffer(fields.size)) fields.size.copy(block, 124);
  else block.write(`${(fields.size ?? 0).toString(8).padStart(11, '0')}\0`, 124);
  block.write('14650000000\0', 136);
  block.write(fields.type ?? '0', 156, 1, 'latin1');
  if (fields.linkname) block.write(fields.linkname, 157, 100, 'utf8');
  if (fields.magic !== 'none') block.write(fields.magic === 'gnu' ? 'ustar  \0' : 'ustar\u000000', 257, 8, 'latin1');
  if (fields.prefix) block.write(fields.prefix, 345, 155, 'utf8');
  block.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${(fields.checksum ?? sum).toString(8).padStart(6, '0')}\0 `, 148, 8, 'latin1');
  return block;
}

const pad = (data: Buffer): Buffer => Buffer.concat([data, Buffer.alloc((512 - (data.length % 512)) % 512)]);
const entry = (h: Parameters<typeof header>[0], data: Buffer): Buffer => Buffer.concat([header({ ...h, size: h.size ?? data.length }), pad(data)]);
const end = Buffer.alloc(1024);
const pax = (records: Record<string, string>): Buffer => Buffer.from(Object.entries(records).map(([k, v]) => {
  const body = ` ${k}=${v}\n`;
  let len = body.length + 1;
  while (`${len}${body}`.length !== len) len++;
  return `${len}${body}`;
}).join(''));

async function packed(files: Array<{ name: string; data?: string; type?: 'file' | 'directory' | 'symlink'; linkname?: string }>): Promise<Buffer> {
  const pack = tar.pack();
  for (const f of files) pack.entry({ name: f.name, type: f.type ?? 'file', ...(f.linkname ? { linkname: f.linkname } : {}) }, f.type === 'file' || !f.type ? (f.data ?? '') : undefined);
  pack.finalize();
  const parts: Buffer[] = [];
  for await (const chunk of pack as AsyncIterable<Buffer>) parts.push(chunk);
  return Buffer.concat(parts);
}

describe('TarEntries reads tar as tar-stream does', () => {
  it('ustar archives, in any chunking', async () => {
    const bytes = await packed([
      { name: 'release-manifests/', type: 'directory' },
      { name: 'release-manifests/a.yaml', data: 'kind: A\n'.repeat(200) },
      { name: 'release-manifests/empty.yaml', data: '' },
      { name: `release-manifests/${'long-'.repeat(30)}.yaml`, data: 'x' },
      { name: 'release-manifests/link', type: 'symlink', linkname: 'a.yaml' },
      { name: 'other/b', data: 'b'.repeat(1024) },
    ]);
    const seen = await expectSame(bytes);
    expect(seen.entries.map((e) => e.name)).toContain('release-manifests/a.yaml');
    expect(seen.error).toBeUndefined();
    for (const sizes of [[1], [7, 511, 3], [512], [513, 100], [4096]]) await expectSame(bytes, sizes);
  });

  it('PAX (local and global) and GNU long names, GNU magic, prefixes, zero blocks between entries', async () => {
    const long = `release-manifests/${'p'.repeat(180)}.yaml`;
    const bytes = Buffer.concat([
      entry({ name: 'PaxGlobal', type: 'g' }, pax({ comment: 'x', path: 'global-path' })),
      entry({ name: 'PaxHeader', type: 'x' }, pax({ path: long, linkpath: 'target' })),
      entry({ name: 'short' }, Buffer.from('pax data')),
      entry({ name: 'after-global' }, Buffer.from('global applies to local only')),
      entry({ name: '././@LongLink', type: 'L', magic: 'gnu' }, Buffer.from(`${long}-gnu\0`)),
      entry({ name: 'trunc', magic: 'gnu' }, Buffer.from('gnu data')),
      Buffer.alloc(512),
      entry({ name: 'name.yaml', prefix: 'release-manifests' }, Buffer.from('prefixed')),
      entry({ name: 'old-dir/', magic: 'gnu' }, Buffer.alloc(0)),
      entry({ name: 'dir-with-size', type: '5' }, Buffer.alloc(0)),
      entry({ name: 'PaxHeader', type: 'x' }, pax({ size: '5' })),
      entry({ name: 'pax-size', size: 5 }, Buffer.from('12345')),
      end,
    ]);
    for (const sizes of [[bytes.length], [1], [300, 700]]) await expectSame(bytes, sizes);
  });

  it('base-256 sizes, bad sizes, bad checksums, unknown formats, truncation, trailing bytes', async () => {
    const data = Buffer.from('0123456789');
    const base256 = Buffer.alloc(12);
    base256[0] = 0x80;
    base256.writeUInt32BE(data.length, 8);
    const negative = Buffer.alloc(12, 0xff);
    const unreadable = Buffer.alloc(12);
    unreadable[0] = 0x81;
    const good = entry({ name: 'good' }, data);
    const cases = [
      Buffer.concat([entry({ name: 'b256', size: base256 }, data), end]),
      Buffer.concat([entry({ name: 'neg', size: negative }, Buffer.alloc(0)), end]),
      Buffer.concat([header({ name: 'unreadable-dir', size: unreadable, type: '5' }), good, end]),
      Buffer.concat([header({ name: 'nan', size: Buffer.from('zzzzzzzzzzz\0') }), good, end]),
      Buffer.concat([good, header({ name: 'bad-sum', checksum: 1 }), end]),
      Buffer.concat([good, header({ name: 'no-magic', magic: 'none' }), end]),
      good.subarray(0, 600),
      good.subarray(0, 512 + data.length),
      Buffer.concat([good, end, Buffer.from('trailing')]),
      Buffer.concat([entry({ name: 'PaxHeader', type: 'x', size: 5 * 1024 * 1024 }, Buffer.alloc(0)), end]),
      Buffer.alloc(0),
    ];
    for (const bytes of cases) for (const sizes of [[Math.max(1, bytes.length)], [1], [100, 700]]) await expectSame(bytes, sizes);
  });

  it('fails on an entry whose size field cannot be read (tar-stream waits forever for its data)', async () => {
    const unreadable = Buffer.alloc(12);
    unreadable[0] = 0x81;
    for (const type of ['0', '2']) {
      const seen = await withTarEntries([Buffer.concat([header({ name: 'x', size: unreadable, type }), end])]);
      expect(seen.error).toBe('Invalid tar header: unreadable size field');
    }
  });

  it('the same on randomly damaged archives', async () => {
    const base = await packed([
      { name: 'release-manifests/a.yaml', data: 'a: 1\n'.repeat(300) },
      { name: 'release-manifests/b.json', data: '{"b":2}' },
      { name: 'release-manifests/', type: 'directory' },
      { name: 'release-manifests/c', data: 'c'.repeat(700) },
    ]);
    let seed = 17;
    const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let round = 0; round < 1000; round++) {
      const bytes = Buffer.from(base);
      for (let n = 1 + Math.floor(random() * 4); n > 0; n--) bytes[Math.floor(random() * bytes.length)] = Math.floor(random() * 256);
      const cut = random() < 0.2 ? Math.floor(random() * bytes.length) : bytes.length;
      await expectSame(bytes.subarray(0, cut), [1 + Math.floor(random() * 1500)]);
    }
  });
});
