/** The unit tests' image runtime: in memory, pulls always work, pins take effect at once. */
import type { PullAuth, RuntimeImage } from '../../src/cri/client.js';
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
