/**
 * The docs/*.md pages, for `prestage docs TOPIC` on an admin host that has only the executable:
 * scripts/dist.ts embeds them in the single executable; the npm package ships docs/ beside dist/.
 */
import { open, readdir } from 'node:fs/promises';

/** Defined by scripts/dist.ts: JSON of `{ topic: page text }`. */
declare const __PRESTAGE_DOCS__: string | undefined;

/** A page longer than this is not one of ours. */
const MAX_PAGE_BYTES = 1024 * 1024;

/** `planning` → the text of docs/planning.md. */
export async function docsPages(dir: URL = new URL('../../docs/', import.meta.url)): Promise<ReadonlyMap<string, string>> {
  if (typeof __PRESTAGE_DOCS__ === 'string') return new Map(Object.entries(JSON.parse(__PRESTAGE_DOCS__) as Record<string, string>));
  const names = (await readdir(dir).catch(() => [] as string[])).filter((name) => name.endsWith('.md')).sort();
  const pages = await Promise.all(names.map(async (name) => [name.replace(/\.md$/, ''), await readPage(new URL(name, dir))] as const));
  return new Map(pages);
}

/** At most MAX_PAGE_BYTES of a page: one read into a buffer of that size. */
async function readPage(url: URL): Promise<string> {
  const handle = await open(url, 'r');
  try {
    const buffer = Buffer.alloc(MAX_PAGE_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, MAX_PAGE_BYTES, 0);
    return buffer.subarray(0, bytesRead).toString('utf8');
  } finally {
    await handle.close();
  }
}
