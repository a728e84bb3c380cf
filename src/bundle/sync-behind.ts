/**
 * Making the layout's blobs durable before index.json names them, without stalling the link
 * on fsync.
 */
import { open } from 'node:fs/promises';
import pLimit from 'p-limit';

/** A blob this big is fsynced as soon as it is in blobs/, behind the transfer. */
const SYNC_BEHIND_BYTES = 1024 * 1024;

/**
 * The blobs written, to be made durable before the index names them. The disk writes a big
 * blob back while the next ones download (a flush of hundreds of MiB at the end took a fifth
 * of an uncapped bundle's time); one fsync at a time, so the thread pool keeps its other
 * threads for the blobs' reads and writes. Small blobs are synced together at the end, where
 * the journal commits them in a few batches.
 */
export class SyncBehind {
  private readonly small: string[] = [];
  private behind: Promise<void> = Promise.resolve();
  private failure: { error: unknown } | undefined;

  add(path: string, bytes: number): void {
    if (bytes < SYNC_BEHIND_BYTES) {
      this.small.push(path);
      return;
    }
    this.behind = this.behind.then(() => syncFiles([path])).catch((error: unknown) => {
      this.failure ??= { error };
    });
  }

  /** The fsyncs in flight done, failed or not (before the command returns either way). */
  settled(): Promise<void> {
    return this.behind;
  }

  /** Every blob written is on disk; the first fsync that failed fails it. */
  async finish(): Promise<void> {
    await this.behind;
    if (this.failure) throw this.failure.error;
    await syncFiles(this.small);
  }
}

/** fsync every file written, a few at a time: the disk queues them together. */
async function syncFiles(paths: readonly string[]): Promise<void> {
  const limit = pLimit(16);
  await Promise.all(paths.map((path) => limit(async () => {
    const handle = await open(path, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  })));
}

/** fsync a directory: the renames into it are durable. */
export async function syncDir(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
