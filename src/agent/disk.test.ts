import { describe, expect, it } from 'vitest';
import { checkDisk, imageBytes, type DiskCheckSet } from './disk.js';
import type { SizeResult } from './image-sizes.js';

const image = (n: number) => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;
const layer = (name: string, diskBytes: number, exact = true) => ({ digest: `sha256:${name.padStart(64, '0')}`, diskBytes, exact });
const layers = (...list: ReturnType<typeof layer>[]): SizeResult => ({ layers: list, from: 'test' });

// Two base layers shared by every image, and one own layer each.
const BASE = layer('b1', 1000);
const BASE2 = layer('b2', 500);
const sizes = new Map<string, SizeResult>([
  [image(1), layers(BASE, BASE2, layer('1', 100))],
  [image(2), layers(BASE, BASE2, layer('2', 200))],
  [image(3), layers(BASE, layer('3', 300))],
  [image(4), layers(BASE, layer('4', 400), layer('4', 400))],
]);
const set = (name: string, images: number[], annotationBytes?: number): DiskCheckSet => ({ name, images: images.map(image), ...(annotationBytes !== undefined ? { annotationBytes } : {}) });

describe('checkDisk', () => {
  it('counts layers shared by the images of a set once', () => {
    const result = checkDisk({ sets: [set('a', [1, 2])], present: new Set(), sizes, freeBytes: 1800, reserveBytes: 0 });
    expect(result.failures.size).toBe(0);
    expect([...result.admitted]).toEqual([[image(1), 1600], [image(2), 1700]]);
    const tight = checkDisk({ sets: [set('a', [1, 2])], present: new Set(), sizes, freeBytes: 1799, reserveBytes: 0 });
    expect(tight.failures.get('a')).toBe('not enough disk: 2 images need 1800 bytes (exact, 4 layers), 1799 free after the 0-byte reserve and earlier sets; nothing pulled');
    expect(tight.admitted.size).toBe(0);
  });

  it('subtracts the layers of stored images of the selecting sets', () => {
    // image 1 is stored (named by set "a"): its base layers are on disk; image 2 adds only its own.
    const result = checkDisk({ sets: [set('a', [1]), set('b', [2, 3])], present: new Set([image(1)]), sizes, freeBytes: 500, reserveBytes: 0 });
    expect(result.failures.size).toBe(0);
    expect([...result.admitted]).toEqual([[image(2), 1700], [image(3), 1300]]);
    const tight = checkDisk({ sets: [set('a', [1]), set('b', [2, 3])], present: new Set([image(1)]), sizes, freeBytes: 499, reserveBytes: 0 });
    expect(tight.failures.get('b')).toBe('not enough disk: 2 images need 500 bytes (exact, 2 layers), 499 free after the 0-byte reserve and earlier sets; nothing pulled');
    // A stored image no selecting set names says nothing about what is on disk: not subtracted.
    const unnamed = checkDisk({ sets: [set('b', [2])], present: new Set([image(1)]), sizes, freeBytes: 1699, reserveBytes: 0 });
    expect(unnamed.failures.get('b')).toBe('not enough disk: 1 image needs 1700 bytes (exact, 3 layers), 1699 free after the 0-byte reserve and earlier sets; nothing pulled');
  });

  it('is cumulative across sets in order: a later set gets what is left, less layers admitted before it', () => {
    // a: 1600 of 2000 (reserve 100 → 1900 available, 300 left); b: image 3 needs only layer 3 (300): fits exactly;
    // c: image 4 needs layer 4 once (400): does not fit in what is left (0).
    const result = checkDisk({ sets: [set('a', [1]), set('b', [1, 3]), set('c', [4])], present: new Set(), sizes, freeBytes: 2000, reserveBytes: 100 });
    expect(result.failures.has('a')).toBe(false);
    expect(result.failures.has('b')).toBe(false);
    expect(result.failures.get('c')).toBe('not enough disk: 1 image needs 400 bytes (exact, 1 layer), 0 free after the 100-byte reserve and earlier sets; nothing pulled');
    expect([...result.admitted.keys()]).toEqual([image(1), image(3)]);
    // A failed set reserves nothing: the next one still gets the space.
    const skip = checkDisk({ sets: [set('a', [1, 2, 3, 4]), set('b', [3])], present: new Set(), sizes, freeBytes: 1800, reserveBytes: 0 });
    expect(skip.failures.get('a')).toMatch(/^not enough disk: 4 images need 2500 bytes \(exact, 6 layers\), 1800 free/);
    expect([...skip.admitted]).toEqual([[image(3), 1300]]);
  });

  it('says how many new layers were estimated as 2x compressed', () => {
    const partly = new Map<string, SizeResult>([[image(5), layers(layer('z', 2000, false), layer('g', 10))]]);
    expect(checkDisk({ sets: [set('a', [5])], present: new Set(), sizes: partly, freeBytes: 1000, reserveBytes: 0 }).failures.get('a')).toBe(
      'not enough disk: 1 image needs 2010 bytes (2 layers, 1 of them estimated as 2x compressed), 1000 free after the 0-byte reserve and earlier sets; nothing pulled',
    );
  });

  it("falls back to the set's annotation when some image's layers are unknown, and says why", () => {
    const withUnknown = new Map(sizes).set(image(9), { error: 'mirror m.example/ns/repo: connection error ECONNREFUSED' });
    // Annotation 3000 over 3 images = 1000 per image; 2 missing → 2000.
    const result = checkDisk({ sets: [set('a', [1, 9, 3], 3000)], present: new Set([image(3)]), sizes: withUnknown, freeBytes: 1999, reserveBytes: 0 });
    expect(result.failures.get('a')).toBe(
      `not enough disk: 2 images need 2000 bytes (estimated from the prestage.dev/disk-bytes annotation; exact sizes unknown for ${image(9)}: mirror m.example/ns/repo: connection error ECONNREFUSED), 1999 free after the 0-byte reserve and earlier sets; nothing pulled`,
    );
    expect(result.notExact.get('a')).toMatch(/^disk check estimated from the prestage\.dev\/disk-bytes annotation: exact sizes unknown for /);
    const fits = checkDisk({ sets: [set('a', [1, 9, 3], 3000)], present: new Set([image(3)]), sizes: withUnknown, freeBytes: 2000, reserveBytes: 0 });
    // The pull timeout still gets the exact size where it is known.
    expect([...fits.admitted]).toEqual([[image(1), 1600], [image(9), 1000]]);
  });

  it('pulls a set unchecked when neither exact sizes nor an annotation exist, and reports that it did', () => {
    const result = checkDisk({ sets: [set('a', [7, 8])], present: new Set(), sizes: new Map(), freeBytes: 0, reserveBytes: 10 });
    expect(result.failures.size).toBe(0);
    expect([...result.admitted]).toEqual([[image(7), undefined], [image(8), undefined]]);
    expect(result.notExact.get('a')).toBe(`pulled without a disk check: exact sizes unknown for 2 images, e.g. ${image(7)}: not looked up, and no prestage.dev/disk-bytes annotation`);
  });

  it('sizes an image by its unique layers', () => {
    expect(imageBytes(sizes.get(image(4)))).toBe(1400);
    expect(imageBytes({ error: 'x' })).toBeUndefined();
  });
});
