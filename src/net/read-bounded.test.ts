import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { RegistryError } from '../errors.js';
import { readBody, readBounded, readPrefix, ResponseTooLarge } from './read-bounded.js';

const chunks = (n: number, size: number): Buffer[] => Array.from({ length: n }, () => Buffer.alloc(size, 'a'));

describe('bounded reads', () => {
  it('reads a body within its bound whole', async () => {
    expect((await readBounded(Readable.from(chunks(4, 1024)), 4096, 'r')).length).toBe(4096);
  });

  it('refuses a body over its bound as a registry error naming it and the bound, and destroys it', async () => {
    const body = Readable.from(chunks(100, 1024));
    const read = readBounded(body, 4096, 'reg.example: token service auth.example');
    await expect(read).rejects.toThrow(RegistryError);
    await expect(read).rejects.toThrow(/^reg\.example: token service auth\.example: answer larger than the 4096-byte bound for it/);
    expect(body.destroyed).toBe(true);
    await expect(readBody(Readable.from(chunks(2, 10)), 15, 'x')).rejects.toThrow(ResponseTooLarge);
  });

  it('keeps only a prefix of an error body and reads no further', async () => {
    let pulled = 0;
    const body = Readable.from((function* () {
      for (let i = 0; i < 1_000; i++) {
        pulled++;
        yield Buffer.alloc(1024, i === 0 ? 'e' : 'a');
      }
    })());
    const prefix = await readPrefix(body, 1500);
    expect(prefix.length).toBe(1500);
    expect(prefix.subarray(0, 1024).toString()).toBe('e'.repeat(1024));
    expect(body.destroyed).toBe(true);
    expect(pulled).toBeLessThan(50);
  });
});
