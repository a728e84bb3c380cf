import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { API_VERSION, type PinnedImageSet } from '../api/prestage.js';
import { DISK_BYTES_ANNOTATION } from '../api/set-metadata.js';
import { createLogger } from '../telemetry/log.js';
import { DiskAdmission, annotationBytes } from './disk-admission.js';
import { image, TableSizes } from '../../test/support/memory-runtime.js';

const MiB = 2 ** 20;

const set = (name: string, images: string[], diskBytes?: number): PinnedImageSet => ({
  apiVersion: API_VERSION,
  kind: 'PinnedImageSet',
  metadata: { name, generation: 1, ...(diskBytes !== undefined ? { annotations: { [DISK_BYTES_ANNOTATION]: String(diskBytes) } } : {}) },
  spec: { pinnedImages: images.map((name) => ({ name })) },
});

function logged(): { log: ReturnType<typeof createLogger>; messages: () => Array<{ msg: string; set?: string }> } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { log: createLogger('warn', sink), messages: () => lines.map((line) => JSON.parse(line) as { msg: string; set?: string }) };
}

describe('DiskAdmission.admit', () => {
  it('admits what fits by exact size, fails whole the set that does not, and logs why', async () => {
    const { log, messages } = logged();
    const admission = new DiskAdmission({ reserveBytes: MiB, imageSizes: new TableSizes(), log });
    // a needs base + 1 MiB = 4 MiB; b then needs 1 + 2 MiB of its own with 1 MiB left.
    const { admitted, failures } = await admission.admit([set('a', [image(1)]), set('b', [image(2), image(3)])], new Set(), 6 * MiB, [], 'amd64');
    expect([...admitted]).toEqual([[image(1), 4 * MiB]]);
    expect(failures.get('b')).toBe(`not enough disk: 2 images need ${3 * MiB} bytes (exact, 2 layers), ${MiB} free after the ${MiB}-byte reserve and earlier sets; nothing pulled`);
    expect(messages()).toEqual([expect.objectContaining({ msg: 'set does not fit on disk', set: 'b' })]);
  });

  it('says so when a set is checked from its annotation, or not at all', async () => {
    const { log, messages } = logged();
    const admission = new DiskAdmission({ reserveBytes: 0, log });
    const { admitted, failures } = await admission.admit([set('a', [image(1)], MiB), set('b', [image(2)])], new Set(), 100 * MiB, [], 'amd64');
    expect([...admitted.keys()]).toEqual([image(1), image(2)]);
    expect(failures.size).toBe(0);
    expect(messages().map((entry) => [entry.msg, entry.set])).toEqual([
      ['no exact disk check for this set', 'a'],
      ['no exact disk check for this set', 'b'],
    ]);
  });

  it('with nothing missing, asks only for the sizes the status lacks: unreadable ones again after 10 minutes, none in the steady state', async () => {
    let now = 1_000_000;
    const sizes = new TableSizes();
    const admission = new DiskAdmission({ reserveBytes: 0, imageSizes: sizes, log: createLogger('silent'), now: () => now });
    const sets = [set('a', [image(1), image(4)])];
    const stored = new Set([image(1), image(4)]);
    const result = await admission.admit(sets, stored, 0, [], 'amd64');
    expect(result.admitted.size + result.failures.size).toBe(0);
    expect(sizes.asked.map((a) => a.images)).toEqual([[image(1), image(4)]]);
    await admission.admit(sets, stored, 0, [], 'amd64');
    now += 10 * 60_000 - 1;
    await admission.admit(sets, stored, 0, [], 'amd64');
    expect(sizes.asked).toHaveLength(1);
    now += 1;
    await admission.admit(sets, stored, 0, [], 'amd64');
    expect(sizes.asked.map((a) => a.images)).toEqual([[image(1), image(4)], [image(4)]]);
  });

  it('forgets the layers of images no selecting set names', async () => {
    const admission = new DiskAdmission({ reserveBytes: 0, imageSizes: new TableSizes(), log: createLogger('silent') });
    await admission.admit([set('a', [image(1), image(2)])], new Set([image(1), image(2)]), 0, [], 'amd64');
    expect(admission.imageBytes(image(2))).toBe(4 * MiB);
    await admission.admit([set('a', [image(1)])], new Set([image(1), image(2)]), 0, [], 'amd64');
    expect(admission.imageBytes(image(1))).toBe(4 * MiB);
    expect(admission.imageBytes(image(2))).toBeUndefined();
  });
});

describe('DiskAdmission bytes for the status', () => {
  it("sums a set's unique layers, and those of its stored images; unknown unless every image's layers are", async () => {
    const admission = new DiskAdmission({ reserveBytes: 0, imageSizes: new TableSizes(), log: createLogger('silent') });
    await admission.admit([set('a', [image(1), image(2), image(3), image(4)])], new Set(), 100 * MiB, [], 'amd64');
    expect(admission.setBytes([image(1), image(2), image(3)], (name) => name === image(1))).toEqual({ bytes: 7 * MiB, pulledBytes: 4 * MiB });
    expect(admission.setBytes([image(1), image(4)], () => true)).toBeUndefined();
    expect(admission.imageBytes(image(3))).toBe(5 * MiB);
    expect(admission.imageBytes(image(4))).toBeUndefined();
  });
});

describe('annotationBytes', () => {
  it('takes a positive number, and nothing else', () => {
    expect(annotationBytes(set('a', [], 42))).toBe(42);
    expect(annotationBytes(set('a', [], 0))).toBeUndefined();
    expect(annotationBytes(set('a', []))).toBeUndefined();
    expect(annotationBytes({ ...set('a', []), metadata: { name: 'a', annotations: { [DISK_BYTES_ANNOTATION]: 'lots' } } })).toBeUndefined();
  });
});
