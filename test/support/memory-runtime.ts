/** The agent unit tests' fakes: an image runtime in memory (pulls always work, pins take effect at once) and exact sizes from a table. */
import type { PullAuth, RuntimeImage } from '../../src/cri/client.js';
import type { ImageSizeSource, SizeLookupOptions, SizeResult } from '../../src/agent/image-sizes.js';
import type { ImageFilesystem, ImageRuntime, RuntimePullOptions } from '../../src/agent/runtime.js';

const MiB = 2 ** 20;

export class MemoryRuntime implements ImageRuntime {
  readonly images = new Map<string, { pinned: boolean }>();
  readonly pulls: string[] = [];
  /** The credentials each pull was given. */
  readonly auths = new Map<string, PullAuth | undefined>();
  constructor(private readonly freeBytes: number) {}
  async listImages(): Promise<RuntimeImage[]> {
    return [...this.images].map(([name, { pinned }]) => ({ id: name, repoTags: [], repoDigests: [name], size: MiB, pinned }));
  }
  async pull(name: string, options?: RuntimePullOptions): Promise<void> {
    this.auths.set(name, options?.auth);
    this.pulls.push(name);
    this.images.set(name, { pinned: false });
  }
  async imageFilesystem(): Promise<ImageFilesystem> {
    return { mountpoint: '/var/lib/containers', capacityBytes: 100 * MiB, freeBytes: this.freeBytes };
  }
  async pin(names: readonly string[]): Promise<void> {
    for (const [name, entry] of this.images) entry.pinned = names.includes(name);
  }
  close(): void {}
}

/** Digest pullspecs by number: `quay.io/ns/repo@sha256:000…01`. */
export const image = (n: number): string => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;
const layer = (name: string, mib: number) => ({ digest: `sha256:${name.padStart(64, '0')}`, diskBytes: mib * MiB, exact: true });
const base = layer('base', 3);
/** Three images on one 3 MiB base layer, with own layers of 1, 1 and 2 MiB; any other is unknown. */
export const SIZE_TABLE: ReadonlyMap<string, SizeResult> = new Map<string, SizeResult>([
  [image(1), { layers: [base, layer('1', 1)], from: 'test' }],
  [image(2), { layers: [base, layer('2', 1)], from: 'test' }],
  [image(3), { layers: [base, layer('3', 2)], from: 'test' }],
]);

/** Exact sizes from a table, as the registry lookup would give them; records what was asked. */
export class TableSizes implements ImageSizeSource {
  readonly asked: Array<{ images: string[]; arch: string }> = [];
  constructor(private readonly table: ReadonlyMap<string, SizeResult> = SIZE_TABLE) {}
  async layers(images: readonly string[], options: SizeLookupOptions): Promise<Map<string, SizeResult>> {
    this.asked.push({ images: [...images], arch: options.arch });
    return new Map(images.map((name) => [name, this.table.get(name) ?? { error: 'manifest not found (404)' }]));
  }
  async close(): Promise<void> {}
}
